"""A classic group's soft state: members, generation, parked requests.

This is Kafka's ClassicGroup: mutable, owned by one shard, never shared. The durable
form of a group is the GroupMetadata record; this object is rebuilt from it on load.
Parked JoinGroup/SyncGroup requests are opaque tokens, never futures.
"""

from __future__ import annotations

import struct
from collections.abc import Hashable
from dataclasses import dataclass, field
from enum import Enum

from .errors import ErrorCode
from .records import GroupMetadataValue, MemberMetadata

Token = Hashable


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(RuntimeError):
    pass


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: Token | None = None
    awaiting_sync: Token | None = None
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def matches(self, protocols: tuple[tuple[str, bytes], ...] | list[tuple[str, bytes]]) -> bool:
        return list(self.protocols) == list(protocols)

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None


def parse_subscribed_topics(metadata: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription (only its v0 prefix is read, as Kafka does)."""
    try:
        pos = 2  # int16 version
        (count,) = struct.unpack_from(">i", metadata, pos)
        pos += 4
        if count < 0 or count > len(metadata):
            return None
        topics = set()
        for _ in range(count):
            (n,) = struct.unpack_from(">h", metadata, pos)
            pos += 2
            if n < 0 or pos + n > len(metadata):
                return None
            topics.add(metadata[pos : pos + n].decode("utf-8"))
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState | None = None
    current_state_timestamp: int | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_join_members: set[str] = field(default_factory=set)
    pending_sync_members: set[str] = field(default_factory=set)
    subscribed_topics: set[str] | None = None
    new_member_added: bool = False

    # ---------------------------------------------------------------- state

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalStateTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        self.previous_state = self.state
        self.state = target
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    # ---------------------------------------------------------------- members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.pending_join_members.discard(member.member_id)
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join() == len(self.members) and not self.pending_join_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """NONE for a current member, else UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID (the static
        instance belongs to another member id now)."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return ErrorCode.NONE
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    # ---------------------------------------------------------------- protocols

    def _candidates(self) -> list[str]:
        members = list(self.members.values())
        if not members:
            return []
        first = members[0].protocol_names()
        return [n for n in first if all(n in m.protocol_names() for m in members[1:])]

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.state == GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        members = list(self.members.values())
        return any(all(n in m.protocol_names() for m in members) for n in names)

    def select_protocol(self) -> str:
        candidates = self._candidates()
        if not candidates:
            raise IllegalStateTransition(f"group {self.group_id}: no protocol supported by all members")
        votes: dict[str, int] = {c: 0 for c in candidates}
        for m in self.members.values():
            for name in m.protocol_names():
                if name in votes:
                    votes[name] += 1
                    break
        best = max(votes.values())
        return next(c for c in candidates if votes[c] == best)

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != "consumer":
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = parse_subscribed_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.protocol_type == "consumer"

    # ---------------------------------------------------------------- generations

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join is not None:
            return True
        for m in self.members.values():
            if m.awaiting_join is not None:
                self.leader_id = m.member_id
                return True
        return False

    # ---------------------------------------------------------------- durable form

    def to_record_value(self) -> GroupMetadataValue:
        members = tuple(
            MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(self.protocol_name),
                assignment=m.assignment,
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id if self.members else None,
            current_state_timestamp=(
                -1 if self.current_state_timestamp is None else self.current_state_timestamp
            ),
            members=members,
        )

    @classmethod
    def from_record_value(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        """A loaded group: Stable if it has members, else Empty (Kafka's replay rule)."""
        group = cls(
            group_id=group_id,
            state=GroupState.STABLE if value.members else GroupState.EMPTY,
            current_state_timestamp=(
                None if value.current_state_timestamp == -1 else value.current_state_timestamp
            ),
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            generation_id=value.generation,
            leader_id=value.leader,
        )
        for mm in value.members:
            member = Member(
                member_id=mm.member_id,
                group_instance_id=mm.group_instance_id,
                client_id=mm.client_id,
                client_host=mm.client_host,
                rebalance_timeout_ms=(
                    mm.session_timeout if mm.rebalance_timeout == -1 else mm.rebalance_timeout
                ),
                session_timeout_ms=mm.session_timeout,
                protocol_type=value.protocol_type,
                protocols=[(value.protocol or "", mm.subscription)],
                assignment=mm.assignment,
            )
            group.members[mm.member_id] = member
            if mm.group_instance_id is not None:
                group.static_members[mm.group_instance_id] = mm.member_id
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        group.subscribed_topics = group.compute_subscribed_topics()
        return group
