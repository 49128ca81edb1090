"""A share group's state, rebuilt only by replaying its records (Kafka's ShareGroup and the share
replay rules of its GroupMetadataManager): the group epoch, the target assignment and its epoch,
every member's metadata and current assignment, and which topic-partitions have share state.

A share group's state is Empty or Stable (members take their target at once: no revocation step),
and a partition may be assigned to several members at a time. Topics are topic ids (hex) here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum

from . import records as r

Partitions = Mapping[str, frozenset[int]]  # topic id (hex) -> partitions


class ShareGroupState(Enum):
    EMPTY = "Empty"
    STABLE = "Stable"


@dataclass(frozen=True, slots=True)
class StateTopic:
    """Topic-partitions of the state-partition record."""

    name: str
    partitions: frozenset[int]


@dataclass
class ShareMember:
    member_id: str
    metadata: r.ShareMemberValue | None = None
    epoch: int = 0
    previous_epoch: int = -1
    assigned: Partitions = field(default_factory=dict)
    has_assignment: bool = False  # a current-assignment record was replayed


@dataclass
class StatePartitions:
    """Kafka's ShareGroupStatePartitionMetadataInfo."""

    initializing: dict[str, StateTopic] = field(default_factory=dict)
    initialized: dict[str, StateTopic] = field(default_factory=dict)
    deleting: dict[str, str] = field(default_factory=dict)  # topic id -> name

    def value(self) -> r.ShareStateValue:
        def topics(m: Mapping[str, StateTopic]) -> tuple[r.StateTopic, ...]:
            return tuple(r.StateTopic(bytes.fromhex(t), v.name, tuple(sorted(v.partitions)))
                         for t, v in sorted(m.items()))
        return r.ShareStateValue(topics(self.initializing), topics(self.initialized),
                                 tuple(r.StateTopic(bytes.fromhex(t), n) for t, n in sorted(self.deleting.items())))


def _partitions(tps: tuple[r.SharePartitions, ...]) -> dict[str, frozenset[int]]:
    out: dict[str, frozenset[int]] = {}
    for tp in tps:
        if tp.partitions:
            out[tp.topic_id.hex()] = out.get(tp.topic_id.hex(), frozenset()) | frozenset(tp.partitions)
    return out


def share_partitions(parts: Partitions) -> tuple[r.SharePartitions, ...]:
    return tuple(r.SharePartitions(bytes.fromhex(t), tuple(sorted(ps))) for t, ps in sorted(parts.items()) if ps)


class ShareGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.epoch = 1  # a new group's epochs start at 1 (Kafka 4.3+)
        self.metadata_hash = 0
        self.assignment_epoch = 1
        self.assignment_timestamp = 0
        self.members: dict[str, ShareMember] = {}
        self.targets: dict[str, Partitions] = {}
        self.state_partitions: StatePartitions | None = None
        # (topic id hex, partition) -> its share state (record type 100)
        self.share_states: dict[tuple[str, int], r.SharePartitionState] = {}

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_names(self) -> set[str]:
        return {t for m in self.members.values() if m.metadata is not None for t in m.metadata.subscribed_topic_names}

    def assignment_record(self, m: ShareMember) -> tuple[r.ShareMemberKey, r.ShareAssignmentValue]:
        return (r.ShareMemberKey(r.CURRENT_ASSIGNMENT, self.group_id, m.member_id),
                r.ShareAssignmentValue(m.epoch, m.previous_epoch, 0, share_partitions(m.assigned)))

    # ------------------------------------------------------------------ replay

    def replay(self, key: r.ShareKey, value: r.ShareValue | None) -> None:
        if isinstance(key, r.ShareStateKey):
            where = (key.topic_id.hex(), key.partition)
            if value is None:
                self.share_states.pop(where, None)
            else:
                assert isinstance(value, r.SharePartitionState)
                self.share_states[where] = value
        elif isinstance(key, r.ShareGroupKey):
            self._replay_group(key.record_type, value)
        else:
            self._replay_member(key.record_type, key.member_id, value)

    def _replay_group(self, record_type: int, value: r.ShareValue | None) -> None:
        if record_type == r.GROUP_METADATA:
            if value is None:
                self.epoch, self.metadata_hash = 0, 0
                return
            assert isinstance(value, r.ShareEpochValue)
            self.epoch, self.metadata_hash = value.epoch, value.metadata_hash
        elif record_type == r.TARGET_METADATA:
            if value is None:
                self.assignment_epoch, self.assignment_timestamp = -1, 0
                return
            assert isinstance(value, r.ShareTargetEpochValue)
            self.assignment_epoch, self.assignment_timestamp = value.assignment_epoch, value.assignment_timestamp
        else:
            if value is None:
                self.state_partitions = None
                return
            assert isinstance(value, r.ShareStateValue)
            def topics(ts: tuple[r.StateTopic, ...]) -> dict[str, StateTopic]:
                return {t.topic_id.hex(): StateTopic(t.name, frozenset(t.partitions)) for t in ts}
            self.state_partitions = StatePartitions(topics(value.initializing), topics(value.initialized),
                                                    {t.topic_id.hex(): t.name for t in value.deleting})

    def _replay_member(self, record_type: int, member_id: str, value: r.ShareValue | None) -> None:
        if record_type == r.MEMBER_METADATA:
            if value is None:
                self.members.pop(member_id, None)
                return
            assert isinstance(value, r.ShareMemberValue)
            self.members.setdefault(member_id, ShareMember(member_id)).metadata = value
        elif record_type == r.TARGET_MEMBER:
            if value is None:
                self.targets.pop(member_id, None)
                return
            assert isinstance(value, r.ShareTargetMemberValue)
            self.targets[member_id] = _partitions(value.partitions)
        else:
            m = self.members.get(member_id)
            if value is None:
                if m is not None:
                    self.members[member_id] = replace(m, epoch=0, previous_epoch=-1, assigned={}, has_assignment=False)
                return
            assert isinstance(value, r.ShareAssignmentValue)
            m = self.members.setdefault(member_id, ShareMember(member_id))
            m.epoch, m.previous_epoch = value.member_epoch, value.previous_member_epoch
            m.assigned, m.has_assignment = _partitions(value.assigned), True


def replay_into_share_groups(groups: dict[str, ShareGroup], key: r.ShareKey, value: r.ShareValue | None) -> None:
    """Apply one share group record to a partition's share groups: a value creates the group if it
    is missing, a tombstone for a missing group is ignored, and the group epoch's tombstone (the
    last of a deletion) removes the group."""
    group = groups.get(key.group)
    if group is None:
        if value is None:
            return
        group = groups[key.group] = ShareGroup(key.group)
    group.replay(key, value)
    if value is None and isinstance(key, r.ShareGroupKey) and key.record_type == r.GROUP_METADATA:
        del groups[key.group]


def deletion_records(group: ShareGroup) -> list[tuple[r.ShareKey, None]]:
    """The tombstones that delete a share group, in Kafka's order (current assignments, targets,
    the target epoch, member metadata, the state partitions, the group epoch), after its share
    state (Kafka deletes that first, through DeleteShareGroupState)."""
    g = group.group_id
    return [*((r.ShareStateKey(g, bytes.fromhex(t), p), None) for t, p in sorted(group.share_states)),
            *((r.ShareMemberKey(r.CURRENT_ASSIGNMENT, g, m), None) for m in group.members),
            *((r.ShareMemberKey(r.TARGET_MEMBER, g, m), None) for m in group.members),
            (r.ShareGroupKey(r.TARGET_METADATA, g), None),
            *((r.ShareMemberKey(r.MEMBER_METADATA, g, m), None) for m in group.members),
            (r.ShareGroupKey(r.STATE_PARTITIONS, g), None),
            (r.ShareGroupKey(r.GROUP_METADATA, g), None)]
