"""A consumer group rebuilt from its records (coordinator/consumer_group/group.py): Kafka's replay
rules, the derived group state and partition holders, and the tombstone order it insists on."""

from __future__ import annotations

import pytest

from coordinator.consumer_group import records as r
from coordinator.consumer_group.codec import decode_key, decode_value, encode_key, encode_value
from coordinator.consumer_group.group import ConsumerGroup, GroupState, ReplayError
from coordinator.consumer_group.member import MemberAssignment, MemberState

FOO = bytes(range(16))
T = FOO.hex()
G = "grp"


def meta(member: str) -> tuple[r.MemberKey, r.MemberMetadataValue]:
    return r.MemberKey(r.MEMBER_METADATA, G, member), r.MemberMetadataValue(None, None, "c", "/h", ("foo",), None, 45000)


def target(member: str, *ps: int) -> tuple[r.MemberKey, r.TargetMemberValue]:
    return r.MemberKey(r.TARGET_MEMBER, G, member), r.TargetMemberValue((r.TopicPartitions(FOO, ps),))


def current(member: str, epoch: int, state: int, ps: tuple[int, ...], pending: tuple[int, ...] = ()) \
        -> tuple[r.MemberKey, r.CurrentAssignmentValue]:
    tps = (r.TopicPartitions(FOO, ps),) if ps else ()
    pend = (r.TopicPartitions(FOO, pending),) if pending else ()
    return r.MemberKey(r.CURRENT_ASSIGNMENT, G, member), r.CurrentAssignmentValue(epoch, epoch - 1, state, tps, pend)


def group_epoch(e: int) -> tuple[r.GroupKey, r.GroupEpochValue]:
    return r.GroupKey(r.GROUP_METADATA, G), r.GroupEpochValue(e)


def target_epoch(e: int) -> tuple[r.GroupKey, r.TargetEpochValue]:
    return r.GroupKey(r.TARGET_METADATA, G), r.TargetEpochValue(e)


def replay(g: ConsumerGroup, *records: tuple) -> None:  # type: ignore[type-arg]
    for key, value in records:  # through the bytes, as a load reads them
        k = decode_key(encode_key(key))
        g.replay(k, None if value is None else decode_value(k.record_type, encode_value(value)))


def test_a_group_moves_through_assigning_reconciling_and_stable() -> None:
    g = ConsumerGroup(G)
    assert g.state is GroupState.EMPTY
    replay(g, meta("a"), group_epoch(1))
    assert g.state is GroupState.ASSIGNING
    replay(g, target("a", 0, 1), target_epoch(1), current("a", 1, 2, (0,)))
    assert g.state is GroupState.RECONCILING  # still waiting for partition 1
    assert (g.partition_epoch(T, 0), g.partition_epoch(T, 1)) == (1, -1)
    replay(g, current("a", 1, 0, (0, 1)))
    assert g.state is GroupState.STABLE and g.targets["a"] == {T: frozenset({0, 1})}
    a = g.members["a"].assignment
    assert (a.epoch, a.state, a.assigned) == (1, MemberState.STABLE, {T: {0: 1, 1: 1}})  # KIP-1251 default epochs


def test_a_partition_pending_revocation_is_still_held_and_is_freed_by_the_members_update() -> None:
    g = ConsumerGroup(G)
    replay(g, meta("a"), meta("b"), group_epoch(2), target("a", 0), target("b", 1), target_epoch(2),
           current("a", 1, 1, (0,), pending=(1,)), current("b", 2, 2, ()))
    assert g.partition_epoch(T, 1) == 1  # a still has to give it back
    replay(g, current("a", 2, 0, (0,)), current("b", 2, 0, (1,)))
    assert (g.partition_epoch(T, 0), g.partition_epoch(T, 1)) == (2, 2)
    assert g.state is GroupState.STABLE


def test_removing_a_member_in_kafkas_order_frees_its_partitions_and_deletes_the_group() -> None:
    g = ConsumerGroup(G)
    replay(g, meta("a"), group_epoch(1), target("a", 0), target_epoch(1), current("a", 1, 0, (0,)))
    replay(g, (r.MemberKey(r.CURRENT_ASSIGNMENT, G, "a"), None), (r.MemberKey(r.TARGET_MEMBER, G, "a"), None),
           (r.MemberKey(r.MEMBER_METADATA, G, "a"), None), (r.GroupKey(r.TARGET_METADATA, G), None),
           (r.GroupKey(r.GROUP_METADATA, G), None))
    assert not g.members and g.partition_epoch(T, 0) == -1 and g.state is GroupState.EMPTY


@pytest.mark.parametrize("bad", ["member before assignment", "group before members"])
def test_tombstones_out_of_order_are_refused(bad: str) -> None:
    g = ConsumerGroup(G)
    replay(g, meta("a"), group_epoch(1), target("a", 0), target_epoch(1), current("a", 1, 0, (0,)))
    with pytest.raises(ReplayError):
        if bad == "member before assignment":
            replay(g, (r.MemberKey(r.MEMBER_METADATA, G, "a"), None))
        else:
            replay(g, (r.GroupKey(r.GROUP_METADATA, G), None))


def test_two_members_holding_one_partition_at_the_same_epoch_is_refused() -> None:
    g = ConsumerGroup(G)
    replay(g, current("a", 3, 0, (0,)))
    with pytest.raises(ReplayError):
        replay(g, current("b", 3, 0, (0,)))
    assert "b" not in g.members and g.partition_epoch(T, 0) == 3  # the refused record changed nothing
    replay(g, current("b", 4, 0, (0,)))  # a newer epoch wins (an older release was compacted away)
    assert g.partition_epoch(T, 0) == 4


def test_an_assignment_record_replays_to_the_same_assignment() -> None:
    g = ConsumerGroup(G)
    a = MemberAssignment(5, 4, MemberState.UNREVOKED_PARTITIONS, {T: {0: 3, 2: 5}}, {T: {1: 4}})
    replay(g, g.assignment_record("m", a))
    assert g.members["m"].assignment == a
