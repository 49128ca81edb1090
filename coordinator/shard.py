"""One ``__consumer_offsets`` partition's coordinator: Kafka's classic group protocol and offsets.

Handlers take a request, an opaque token and ``now_ms`` and return a ``Result``: the
records to append and the completions (token, response) this step produced. The
runtime releases completions only once everything written before them is committed.

Two kinds of state live here:
- durable state (``durable_groups``, ``offsets``), changed only by ``replay``;
- soft state (``groups``: members, parked requests, timers), owned by the handlers and
  rebuilt from the durable state on load (``load``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from . import commands as c
from .codec import record_size
from .config import GroupConfig
from .errors import ErrorCode
from .group import ClassicGroup, GroupState, Member, Token
from .image import DurableImage, replay_into
from .records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    empty_group_record,
)
from .timers import EXPIRE_KEY, Timer, TimerKind, TimerSet, heartbeat_key, join_key, sync_key

E = ErrorCode
S = GroupState


@dataclass(slots=True)
class Result:
    records: list[Record] = field(default_factory=list)
    completions: list[tuple[Token, c.Response]] = field(default_factory=list)


def _counter_ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"{next(counter):032x}"


def _commit_size(req: c.OffsetCommitRequest) -> int:
    """About what the offset records of one commit take (a little more, never less)."""
    size = 0
    group = len(req.group_id.encode())
    for topic, partitions in req.topics:
        per = group + len(topic.encode()) + 64
        for p in partitions:
            size += per + (len(p.metadata.encode()) if p.metadata else 0)
    return size


def _utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


class GroupCoordinatorShard:
    def __init__(self, config: GroupConfig | None = None, new_id: Callable[[], str] | None = None) -> None:
        self.config = config or GroupConfig()
        self._new_id = new_id or _counter_ids()
        self.groups: dict[str, ClassicGroup] = {}
        self.durable_groups: dict[str, GroupMetadataValue] = {}
        self.offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = {}
        self.timers = TimerSet()
        self._out = Result()
        self._now = 0

    # ================================================================ plumbing

    def _begin(self, now_ms: int) -> None:
        self._out = Result()
        self._now = now_ms

    def _end(self) -> Result:
        out, self._out = self._out, Result()
        for record in out.records:
            self.replay(record)
        return out

    def _respond(self, token: Token, response: c.Response) -> None:
        self._out.completions.append((token, response))

    def _write(self, record: Record) -> None:
        self._out.records.append(record)

    def _schedule(self, key: str, delay_ms: int, kind: TimerKind, group_id: str = "",
                  member_id: str = "", args: tuple[int, ...] = ()) -> None:
        self.timers.schedule(Timer(key, self._now + delay_ms, kind, group_id, member_id, args))

    # ================================================================ durable state

    def replay(self, record: Record) -> None:
        """Apply one committed (or about-to-be-committed) record to durable state."""
        replay_into(self.durable_groups, self.offsets, record)

    def durable_state(self) -> tuple[dict[str, GroupMetadataValue], dict[str, dict[tuple[str, int], OffsetCommitValue]]]:
        return (dict(self.durable_groups), {g: dict(o) for g, o in self.offsets.items()})

    @classmethod
    def load(cls, records: Iterable[Record], now_ms: int, config: GroupConfig | None = None,
             new_id: Callable[[], str] | None = None,
             image: DurableImage | None = None) -> tuple[GroupCoordinatorShard, Result]:
        """Build a shard by replaying a partition, then arm timers (Kafka's onLoaded).

        With ``image``, the shard takes over that already-replayed state (the caller gives it
        up) and ``records`` are the ones that follow it."""
        shard = cls(config, new_id)
        if image is not None:
            shard.durable_groups, shard.offsets = image.groups, image.offsets
        for record in records:
            shard.replay(record)
        shard._begin(now_ms)
        for group_id, value in shard.durable_groups.items():
            shard.groups[group_id] = ClassicGroup.from_record_value(group_id, value)
        for group_id in shard.offsets:
            if group_id not in shard.groups:
                shard.groups[group_id] = ClassicGroup(group_id)  # a simple (offsets-only) group
        for group in shard.groups.values():
            for member in group.members.values():
                shard._schedule(heartbeat_key(group.group_id, member.member_id),
                                member.session_timeout_ms, TimerKind.HEARTBEAT,
                                group.group_id, member.member_id)
            if len(group.members) > shard.config.max_size:
                shard._prepare_rebalance(group, "loaded group is over capacity")
        shard._schedule(EXPIRE_KEY, shard.config.offsets_retention_check_interval_ms,
                        TimerKind.EXPIRE_OFFSETS)
        return shard, shard._end()

    def unload(self) -> list[Token]:
        """Kafka's onUnloaded: every group goes Dead; returns the parked tokens to fail."""
        tokens: list[Token] = []
        for group in self.groups.values():
            for m in group.members.values():
                if m.awaiting_join is not None:
                    tokens.append(m.awaiting_join)
                    m.awaiting_join = None
                if m.awaiting_sync is not None:
                    tokens.append(m.awaiting_sync)
                    m.awaiting_sync = None
            group.transition_to(S.DEAD, self._now)
        self.timers.clear()
        return tokens

    def parked_tokens(self) -> list[Token]:
        out: list[Token] = []
        for group in self.groups.values():
            for m in group.members.values():
                if m.awaiting_join is not None:
                    out.append(m.awaiting_join)
                if m.awaiting_sync is not None:
                    out.append(m.awaiting_sync)
        return out

    # ================================================================ dispatch

    def handle(self, request: c.Request, token: Token, now_ms: int) -> Result:
        self._begin(now_ms)
        if isinstance(request, c.JoinGroupRequest):
            self._join_group(request, token)
        elif isinstance(request, c.SyncGroupRequest):
            self._sync_group(request, token)
        elif isinstance(request, c.HeartbeatRequest):
            self._respond(token, self._heartbeat(request))
        elif isinstance(request, c.LeaveGroupRequest):
            self._respond(token, self._leave_group(request))
        elif isinstance(request, c.OffsetCommitRequest):
            self._respond(token, self._offset_commit(request))
        elif isinstance(request, c.OffsetFetchRequest):
            self._respond(token, self._offset_fetch(request))
        elif isinstance(request, c.DescribeGroupsRequest):
            self._respond(token, self._describe_group(request))
        elif isinstance(request, c.ListGroupsRequest):
            self._respond(token, self._list_groups(request))
        elif isinstance(request, c.DeleteGroupsRequest):
            self._respond(token, self._delete_groups(request))
        else:
            self._respond(token, self._offset_delete(request))
        return self._end()

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def fire_due(self, now_ms: int) -> Result | None:
        """Fire the earliest due timer, if any; ``None`` when nothing is due."""
        timer = self.timers.pop_due(now_ms)
        if timer is None:
            return None
        self._begin(now_ms)
        group = self.groups.get(timer.group_id)
        if timer.kind is TimerKind.EXPIRE_OFFSETS:
            self._cleanup_group_metadata()
        elif group is None:
            pass
        elif timer.kind is TimerKind.HEARTBEAT:
            self._expire_member_heartbeat(group, timer.member_id)
        elif timer.kind is TimerKind.JOIN:
            self._complete_join(group)
        elif timer.kind is TimerKind.INITIAL_JOIN:
            self._try_complete_initial_rebalance(group, timer.args[0], timer.args[1])
        elif timer.kind is TimerKind.SYNC:
            self._expire_pending_sync(group, timer.args[0])
        return self._end()

    # ================================================================ JoinGroup

    def _join_error(self, token: Token, error: ErrorCode, member_id: str = "") -> None:
        self._respond(token, c.JoinGroupResponse(error, member_id=member_id))

    def _join_group(self, req: c.JoinGroupRequest, token: Token) -> None:
        if not req.group_id:
            return self._join_error(token, E.INVALID_GROUP_ID, req.member_id)
        if not (self.config.min_session_timeout_ms <= req.session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return self._join_error(token, E.INVALID_SESSION_TIMEOUT, req.member_id)
        group = self.groups.get(req.group_id)
        created = False
        if group is None:
            if req.member_id:
                return self._join_error(token, E.UNKNOWN_MEMBER_ID, req.member_id)
            group = ClassicGroup(req.group_id, current_state_timestamp=self._now)
            self.groups[req.group_id] = group
            created = True
        if not self._accept_joining_member(group, req.member_id):
            removed = group.remove(req.member_id)
            if removed is not None:
                self.timers.cancel(heartbeat_key(group.group_id, removed.member_id))
                self._fail_parked(removed, E.GROUP_MAX_SIZE_REACHED)
            self._join_error(token, E.GROUP_MAX_SIZE_REACHED)
        elif not req.member_id:
            self._join_new_member(group, req, token)
        else:
            self._join_existing_member(group, req, token)
        if created and not self._out.records:
            self._write(empty_group_record(group.group_id))

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.config.max_size
        if group.is_in(S.EMPTY, S.DEAD):
            return True
        if group.is_in(S.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join is not None) or group.num_awaiting_join() < limit
        return member_id in group.members or len(group.members) < limit

    def _join_new_member(self, group: ClassicGroup, req: c.JoinGroupRequest, token: Token) -> None:
        if group.is_in(S.DEAD):
            return self._join_error(token, E.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            return self._join_error(token, E.INCONSISTENT_GROUP_PROTOCOL)
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        new_member_id = f"{prefix}-{self._new_id()}"
        if req.group_instance_id is not None:
            existing = group.static_members.get(req.group_instance_id)
            if existing is not None:
                return self._update_static_member_then_rebalance_or_complete_join(
                    group, req, existing, new_member_id, token)
            return self._add_member_then_rebalance_or_complete_join(group, req, new_member_id, token)
        if req.require_known_member_id:
            group.pending_join_members.add(new_member_id)
            self._schedule(heartbeat_key(group.group_id, new_member_id), req.session_timeout_ms,
                           TimerKind.HEARTBEAT, group.group_id, new_member_id)
            return self._join_error(token, E.MEMBER_ID_REQUIRED, new_member_id)
        return self._add_member_then_rebalance_or_complete_join(group, req, new_member_id, token)

    def _join_existing_member(self, group: ClassicGroup, req: c.JoinGroupRequest, token: Token) -> None:
        member_id = req.member_id
        if group.is_in(S.DEAD):
            return self._join_error(token, E.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            return self._join_error(token, E.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if group.is_pending_member(member_id):
            if req.group_instance_id is not None:
                # Kafka raises IllegalStateException here: a pending id never carries an instance id.
                return self._join_error(token, E.UNKNOWN_SERVER_ERROR, member_id)
            return self._add_member_then_rebalance_or_complete_join(group, req, member_id, token)
        invalid = group.validate_member(member_id, req.group_instance_id)
        if invalid:
            return self._join_error(token, invalid, member_id)
        member = group.members[member_id]
        if group.is_in(S.PREPARING_REBALANCE):
            return self._update_member_then_rebalance_or_complete_join(group, member, req, token,
                                                                       "member rejoined")
        if group.is_in(S.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # The member lost its JoinGroup response: give it the current generation again.
                return self._respond(token, self._current_join_response(group, member, with_members=True))
            return self._update_member_then_rebalance_or_complete_join(group, member, req, token,
                                                                       "member changed its metadata")
        if group.is_in(S.STABLE):
            if group.is_leader(member_id):
                return self._update_member_then_rebalance_or_complete_join(group, member, req, token,
                                                                           "leader rejoined")
            if not member.matches(req.protocols):
                return self._update_member_then_rebalance_or_complete_join(group, member, req, token,
                                                                           "member changed its metadata")
            return self._respond(token, self._current_join_response(group, member, with_members=False))
        return self._join_error(token, E.UNKNOWN_MEMBER_ID, member_id)

    def _current_join_response(self, group: ClassicGroup, member: Member, with_members: bool,
                               leader: str | None = None, skip_assignment: bool = False) -> c.JoinGroupResponse:
        is_leader = group.is_leader(member.member_id)
        return c.JoinGroupResponse(
            E.NONE,
            member_id=member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=(leader if leader is not None else group.leader_id) or "",
            skip_assignment=skip_assignment,
            members=self._member_list(group) if (with_members and is_leader) else (),
        )

    @staticmethod
    def _member_list(group: ClassicGroup) -> tuple[c.JoinGroupMember, ...]:
        return tuple(
            c.JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
            for m in group.members.values()
        )

    def _park_join(self, member: Member, token: Token) -> None:
        if member.awaiting_join is not None and member.awaiting_join != token:
            # A newer JoinGroup replaces a parked one; answer the old so no request hangs.
            self._respond(member.awaiting_join, c.JoinGroupResponse(E.REBALANCE_IN_PROGRESS,
                                                                    member_id=member.member_id))
        member.awaiting_join = token

    def _add_member_then_rebalance_or_complete_join(self, group: ClassicGroup, req: c.JoinGroupRequest,
                                                    member_id: str, token: Token) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=list(req.protocols),
            is_new=True,
        )
        if group.is_in(S.PREPARING_REBALANCE) and group.previous_state == S.EMPTY:
            group.new_member_added = True
        group.add(member)
        self._park_join(member, token)
        self._schedule(heartbeat_key(group.group_id, member_id), self.config.new_member_join_timeout_ms,
                       TimerKind.HEARTBEAT, group.group_id, member_id)
        self._maybe_prepare_rebalance_or_complete_join(group, f"new member {member_id} joined")

    def _update_member_then_rebalance_or_complete_join(self, group: ClassicGroup, member: Member,
                                                       req: c.JoinGroupRequest, token: Token,
                                                       reason: str) -> None:
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        self._park_join(member, token)
        self._maybe_prepare_rebalance_or_complete_join(group, reason)

    def _update_static_member_then_rebalance_or_complete_join(
            self, group: ClassicGroup, req: c.JoinGroupRequest, old_member_id: str,
            new_member_id: str, token: Token) -> None:
        assert req.group_instance_id is not None
        if group.is_in(S.EMPTY, S.DEAD):
            return self._join_error(token, E.UNKNOWN_SERVER_ERROR)
        current_leader = group.leader_id
        new_member = self._replace_static_member(group, req.group_instance_id, old_member_id, new_member_id)
        self._reschedule_heartbeat(group, new_member)
        new_member.protocols = list(req.protocols)
        new_member.rebalance_timeout_ms = req.rebalance_timeout_ms
        new_member.session_timeout_ms = req.session_timeout_ms
        if group.is_in(S.STABLE):
            if group.select_protocol() == group.protocol_name:
                # Same protocol: persist the new id and answer with the current generation.
                if not self._write_group(group):
                    self._park_join(new_member, token)
                    return self._prepare_rebalance(group, "the group's metadata is larger than message.max.bytes")
                if req.supports_skip_assignment:
                    is_leader = group.is_leader(new_member_id)
                    self._respond(token, self._current_join_response(
                        group, new_member, with_members=is_leader, skip_assignment=is_leader))
                else:
                    self._respond(token, self._current_join_response(
                        group, new_member, with_members=False, leader=current_leader))
                return
            self._park_join(new_member, token)
            return self._prepare_rebalance(group, f"static member {req.group_instance_id} changed protocol")
        self._park_join(new_member, token)
        if group.is_in(S.COMPLETING_REBALANCE):
            return self._prepare_rebalance(group, f"static member {req.group_instance_id} rejoined")
        self._maybe_complete_join_phase(group)

    def _replace_static_member(self, group: ClassicGroup, instance_id: str, old_id: str,
                               new_id: str) -> Member:
        old = group.members.pop(old_id)
        if old.awaiting_join is not None:
            self._respond(old.awaiting_join, c.JoinGroupResponse(E.FENCED_INSTANCE_ID, member_id=old_id))
            old.awaiting_join = None
        if old.awaiting_sync is not None:
            self._respond(old.awaiting_sync, c.SyncGroupResponse(E.FENCED_INSTANCE_ID))
            old.awaiting_sync = None
        old.member_id = new_id
        group.members[new_id] = old
        group.static_members[instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        if old_id in group.pending_sync_members:
            group.pending_sync_members.discard(old_id)
            group.pending_sync_members.add(new_id)
        self.timers.cancel(heartbeat_key(group.group_id, old_id))
        return old

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str,
                           sync_error: ErrorCode = E.REBALANCE_IN_PROGRESS) -> None:
        if group.is_in(S.COMPLETING_REBALANCE):
            for m in group.members.values():
                m.assignment = b""
                if m.awaiting_sync is not None:
                    self._respond(m.awaiting_sync, c.SyncGroupResponse(sync_error))
                    m.awaiting_sync = None
                    # Kafka's propagateAssignment: a session that expired while the member was
                    # parked was ignored, so re-arm it now or the member could never expire.
                    self._reschedule_heartbeat(group, m)
        self.timers.cancel(sync_key(group.group_id))
        group.pending_sync_members.clear()
        is_initial = group.is_in(S.EMPTY)
        if is_initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule(join_key(group.group_id), delay, TimerKind.INITIAL_JOIN, group.group_id,
                           args=(delay, remaining))
        group.transition_to(S.PREPARING_REBALANCE, self._now)
        if not is_initial:
            if group.has_all_members_joined():
                self._complete_join(group)
            else:
                self._schedule(join_key(group.group_id), group.rebalance_timeout_ms(), TimerKind.JOIN,
                               group.group_id)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if (group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined()
                and group.previous_state != S.EMPTY):
            self._complete_join(group)

    def _try_complete_initial_rebalance(self, group: ClassicGroup, delay: int, remaining: int) -> None:
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self._schedule(join_key(group.group_id), new_delay, TimerKind.INITIAL_JOIN, group.group_id,
                           args=(new_delay, new_remaining))
        else:
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        self.timers.cancel(join_key(group.group_id))
        if group.is_in(S.DEAD) or not group.is_in(S.PREPARING_REBALANCE):
            return
        for m in list(group.members.values()):
            if m.awaiting_join is None and not m.is_static:
                group.remove(m.member_id)
                self.timers.cancel(heartbeat_key(group.group_id, m.member_id))
                self._fail_parked(m, E.UNKNOWN_MEMBER_ID)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only absent static members are left: wait another rebalance timeout for them.
            self._schedule(join_key(group.group_id), group.rebalance_timeout_ms(), TimerKind.JOIN,
                           group.group_id)
            return
        group.init_next_generation(self._now)
        if group.is_in(S.EMPTY):
            self._write(Record(GroupMetadataKey(group.group_id), group.to_record_value()))
            return
        members = self._member_list(group)
        for m in group.members.values():
            if m.awaiting_join is not None:
                self._respond(m.awaiting_join, c.JoinGroupResponse(
                    E.NONE,
                    member_id=m.member_id,
                    generation_id=group.generation_id,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader=group.leader_id or "",
                    members=members if group.is_leader(m.member_id) else (),
                ))
                m.awaiting_join = None
            self._reschedule_heartbeat(group, m)
            m.is_new = False
            group.pending_sync_members.add(m.member_id)
        self._schedule(sync_key(group.group_id), group.rebalance_timeout_ms(), TimerKind.SYNC,
                       group.group_id, args=(group.generation_id,))

    def _reschedule_heartbeat(self, group: ClassicGroup, member: Member, delay_ms: int | None = None) -> None:
        self._schedule(heartbeat_key(group.group_id, member.member_id),
                       member.session_timeout_ms if delay_ms is None else delay_ms,
                       TimerKind.HEARTBEAT, group.group_id, member.member_id)

    def _fail_parked(self, member: Member, error: ErrorCode) -> None:
        """Answer whatever the member has parked: it is leaving the group."""
        if member.awaiting_join is not None:
            self._respond(member.awaiting_join, c.JoinGroupResponse(error))
            member.awaiting_join = None
        if member.awaiting_sync is not None:
            self._respond(member.awaiting_sync, c.SyncGroupResponse(error))
            member.awaiting_sync = None

    def _remove_member_and_update_group(self, group: ClassicGroup, member: Member, reason: str) -> None:
        self._fail_parked(member, E.UNKNOWN_MEMBER_ID)
        group.remove(member.member_id)
        self.timers.cancel(heartbeat_key(group.group_id, member.member_id))
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
            # Kafka completes the join directly here, even during the initial rebalance.
            self._complete_join(group)

    def _expire_member_heartbeat(self, group: ClassicGroup, member_id: str) -> None:
        if group.is_in(S.DEAD):
            return
        if group.is_pending_member(member_id):
            group.pending_join_members.discard(member_id)
            if group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
                # As removePendingMemberAndUpdateClassicGroup: no initial-rebalance guard.
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        self._remove_member_and_update_group(group, member, f"session of {member_id} expired")

    def _expire_pending_sync(self, group: ClassicGroup, generation: int) -> None:
        if generation != group.generation_id or not group.is_in(S.COMPLETING_REBALANCE, S.STABLE):
            return
        if not group.pending_sync_members:
            return
        for member_id in list(group.pending_sync_members):
            member = group.remove(member_id)
            self.timers.cancel(heartbeat_key(group.group_id, member_id))
            if member is not None:
                self._fail_parked(member, E.UNKNOWN_MEMBER_ID)
        group.pending_sync_members.clear()
        self._prepare_rebalance(group, "members did not send SyncGroup in time")

    # ================================================================ SyncGroup

    def _sync_group(self, req: c.SyncGroupRequest, token: Token) -> None:
        def error(e: ErrorCode) -> None:
            self._respond(token, c.SyncGroupResponse(e))

        if not req.group_id:
            return error(E.INVALID_GROUP_ID)
        group = self.groups.get(req.group_id)
        if group is None or group.is_in(S.EMPTY):
            return error(E.UNKNOWN_MEMBER_ID)
        if group.is_in(S.DEAD):
            return error(E.COORDINATOR_NOT_AVAILABLE)
        invalid = group.validate_member(req.member_id, req.group_instance_id)
        if invalid:
            return error(invalid)
        if req.generation_id != group.generation_id:
            return error(E.ILLEGAL_GENERATION)
        if ((req.protocol_type is not None and req.protocol_type != group.protocol_type)
                or (req.protocol_name is not None and req.protocol_name != group.protocol_name)):
            return error(E.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_in(S.PREPARING_REBALANCE):
            return error(E.REBALANCE_IN_PROGRESS)
        member = group.members[req.member_id]
        if group.is_in(S.COMPLETING_REBALANCE):
            if member.awaiting_sync is not None and member.awaiting_sync != token:
                self._respond(member.awaiting_sync, c.SyncGroupResponse(E.REBALANCE_IN_PROGRESS))
            member.awaiting_sync = token
            group.pending_sync_members.discard(req.member_id)
            if not group.pending_sync_members:
                self.timers.cancel(sync_key(group.group_id))
            if group.is_leader(req.member_id):
                assignments = dict(req.assignments)
                for m in group.members.values():
                    m.assignment = assignments.get(m.member_id, b"")
                # The record is written now; every parked SyncGroup is answered with it and is
                # released only once it commits (the runtime gates it). A failed append reloads.
                if not self._write_group(group):
                    # Kafka: the store failed (RECORD_LIST_TOO_LARGE), every member is told
                    # UNKNOWN_SERVER_ERROR and the group rebalances.
                    return self._prepare_rebalance(group, "the group's metadata is larger than message.max.bytes",
                                                   sync_error=E.UNKNOWN_SERVER_ERROR)
                group.transition_to(S.STABLE, self._now)
                for m in group.members.values():
                    if m.awaiting_sync is not None:
                        self._respond(m.awaiting_sync, c.SyncGroupResponse(
                            E.NONE, m.assignment, group.protocol_type, group.protocol_name))
                        m.awaiting_sync = None
                        self._reschedule_heartbeat(group, m)
            return
        # Stable: hand out the current assignment; a repeated leader assignment is ignored.
        group.pending_sync_members.discard(req.member_id)
        if not group.pending_sync_members:
            self.timers.cancel(sync_key(group.group_id))  # Kafka's removePendingSyncMember
        self._respond(token, c.SyncGroupResponse(E.NONE, member.assignment, group.protocol_type,
                                                 group.protocol_name))

    # ================================================================ Heartbeat

    def _heartbeat(self, req: c.HeartbeatRequest) -> c.HeartbeatResponse:
        if not req.group_id:
            return c.HeartbeatResponse(E.INVALID_GROUP_ID)
        group = self.groups.get(req.group_id)
        if group is None:
            return c.HeartbeatResponse(E.UNKNOWN_MEMBER_ID)
        if group.is_in(S.DEAD):
            return c.HeartbeatResponse(E.COORDINATOR_NOT_AVAILABLE)
        invalid = group.validate_member(req.member_id, req.group_instance_id)
        if invalid:
            return c.HeartbeatResponse(invalid)
        if req.generation_id != group.generation_id:
            return c.HeartbeatResponse(E.ILLEGAL_GENERATION)
        if group.is_in(S.EMPTY):
            return c.HeartbeatResponse(E.UNKNOWN_MEMBER_ID)
        self._reschedule_heartbeat(group, group.members[req.member_id])
        if group.is_in(S.PREPARING_REBALANCE):
            return c.HeartbeatResponse(E.REBALANCE_IN_PROGRESS)
        return c.HeartbeatResponse(E.NONE)

    # ================================================================ LeaveGroup

    def _leave_group(self, req: c.LeaveGroupRequest) -> c.LeaveGroupResponse:
        if not req.group_id:
            return c.LeaveGroupResponse(E.INVALID_GROUP_ID)
        group = self.groups.get(req.group_id)
        if group is None:
            return c.LeaveGroupResponse(E.NONE, tuple(
                c.LeaveMemberResult(m.member_id, m.group_instance_id, E.UNKNOWN_MEMBER_ID) for m in req.members))
        if group.is_in(S.DEAD):
            return c.LeaveGroupResponse(E.COORDINATOR_NOT_AVAILABLE)
        results: list[c.LeaveMemberResult] = []
        removed_any = False
        for ident in req.members:
            if not ident.member_id:
                if ident.group_instance_id is not None and ident.group_instance_id in group.static_members:
                    self._remove_current_member(group, group.static_members[ident.group_instance_id])
                    results.append(c.LeaveMemberResult(ident.member_id, ident.group_instance_id, E.NONE))
                    removed_any = True
                else:
                    results.append(c.LeaveMemberResult(ident.member_id, ident.group_instance_id,
                                                       E.UNKNOWN_MEMBER_ID))
            elif group.is_pending_member(ident.member_id):
                group.pending_join_members.discard(ident.member_id)
                self.timers.cancel(heartbeat_key(group.group_id, ident.member_id))
                results.append(c.LeaveMemberResult(ident.member_id, ident.group_instance_id, E.NONE))
                removed_any = True
            else:
                invalid = group.validate_member(ident.member_id, ident.group_instance_id)
                if not invalid:
                    self._remove_current_member(group, ident.member_id)
                    results.append(c.LeaveMemberResult(ident.member_id, ident.group_instance_id, E.NONE))
                    removed_any = True
                else:
                    results.append(c.LeaveMemberResult(ident.member_id, ident.group_instance_id, invalid))
        if removed_any:
            if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, "members left the group")
            elif group.is_in(S.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group)
        return c.LeaveGroupResponse(E.NONE, tuple(results))

    def _remove_current_member(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members.get(member_id)
        self.timers.cancel(heartbeat_key(group.group_id, member_id))
        if member is not None:
            self._fail_parked(member, E.UNKNOWN_MEMBER_ID)
        group.remove(member_id)

    # ================================================================ offsets

    def _validate_offset_commit(self, group: ClassicGroup, req: c.OffsetCommitRequest) -> ErrorCode:
        if group.is_in(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if req.generation_id < 0 and group.is_in(S.EMPTY):
            return E.NONE
        if req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
            invalid = group.validate_member(req.member_id, req.group_instance_id)
            if invalid:
                return invalid
            if req.generation_id != group.generation_id:
                return E.ILLEGAL_GENERATION
        elif not group.is_in(S.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        if group.is_in(S.COMPLETING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def _write_group(self, group: ClassicGroup) -> bool:
        """Write the group's metadata record, unless it is larger than one write may be (Kafka's
        message.max.bytes on __consumer_offsets): members' metadata and assignments are the
        clients' to choose, and an oversized entry would fail the whole partition's append."""
        record = Record(GroupMetadataKey(group.group_id), group.to_record_value())
        if record_size(record) > self.config.max_record_batch_bytes:
            return False
        self._write(record)
        return True

    def _offset_commit(self, req: c.OffsetCommitRequest) -> c.OffsetCommitResponse:
        def all_partitions(e: ErrorCode) -> c.OffsetCommitResponse:
            return c.OffsetCommitResponse(tuple((t, tuple((p.partition, e) for p in ps)) for t, ps in req.topics))

        if _commit_size(req) > self.config.max_record_batch_bytes:
            return all_partitions(E.INVALID_COMMIT_OFFSET_SIZE)  # Kafka's answer to RECORD_LIST_TOO_LARGE

        group = self.groups.get(req.group_id)
        if group is None:
            if req.generation_id >= 0:
                return all_partitions(E.GROUP_ID_NOT_FOUND if req.group_id_not_found_error
                                      else E.ILLEGAL_GENERATION)
            group = ClassicGroup(req.group_id, current_state_timestamp=self._now)
            self.groups[req.group_id] = group
        else:
            error = self._validate_offset_commit(group, req)
            if error is not E.NONE:
                return all_partitions(error)
            if group.is_in(S.STABLE, S.PREPARING_REBALANCE):
                member = group.members.get(req.member_id)
                if member is not None:
                    self._reschedule_heartbeat(group, member)
        expire = self._now + req.retention_time_ms if req.retention_time_ms != -1 else -1
        topics_out = []
        for topic, partitions in req.topics:
            results = []
            for p in partitions:
                metadata = p.metadata or ""
                if _utf16_len(metadata) > self.config.offset_metadata_max_bytes:
                    results.append((p.partition, E.OFFSET_METADATA_TOO_LARGE))
                    continue
                value = OffsetCommitValue(
                    offset=p.offset,
                    leader_epoch=p.leader_epoch,
                    metadata=metadata,
                    commit_timestamp=p.commit_timestamp if p.commit_timestamp != -1 else self._now,
                    expire_timestamp=expire,
                )
                self._write(Record(OffsetCommitKey(req.group_id, topic, p.partition), value))
                results.append((p.partition, E.NONE))
            topics_out.append((topic, tuple(results)))
        return c.OffsetCommitResponse(tuple(topics_out))

    def _offset_fetch(self, req: c.OffsetFetchRequest) -> c.OffsetFetchResponse:
        group = self.groups.get(req.group_id)
        committed = self.offsets.get(req.group_id, {})
        if group is None or group.is_in(S.DEAD):
            committed = {}
        if req.topics is None:
            by_topic: dict[str, list[c.FetchedOffset]] = {}
            for (topic, partition), v in sorted(committed.items()):
                by_topic.setdefault(topic, []).append(
                    c.FetchedOffset(partition, v.offset, v.leader_epoch, v.metadata))
            return c.OffsetFetchResponse(E.NONE, tuple((t, tuple(ps)) for t, ps in by_topic.items()))
        out = []
        for topic, partitions in req.topics:
            fetched = []
            for partition in partitions:
                found = committed.get((topic, partition))
                if found is None:
                    fetched.append(c.FetchedOffset(partition, -1, -1, ""))
                else:
                    fetched.append(c.FetchedOffset(partition, found.offset, found.leader_epoch, found.metadata))
            out.append((topic, tuple(fetched)))
        return c.OffsetFetchResponse(E.NONE, tuple(out))

    def _offset_delete(self, req: c.OffsetDeleteRequest) -> c.OffsetDeleteResponse:
        if not req.group_id:
            return c.OffsetDeleteResponse(E.INVALID_GROUP_ID)
        group = self.groups.get(req.group_id)
        if group is None or group.is_in(S.DEAD):
            return c.OffsetDeleteResponse(E.GROUP_ID_NOT_FOUND)
        if not group.is_in(S.EMPTY) and group.protocol_type != "consumer":
            return c.OffsetDeleteResponse(E.NON_EMPTY_GROUP)
        committed = self.offsets.get(req.group_id, {})
        topics_out = []
        for topic, partitions in req.topics:
            if not group.is_in(S.EMPTY) and group.is_subscribed_to_topic(topic):
                topics_out.append((topic, tuple((p, E.GROUP_SUBSCRIBED_TO_TOPIC) for p in partitions)))
                continue
            for p in partitions:
                if (topic, p) in committed:
                    self._write(Record(OffsetCommitKey(req.group_id, topic, p), None))
            topics_out.append((topic, tuple((p, E.NONE) for p in partitions)))
        return c.OffsetDeleteResponse(E.NONE, tuple(topics_out))

    # ================================================================ admin

    def _describe_group(self, req: c.DescribeGroupsRequest) -> c.DescribeGroupsResponse:
        group = self.groups.get(req.group_id)
        if group is None:
            return c.DescribeGroupsResponse(E.NONE, req.group_id, state="Dead", found=False)
        stable = group.is_in(S.STABLE)
        members = tuple(
            c.DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                              m.metadata(group.protocol_name) if stable else b"", m.assignment)
            for m in group.members.values()
        )
        return c.DescribeGroupsResponse(
            E.NONE, req.group_id, state=group.state.value, protocol_type=group.protocol_type or "",
            protocol_data=(group.protocol_name or "") if stable else "", members=members,
            found=not group.is_in(S.DEAD))

    def _list_groups(self, req: c.ListGroupsRequest) -> c.ListGroupsResponse:
        states = {s.strip().lower() for s in req.states_filter}
        types = {t.strip().lower() for t in req.types_filter}
        out = []
        for group in self.groups.values():
            if group.is_in(S.DEAD):
                continue
            if states and group.state.value.lower() not in states:
                continue
            if types and "classic" not in types:
                continue
            out.append(c.ListedGroup(group.group_id, group.protocol_type or "", group.state.value))
        return c.ListGroupsResponse(E.NONE, tuple(out))

    def _delete_groups(self, req: c.DeleteGroupsRequest) -> c.DeleteGroupsResponse:
        results = []
        for group_id in dict.fromkeys(req.group_ids):
            group = self.groups.get(group_id)
            if group is None or group.is_in(S.DEAD):
                results.append((group_id, E.GROUP_ID_NOT_FOUND))
            elif not group.is_in(S.EMPTY):
                results.append((group_id, E.NON_EMPTY_GROUP))
            else:
                self._write_group_tombstones(group_id)
                results.append((group_id, E.NONE))
        return c.DeleteGroupsResponse(tuple(results))

    def _write_group_tombstones(self, group_id: str) -> None:
        for topic, partition in sorted(self.offsets.get(group_id, {})):
            self._write(Record(OffsetCommitKey(group_id, topic, partition), None))
        self._write(Record(GroupMetadataKey(group_id), None))
        group = self.groups.pop(group_id, None)
        if group is not None:
            for member_id in list(group.members):
                self.timers.cancel(heartbeat_key(group_id, member_id))
            self.timers.cancel(join_key(group_id))
            self.timers.cancel(sync_key(group_id))

    # ================================================================ expiry (KIP-211)

    def _expiration_base(self, group: ClassicGroup) -> str | None:
        """Which timestamp offsets of this group expire from, or None if they never do."""
        if group.protocol_type is None:
            return "commit"
        if group.is_in(S.EMPTY):
            return "state" if group.current_state_timestamp is not None else "commit"
        if group.protocol_type == "consumer" and group.is_in(S.STABLE) and group.subscribed_topics is not None:
            return "commit"
        return None

    def _cleanup_group_metadata(self) -> None:
        retention = self.config.offsets_retention_ms
        for group_id, group in list(self.groups.items()):
            committed = self.offsets.get(group_id)
            all_expired = True
            if committed:
                base = self._expiration_base(group)
                if base is None:
                    continue
                for (topic, partition), v in sorted(committed.items()):
                    if group.is_subscribed_to_topic(topic) and not group.is_in(S.EMPTY):
                        all_expired = False
                        continue
                    if v.expire_timestamp != -1:
                        expired = self._now >= v.expire_timestamp
                    else:
                        start = (group.current_state_timestamp if base == "state"
                                 and group.current_state_timestamp is not None else v.commit_timestamp)
                        expired = self._now - start >= retention
                    if expired:
                        self._write(Record(OffsetCommitKey(group_id, topic, partition), None))
                    else:
                        all_expired = False
            if all_expired and group.is_in(S.EMPTY):
                self._write(Record(GroupMetadataKey(group_id), None))
                self.groups.pop(group_id, None)
        self._schedule(EXPIRE_KEY, self.config.offsets_retention_check_interval_ms, TimerKind.EXPIRE_OFFSETS)
