"""Cases of Kafka's own group coordinator tests, ported and named after them (snake_cased):
GroupMetadataManagerTest (GMMT), ConsumerGroupTest (CGT) and OffsetMetadataManagerTest (OMMT),
driven through the runtime like the wire layer drives the shard. Epochs are relative: a new
group's first member gets epoch 1 here (Kafka 4.0's numbering).

The pure tests of the same behaviours under descriptive names are in test_consumer_heartbeat.py,
test_consumer_group_shard.py, test_reconcile.py and test_assignors.py."""

from __future__ import annotations

from coordinator import commands as c
from coordinator.config import ConsumerConfig, GroupConfig
from coordinator.consumer_group.group import ConsumerGroup, GroupState
from coordinator.consumer_group.heartbeat_request import ConsumerHeartbeat
from coordinator.errors import ErrorCode as E
from tests.unit.harness import Harness, consumer_subscription
from tests.unit.test_consumer_group_shard import (
    CONFIG,
    FOO,
    TOPICS,
    classic_group,
    classic_join,
    classic_sync,
    commit,
    hb,
    owned,
)


def group_of(h: Harness) -> ConsumerGroup:
    group = h.shard.consumer_groups["g"]
    assert isinstance(group, ConsumerGroup)
    return group


def test_consumer_group_member_epoch_validation() -> None:
    """GMMT testConsumerGroupMemberEpochValidation: a newer epoch is fenced; the previous epoch
    passes only while the member reports nothing beyond what it was given."""
    h = Harness(CONFIG)
    a = hb(h, "a", 0)
    assert hb(h, "a", a.member_epoch + 1, owned(a)).error == E.FENCED_MEMBER_EPOCH
    hb(h, "b", 0)
    a2 = hb(h, "a", 1, owned(a))  # told to revoke
    a3 = hb(h, "a", 1, owned(a2))  # revoked: epoch 2 now
    assert a3.member_epoch == 2
    # a heartbeat at epoch 1 (its answer lost) with what it still owns at 2 is fine
    assert hb(h, "a", 1, owned(a2)).error == E.NONE
    # at epoch 1 claiming partitions it no longer has: fenced
    assert hb(h, "a", 1, owned(a)).error == E.FENCED_MEMBER_EPOCH


def test_member_joins_empty_consumer_group() -> None:
    """GMMT testMemberJoinsEmptyConsumerGroup: records 5, 3, 7, 6, 8 in that order."""
    h = Harness(CONFIG)
    n = len(h.log)
    hb(h, "a", 0)
    assert [rec.key.record_type for rec in h.records_since(n)] == [5, 3, 7, 6, 8]  # type: ignore[union-attr]


def test_member_can_rejoin_with_epoch_zero_in_stable_state() -> None:
    """GMMT testMemberCanRejoinWithEpochZeroInStableState: a known member rejoining with epoch 0
    gets its assignment back at the same epoch."""
    h = Harness(CONFIG)
    a = hb(h, "a", 0)
    again = hb(h, "a", 0)
    assert (again.error, again.member_epoch, owned(again)) == (E.NONE, a.member_epoch, owned(a))


def test_duplicate_full_heartbeat_in_stable_state() -> None:
    """GMMT testDuplicateFullHeartbeatInStableState: the same full request twice writes nothing."""
    h = Harness(CONFIG)
    a = hb(h, "a", 0)
    n = len(h.log)
    beat = ConsumerHeartbeat("g", "a", a.member_epoch, rebalance_timeout_ms=5000, subscribed_topic_names=("foo",),
                             owned=owned(a))
    for _ in range(2):
        assert h.call(c.ConsumerGroupHeartbeatRequest(beat, TOPICS, "client", "/127.0.0.1")).error == E.NONE
    assert h.records_since(n) == []


def test_consumer_group_states() -> None:
    """GMMT testConsumerGroupStates: Empty -> Assigning/Reconciling -> Stable -> Empty."""
    h = Harness(CONFIG)
    a = hb(h, "a", 0)
    assert group_of(h).state is GroupState.STABLE
    hb(h, "b", 0)
    assert group_of(h).state is GroupState.RECONCILING
    a2 = hb(h, "a", 1, owned(a))
    hb(h, "a", 1, owned(a2))
    b = hb(h, "b", 2, {})
    hb(h, "b", 2, owned(b))
    assert group_of(h).state is GroupState.STABLE
    hb(h, "a", -1)
    hb(h, "b", -1)
    assert group_of(h).state is GroupState.EMPTY


