"""A consumer group's state, rebuilt only by replaying its records (Kafka's ConsumerGroup and the
replay rules of its GroupMetadataManager): the group epoch, the target assignment and its epoch,
every member's metadata and current assignment. Derived, never stored: the group's state, and who
holds each partition (the partition-epoch map that keeps a partition from two owners).

Topics are topic ids here, as in the records; the caller maps names to ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from . import records as r
from .member import MemberAssignment, MemberState, Owned, Partitions


class GroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


class ReplayError(ValueError):
    """A record sequence Kafka's replay would refuse (e.g. a member removed before its assignment)."""


@dataclass
class Member:
    member_id: str
    metadata: r.MemberMetadataValue | None = None
    assignment: MemberAssignment = field(default_factory=lambda: MemberAssignment(epoch=-1, previous_epoch=-1))


def _owned(tps: tuple[r.TopicPartitions, ...], member_epoch: int) -> dict[str, dict[int, int]]:
    out: dict[str, dict[int, int]] = {}
    for tp in tps:
        epochs = tp.assignment_epochs
        aligned = epochs is not None and len(epochs) == len(tp.partitions)
        for i, p in enumerate(tp.partitions):
            # KIP-1251: a missing or misaligned list means every partition at max(member epoch, 0)
            out.setdefault(tp.topic_id.hex(), {})[p] = epochs[i] if aligned and epochs else max(member_epoch, 0)
    return out


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = -1
        self.assignment_timestamp = 0
        self.members: dict[str, Member] = {}
        self.targets: dict[str, Partitions] = {}
        # topic id (hex) -> partition -> epoch of the member holding it (assigned or pending revocation)
        self.partition_epochs: dict[str, dict[int, int]] = {}

    # ------------------------------------------------------------------ derived

    @property
    def state(self) -> GroupState:
        if not self.members:
            return GroupState.EMPTY
        if self.epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        if any(m.assignment.state is not MemberState.STABLE or m.assignment.epoch != self.assignment_epoch
               for m in self.members.values()):
            return GroupState.RECONCILING
        return GroupState.STABLE

    def partition_epoch(self, topic: str, partition: int) -> int:
        return self.partition_epochs.get(topic, {}).get(partition, -1)

    def _release(self, a: MemberAssignment) -> None:
        for owned in (a.assigned, a.pending_revocation):
            for t, ps in owned.items():
                held = self.partition_epochs.get(t, {})
                for p in ps:
                    if held.get(p) == a.epoch:  # only what this member's epoch put there
                        del held[p]

    def _hold(self, a: MemberAssignment) -> None:
        for owned in (a.assigned, a.pending_revocation):
            for t, ps in owned.items():
                held = self.partition_epochs.setdefault(t, {})
                for p in ps:
                    held[p] = a.epoch  # over a lower epoch: a release compacted away, as Kafka tolerates

    def set_assignment(self, member_id: str, a: MemberAssignment) -> None:
        m = self.members.get(member_id)
        old = m.assignment if m is not None else None
        for owned in (a.assigned, a.pending_revocation):
            for t, ps in owned.items():
                for p in ps:
                    e = self.partition_epoch(t, p)
                    mine = old is not None and e == old.epoch and (p in old.assigned.get(t, {})
                                                                   or p in old.pending_revocation.get(t, {}))
                    if e >= a.epoch and not mine:
                        raise ReplayError(f"{t}-{p} is already held at epoch {e} >= {a.epoch}")
        m = self.members.setdefault(member_id, Member(member_id))
        self._release(m.assignment)
        m.assignment = a
        self._hold(a)

    # ------------------------------------------------------------------ replay

    def replay(self, key: r.ConsumerGroupKey, value: r.ConsumerGroupValue | None) -> None:
        if isinstance(key, r.GroupKey):
            self._replay_group(key.record_type, value)
        else:
            self._replay_member(key.record_type, key.member_id, value)

    def _replay_group(self, record_type: int, value: r.ConsumerGroupValue | None) -> None:
        if record_type == r.GROUP_METADATA:
            if value is None:
                if self.members or self.targets or self.assignment_epoch != -1:
                    raise ReplayError("the group's epoch tombstone came before its members' and target's")
                self.epoch, self.metadata_hash = 0, 0
                return
            assert isinstance(value, r.GroupEpochValue)
            self.epoch, self.metadata_hash = value.epoch, value.metadata_hash
        else:
            if value is None:
                if self.targets:
                    raise ReplayError("the target epoch tombstone came before the members' targets")
                self.assignment_epoch, self.assignment_timestamp = -1, 0
                return
            assert isinstance(value, r.TargetEpochValue)
            self.assignment_epoch, self.assignment_timestamp = value.assignment_epoch, value.assignment_timestamp

    def _replay_member(self, record_type: int, member_id: str, value: r.ConsumerGroupValue | None) -> None:
        if record_type == r.MEMBER_METADATA:
            if value is None:
                m = self.members.get(member_id)
                if m is None:
                    return
                if m.assignment.epoch != -1 or member_id in self.targets:
                    raise ReplayError(f"member {member_id} removed before its assignment and target")
                del self.members[member_id]
                return
            assert isinstance(value, r.MemberMetadataValue)
            self.members.setdefault(member_id, Member(member_id)).metadata = value
        elif record_type == r.TARGET_MEMBER:
            if value is None:
                self.targets.pop(member_id, None)
                return
            assert isinstance(value, r.TargetMemberValue)
            self.targets[member_id] = {tp.topic_id.hex(): frozenset(tp.partitions) for tp in value.partitions
                                       if tp.partitions}
        else:
            if value is None:
                m = self.members.get(member_id)
                if m is not None:
                    self.set_assignment(member_id, MemberAssignment(epoch=-1, previous_epoch=-1))
                return
            assert isinstance(value, r.CurrentAssignmentValue)
            self.set_assignment(member_id, MemberAssignment(
                value.member_epoch, value.previous_member_epoch, MemberState.from_byte(value.state),
                _owned(value.assigned, value.member_epoch), _owned(value.pending_revocation, value.member_epoch)))

    # ------------------------------------------------------------------ records

    def assignment_record(self, member_id: str, a: MemberAssignment) -> tuple[r.MemberKey, r.CurrentAssignmentValue]:
        """The record that stores ``a`` as the member's current assignment."""
        return (r.MemberKey(r.CURRENT_ASSIGNMENT, self.group_id, member_id),
                r.CurrentAssignmentValue(a.epoch, a.previous_epoch, int(a.state), _tps(a.assigned),
                                         _tps(a.pending_revocation)))