def test_no_group_epoch_bump_when_static_member_temporarily_leaves() -> None:
    """GMMT testNoGroupEpochBumpWhenStaticMemberTemporarilyLeaves and
    testLeavingStaticMemberBumpsGroupEpoch: -2 keeps the epoch, -1 moves it."""
    h = Harness(CONFIG)
    hb(h, "a", 0, instance_id="i")
    epoch = group_of(h).epoch
    assert hb(h, "a", -2, instance_id="i").member_epoch == -2
    assert group_of(h).epoch == epoch
    back = hb(h, "a2", 0, instance_id="i")
    assert back.error == E.NONE and group_of(h).epoch == epoch
    assert hb(h, "a2", -1, instance_id="i").error == E.NONE
    assert group_of(h).epoch == epoch + 1


def test_should_throw_fenced_instance_id_exception_when_static_member_with_different_member_id_leaves() -> None:
    """GMMT testShouldThrowFencedInstanceIdExceptionWhenStaticMemberWithDifferentMemberIdLeaves and
    testShouldThrownUnknownMemberIdExceptionWhenUnknownStaticMemberLeaves."""
    h = Harness(CONFIG)
    hb(h, "a", 0, instance_id="i")
    assert hb(h, "other", -2, instance_id="i").error == E.FENCED_INSTANCE_ID
    assert hb(h, "a", -2, instance_id="unknown").error == E.UNKNOWN_MEMBER_ID


def test_new_member_is_rejected_with_maximum_members_is_reached() -> None:
    """GMMT testNewMemberIsRejectedWithMaximumMembersIsReached (81); a known member still heartbeats."""
    h = Harness(GroupConfig(min_session_timeout_ms=10, consumer=ConsumerConfig(max_size=1)))
    a = hb(h, "a", 0)
    assert hb(h, "b", 0).error == E.GROUP_MAX_SIZE_REACHED
    assert hb(h, "a", a.member_epoch, owned(a)).error == E.NONE


def test_session_timeout_expiration() -> None:
    """GMMT testSessionTimeoutExpiration: a silent member is fenced, the group epoch moves."""
    h = Harness(CONFIG)
    hb(h, "a", 0)
    epoch = group_of(h).epoch
    h.sleep(CONFIG.consumer.session_timeout_ms + 1)
    assert "a" not in group_of(h).members and group_of(h).epoch == epoch + 1


def test_classic_member_join_to_consumer_group_with_disabled_migration_policy() -> None:
    """GMMT testClassicMemberJoinToConsumerGroupWithDisabledMigrationPolicy: 23."""
    h = Harness(GroupConfig(min_session_timeout_ms=10, consumer=ConsumerConfig(migration_policy="disabled")))
    hb(h, "a", 0)
    assert classic_join(h, "").error == E.INCONSISTENT_GROUP_PROTOCOL


def test_joining_consumer_group_with_new_dynamic_member() -> None:
    """GMMT testJoiningConsumerGroupWithNewDynamicMember: MEMBER_ID_REQUIRED first (v4+), then a
    member with a generation = its member epoch, never the leader."""
    h = Harness(CONFIG)
    hb(h, "a", 0)
    first = h.join("g", protocols=(("range", consumer_subscription("foo")),), version=5).response
    assert first.error == E.MEMBER_ID_REQUIRED and first.member_id
    j = classic_join(h, first.member_id)
    assert (j.error, j.protocol_type, j.leader, j.members) == (E.NONE, "consumer", "", ())
    assert j.generation_id == group_of(h).members[first.member_id].assignment.epoch


def test_classic_group_sync_to_consumer_group_with_illegal_generation() -> None:
    """GMMT testClassicGroupSyncToConsumerGroupWithIllegalGeneration and ...WithInconsistentGroupProtocol."""
    h = Harness(CONFIG)
    hb(h, "a", 0)
    first = h.join("g", protocols=(("range", consumer_subscription("foo")),), version=5).response
    j = classic_join(h, first.member_id)
    assert classic_sync(h, first.member_id, j.generation_id + 1).error == E.ILLEGAL_GENERATION
    wrong = h.call(c.SyncGroupRequest("g", j.generation_id, first.member_id, protocol_type="consumer",
                                      protocol_name="roundrobin", topics=TOPICS))
    assert wrong.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert classic_sync(h, first.member_id, j.generation_id).error == E.NONE


def test_classic_group_heartbeat_to_consumer_group_with_member_not_using_classic_protocol() -> None:
    """GMMT testClassicGroupHeartbeatToConsumerGroupWithMemberNotUsingClassicProtocol: 25."""
    h = Harness(CONFIG)
    a = hb(h, "a", 0)
    assert h.heartbeat("g", "a", a.member_epoch) == E.UNKNOWN_MEMBER_ID


def test_consumer_group_member_using_classic_protocol_fenced_when_session_timeout() -> None:
    """GMMT testConsumerGroupMemberUsingClassicProtocolFencedWhenSessionTimeout: a classic member's
    own session timeout (from its JoinGroup) fences it."""
    h = Harness(CONFIG)
    (m0, m1), gen = classic_group(h)
    hb(h, "new", 0)  # the upgrade; the classic members' session timeouts are 10 s
    for _ in range(12):
        h.sleep(1000)
        hb(h, "new", group_of(h).members["new"].assignment.epoch, {})
    assert set(group_of(h).members) == {"new"}


def test_offset_commit_with_unknown_group() -> None:
    """OMMT testOffsetCommitWithUnknownGroup: GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION before."""
    h = Harness(CONFIG)
    assert commit(h, "m", 1, group="nope") == {E.GROUP_ID_NOT_FOUND}
    assert commit(h, "m", 1, v9=False, group="nope") == {E.ILLEGAL_GENERATION}


def test_validate_transactional_offset_commit() -> None:
    """CGT testValidateTransactionalOffsetCommit: no member info passes; a wrong epoch is
    ILLEGAL_GENERATION (TxnOffsetCommit below v6)."""
    h = Harness(CONFIG)
    a = hb(h, "a", 0)

    def txn(member: str, epoch: int) -> set[E]:
        resp = h.call(c.TxnOffsetCommitRequest("g", 7, 0, (("foo", (c.PartitionCommit(0, 5),)),), epoch, member))
        return {e for _, ps in resp.topics for _, e in ps}

    assert txn("", -1) == {E.NONE}
    assert txn("a", a.member_epoch) == {E.NONE}
    assert txn("a", a.member_epoch + 1) == {E.ILLEGAL_GENERATION}
    assert txn("zz", 1) == {E.UNKNOWN_MEMBER_ID}


def test_consumer_group_offset_delete() -> None:
    """OMMT testConsumerGroupOffsetDelete and ...WithErrors: a subscribed topic's offsets stay."""
    h = Harness(CONFIG)
    a = hb(h, "a", 0)
    commit(h, "a", a.member_epoch)
    h.commit("g", {("bar", 0): 3})  # an admin commit is refused while members exist
    resp = h.call(c.OffsetDeleteRequest("g", (("foo", (0,)),)))
    assert resp.topics == (("foo", ((0, E.GROUP_SUBSCRIBED_TO_TOPIC),)),)
    hb(h, "a", -1)
    resp = h.call(c.OffsetDeleteRequest("g", (("foo", (0,)),)))
    assert resp.topics == (("foo", ((0, E.NONE),)),)
    assert h.fetch("g", {"foo": [0]}) == {("foo", 0): -1}


def test_consumer_group_describe_no_errors() -> None:
    """GMMT testConsumerGroupDescribeNoErrors and ...WithErrors."""
    h = Harness(CONFIG)
    hb(h, "a", 0)
    d = h.call(c.ConsumerGroupDescribeRequest("g", TOPICS))
    assert (d.error, d.group_id, d.state, [m.member_id for m in d.members]) == (E.NONE, "g", "Stable", ["a"])
    assert d.members[0].assignment == (c.DescribedTopicPartitions(FOO, "foo", (0, 1, 2, 3)),)
    assert h.call(c.ConsumerGroupDescribeRequest("missing", TOPICS)).error == E.GROUP_ID_NOT_FOUND