def _tps(owned: Owned) -> tuple[r.TopicPartitions, ...]:
    return tuple(r.TopicPartitions(bytes.fromhex(t), tuple(sorted(ps)), tuple(ps[p] for p in sorted(ps)))
                 for t, ps in sorted(owned.items()) if ps)


def replay_into_groups(groups: dict[str, ConsumerGroup], key: r.ConsumerGroupKey,
                       value: r.ConsumerGroupValue | None) -> None:
    """Apply one consumer group record to a partition's consumer groups (Kafka's replay): a value
    creates the group if it is missing, a tombstone for a missing group is ignored, and the group
    epoch's tombstone (the last of a deletion) removes the group."""
    group = groups.get(key.group)
    if group is None:
        if value is None:
            return
        group = groups[key.group] = ConsumerGroup(key.group)
    group.replay(key, value)
    if value is None and isinstance(key, r.GroupKey) and key.record_type == r.GROUP_METADATA:
        del groups[key.group]


def deletion_records(group: ConsumerGroup) -> list[tuple[r.ConsumerGroupKey, None]]:
    """The tombstones that delete a group, in Kafka's order (current assignments, targets, the
    target epoch, member metadata, the group epoch)."""
    g = group.group_id
    return [*((r.MemberKey(r.CURRENT_ASSIGNMENT, g, m), None) for m in group.members),
            *((r.MemberKey(r.TARGET_MEMBER, g, m), None) for m in group.targets),
            (r.GroupKey(r.TARGET_METADATA, g), None),
            *((r.MemberKey(r.MEMBER_METADATA, g, m), None) for m in group.members),
            (r.GroupKey(r.GROUP_METADATA, g), None)]
