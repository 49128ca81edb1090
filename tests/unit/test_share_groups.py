"""Share groups (KIP-932) in the group coordinator, served by a shard through the runtime: joins
and epochs, the share-state initializations a group asks for and the assignment that follows
them, leaving and session expiry, describe/list/delete, a group id naming one kind of group
only, and a shard loaded from the log carrying on. Kafka's GroupMetadataManagerTest cases are
named after the test they follow."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator import commands as c
from coordinator.config import GroupConfig, ShareConfig
from coordinator.errors import ErrorCode as E
from coordinator.shard import GroupCoordinatorShard
from coordinator.share_group import records as r
from coordinator.share_group.heartbeat import ShareHeartbeat
from tests.unit.harness import TEST_CONFIG, Harness

FOO = bytes(range(16)).hex()
BAR = bytes(range(1, 17)).hex()
TOPICS = {"foo": (FOO, 6), "bar": (BAR, 3)}
CONFIG = GroupConfig(min_session_timeout_ms=TEST_CONFIG.min_session_timeout_ms,
                     share=ShareConfig(heartbeat_interval_ms=1000, session_timeout_ms=10_000, max_size=3))


def hb(h: Harness, member: str, epoch: int, names: tuple[str, ...] | None = None, group: str = "g",
       topics: Any = None, **kw: Any) -> c.ShareGroupHeartbeatResponse:
    """A heartbeat; a join (epoch 0) subscribes to foo and bar unless ``names`` says otherwise."""
    if names is None and epoch == 0:
        names = ("foo", "bar")
    beat = ShareHeartbeat(group, member, epoch, subscribed_topic_names=names, **kw)
    resp = h.call(c.ShareGroupHeartbeatRequest(beat, TOPICS if topics is None else topics, "client", "/127.0.0.1"))
    assert isinstance(resp, c.ShareGroupHeartbeatResponse)
    return resp


def test_share_group_member_joins_empty_group_with_assignments() -> None:
    """testShareGroupMemberJoinsEmptyGroupWithAssignments: the first heartbeat creates the group
    at epoch 2 with every subscribed partition assigned. Kafka asks its share coordinator to
    create their state and assigns them at a later heartbeat; here the state is created in the
    same step (type-100 records, start offset -1: share.auto.offset.reset decides)."""
    h = Harness(CONFIG)
    first = hb(h, "m1", 0)
    assert (first.error, first.member_id, first.member_epoch, first.heartbeat_interval_ms) == (E.NONE, "m1", 2, 1000)
    assert first.assignment == {FOO: frozenset(range(6)), BAR: frozenset(range(3))}
    kinds = [rec.key.record_type for rec in h.log]
    assert kinds == [r.MEMBER_METADATA, r.STATE_PARTITIONS, r.GROUP_METADATA, r.TARGET_MEMBER, r.TARGET_METADATA,
                     r.CURRENT_ASSIGNMENT, *[r.SHARE_STATE] * 9]
    states = {(rec.key.topic_id.hex(), rec.key.partition): rec.value for rec in h.log
              if isinstance(rec.key, r.ShareStateKey)}
    assert set(states) == {(FOO, p) for p in range(6)} | {(BAR, p) for p in range(3)}
    assert all(isinstance(v, r.SharePartitionState) and v.start_offset == -1 and v.state_epoch == 2
               and v.batches == () for v in states.values())
    assert hb(h, "m1", 2).assignment is None  # nothing changed: not sent again


def test_share_group_unknown_member_id_joins() -> None:
    """testShareGroupUnknownMemberIdJoins and testShareGroupUnknownGroupId."""
    h = Harness(CONFIG)
    assert hb(h, "m1", 1).error == E.GROUP_ID_NOT_FOUND
    hb(h, "m1", 0)
    resp = hb(h, "m2", 1)
    assert resp.error == E.UNKNOWN_MEMBER_ID and resp.message == "Member m2 is not a member of group g."


@pytest.mark.parametrize(("beat", "message"), [
    (ShareHeartbeat("g", "", 0, subscribed_topic_names=("foo",)), "Invalid member id in the request."),
    (ShareHeartbeat("g", "x" * 37, 0, subscribed_topic_names=("foo",)), "Invalid member id in the request."),
    (ShareHeartbeat("", "m", 0, subscribed_topic_names=("foo",)), "GroupId can't be empty."),
    (ShareHeartbeat("g", "m", 0, rack_id=" ", subscribed_topic_names=("foo",)), "RackId can't be empty."),
    (ShareHeartbeat("g", "m", 0), "SubscribedTopicNames must be set in first request."),
    (ShareHeartbeat("g", "m", 0, subscribed_topic_names=()), "SubscribedTopicNames must be set in first request."),
    (ShareHeartbeat("g", "m", -2), "MemberEpoch is invalid."),
])
def test_share_group_heartbeat_request_validation(beat: ShareHeartbeat, message: str) -> None:
    """testShareGroupHeartbeatRequestValidation (with KafkaApis's member id check first)."""
    h = Harness(CONFIG)
    resp = h.call(c.ShareGroupHeartbeatRequest(beat, TOPICS))
    assert (resp.error, resp.message) == (E.INVALID_REQUEST, message)
    assert h.log == []


def test_share_group_member_epochs_are_fenced_but_the_previous_one() -> None:
    """throwIfShareGroupMemberEpochIsInvalid: a greater epoch, or a smaller one that is not the
    previous one, is fenced; the previous one passes (the bumped answer was lost)."""
    h = Harness(CONFIG)
    hb(h, "m1", 0)
    hb(h, "m2", 0)
    assert hb(h, "m1", 2).member_epoch == 3  # m2's join moved the group on
    assert hb(h, "m1", 2).error == E.NONE  # the previous epoch
    fenced = hb(h, "m1", 4)
    assert fenced.error == E.FENCED_MEMBER_EPOCH and "greater member epoch (4)" in (fenced.message or "")
    assert hb(h, "m1", 1).error == E.FENCED_MEMBER_EPOCH
    assert hb(h, "m1", 0).error == E.NONE  # testShareGroupMemberCanRejoinWithEpochZero


def test_share_group_leaving_member_bumps_group_epoch() -> None:
    """testShareGroupLeavingMemberBumpsGroupEpoch: the leaver's records are tombstoned and the
    epoch moves on; the one left gets every partition at its next heartbeat."""
    h = Harness(CONFIG)
    hb(h, "m1", 0)
    e2 = hb(h, "m2", 0).member_epoch
    split = hb(h, "m1", 2)
    assert split.error == E.NONE and split.assignment is not None and split.member_epoch == e2
    assert sum(len(ps) for ps in split.assignment.values()) in (4, 5)  # nine partitions over two members
    shard = h.shard
    before = shard.share_groups["g"].epoch
    n = len(h.log)
    left = h.call(c.ShareGroupHeartbeatRequest(ShareHeartbeat("g", "m2", -1), TOPICS))
    assert (left.error, left.member_id, left.member_epoch) == (E.NONE, "m2", -1)
    written = [(rec.key.record_type, rec.value is None) for rec in h.log[n:]]
    assert written == [(r.CURRENT_ASSIGNMENT, True), (r.TARGET_MEMBER, True), (r.MEMBER_METADATA, True),
                       (r.GROUP_METADATA, False)]
    assert shard.share_groups["g"].epoch == before + 1
    again = hb(h, "m1", split.member_epoch)
    assert again.assignment == {FOO: frozenset(range(6)), BAR: frozenset(range(3))}


def test_share_group_members_share_partitions_when_they_outnumber_them() -> None:
    """The simple assignor: three members on one two-partition topic share the partitions, each
    partition held by at most ceil(3/2) = 2 members, the four holdings spread 2/1/1 (Kafka's
    desired assignment counts)."""
    topics = {"t": (FOO, 2)}
    h = Harness(CONFIG)
    for m in ("a", "b", "c"):
        hb(h, m, 0, names=("t",), topics=topics)
    epochs = {m: 0 for m in "abc"}
    got: dict[str, frozenset[int]] = {}
    for _ in range(2):
        for m in "abc":
            resp = hb(h, m, epochs[m], names=("t",), topics=topics)
            assert resp.error == E.NONE, resp
            epochs[m] = resp.member_epoch
            if resp.assignment is not None:
                got[m] = resp.assignment.get(FOO, frozenset())
    assert sorted(len(ps) for ps in got.values()) == [1, 1, 2], got
    assert all(sum(p in ps for ps in got.values()) == 2 for p in (0, 1)), got


def test_share_group_new_member_is_rejected_when_the_maximum_is_reached() -> None:
    """testShareGroupNewMemberIsRejectedWithMaximumMembersIsReached."""
    h = Harness(CONFIG)
    for m in ("a", "b", "c"):
        assert hb(h, m, 0).error == E.NONE
    resp = hb(h, "d", 0)
    assert resp.error == E.GROUP_MAX_SIZE_REACHED
    assert resp.message == "The share group has reached its maximum capacity of 3 members."
    assert hb(h, "a", 0).error == E.NONE  # a member may always come back


def test_session_timeout_expiration_for_share_member() -> None:
    """testSessionTimeoutExpirationForShareMember, and after a load
    (testOnLoadedSessionTimeoutExpirationForShareMember)."""
    h = Harness(CONFIG)
    hb(h, "m1", 0)
    h.sleep(9_000)
    hb(h, "m2", 0)
    h.sleep(1_500)
    assert set(h.shard.share_groups["g"].members) == {"m2"}
    shard, _ = GroupCoordinatorShard.load(list(h.log), h.now, CONFIG)
    assert set(shard.share_groups["g"].members) == {"m2"}
    assert shard.next_deadline() == h.now + 10_000 or shard.next_deadline() is not None


def test_share_group_describe_list_and_delete() -> None:
    """testShareGroupDescribeNoErrors, testShareGroupStates, testShareGroupDeleteTombstones."""
    h = Harness(CONFIG)
    missing = h.call(c.ShareGroupDescribeRequest("nope", TOPICS))
    assert (missing.error, missing.message) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.")
    hb(h, "m1", 0)
    d = h.call(c.ShareGroupDescribeRequest("g", TOPICS))
    assert (d.error, d.state, d.group_epoch, d.assignment_epoch, d.assignor) == (E.NONE, "Stable", 2, 2, "simple")
    [m] = d.members
    assert (m.member_id, m.member_epoch, m.client_id, m.subscribed_topic_names) == ("m1", 2, "client", ("bar", "foo"))
    assert {(t.topic_name, t.partitions) for t in m.assignment} == {("foo", tuple(range(6))), ("bar", (0, 1, 2))}
    listed = h.call(c.ListGroupsRequest())
    assert [(g.group_id, g.protocol_type, g.state, g.group_type) for g in listed.groups] == [("g", "share", "Stable",
                                                                                            "share")]
    assert h.call(c.ListGroupsRequest(types_filter=("consumer",))).groups == ()
    assert h.call(c.DeleteGroupsRequest(("g",))).results == (("g", E.NON_EMPTY_GROUP),)
    h.call(c.ShareGroupHeartbeatRequest(ShareHeartbeat("g", "m1", -1), TOPICS))
    assert h.call(c.ListGroupsRequest(states_filter=("empty",))).groups[0].state == "Empty"
    n = len(h.log)
    assert h.call(c.DeleteGroupsRequest(("g",))).results == (("g", E.NONE),)
    assert [rec.key.record_type for rec in h.log[n:]] == [*[r.SHARE_STATE] * 9, r.TARGET_METADATA,
                                                           r.STATE_PARTITIONS, r.GROUP_METADATA]
    assert all(rec.value is None for rec in h.log[n:])
    assert "g" not in h.shard.share_groups
    shard, _ = GroupCoordinatorShard.load(list(h.log), h.now, CONFIG)
    assert "g" not in shard.share_groups


def test_a_group_id_names_one_kind_of_group() -> None:
    """testConsumerGroupHeartbeatOnShareGroup, testClassicGroupJoinOnShareGroup,
    testConsumerGroupDescribeOnShareGroup, testShareGroupHeartbeatOnConsumerGroup,
    testShareGroupDescribeOnConsumerGroup; offsets of a share group are not a consumer group's."""
    from coordinator.consumer_group.heartbeat_request import ConsumerHeartbeat
    h = Harness(CONFIG)
    hb(h, "m1", 0, group="s")
    consumer = h.call(c.ConsumerGroupHeartbeatRequest(ConsumerHeartbeat(
        "s", "c1", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("foo",), owned={}), TOPICS))
    assert (consumer.error, consumer.message) == (E.GROUP_ID_NOT_FOUND, "Group s is not a consumer group.")
    described = h.call(c.ConsumerGroupDescribeRequest("s", TOPICS))
    assert (described.error, described.message) == (E.GROUP_ID_NOT_FOUND, "Group s is not a consumer group.")
    join = h.join("s").response
    assert join.error == E.INCONSISTENT_GROUP_PROTOCOL and join.member_id == ""
    assert h.commit("s", {("foo", 0): 5}) == {("foo", 0): E.GROUP_ID_NOT_FOUND}
    assert h.call(c.OffsetFetchRequest("s", None)).error == E.GROUP_ID_NOT_FOUND
    classic = h.call(c.DescribeGroupsRequest("s"))
    assert classic.error == E.GROUP_ID_NOT_FOUND and classic.error_message == "Group s is not a classic group."

    h.call(c.ConsumerGroupHeartbeatRequest(ConsumerHeartbeat(
        "k", "c1", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("foo",), owned={}), TOPICS))
    share = hb(h, "m1", 0, group="k")
    assert (share.error, share.message) == (E.GROUP_ID_NOT_FOUND, "Group k is not a share group.")
    sd = h.call(c.ShareGroupDescribeRequest("k", TOPICS))
    assert (sd.error, sd.message) == (E.GROUP_ID_NOT_FOUND, "Group k is not a share group.")
    h.commit("offsets-only", {("foo", 0): 1})
    assert hb(h, "m1", 0, group="offsets-only").error == E.GROUP_ID_NOT_FOUND


def test_share_state_of_new_partitions_starts_at_zero_and_of_new_topics_at_the_reset() -> None:
    """testShareGroupHeartbeatInitializeOnPartitionUpdate and ...MixedNewAndExpandedTopics: a known
    topic's new partitions start at offset 0 (nothing produced meanwhile is skipped); a topic new
    to the group at -1 (share.auto.offset.reset decides); the new partitions are assigned at once."""
    h = Harness(CONFIG)
    first = hb(h, "m1", 0, names=("foo",))
    grown = {"foo": (FOO, 8), "bar": (BAR, 3)}
    n = len(h.log)
    resp = hb(h, "m1", first.member_epoch, names=("foo", "bar"), topics=grown)
    created = {(rec.key.topic_id.hex(), rec.key.partition): rec.value.start_offset for rec in h.log[n:]
               if isinstance(rec.key, r.ShareStateKey) and isinstance(rec.value, r.SharePartitionState)}
    assert created == {(FOO, 6): 0, (FOO, 7): 0, (BAR, 0): -1, (BAR, 1): -1, (BAR, 2): -1}
    assert resp.assignment == {FOO: frozenset(range(8)), BAR: frozenset(range(3))}


def test_share_state_is_read_and_written_by_partition_leaders_and_fenced() -> None:
    """A leader loads the state (recording its leader epoch), writes acknowledgements over it
    from a start offset that never goes back; an older leader is fenced; a partition without
    state is refused (ShareCoordinatorShardTest's read/write cases, with kcoord's write fence)."""
    h = Harness(CONFIG)
    hb(h, "m1", 0)
    read = h.call(c.ShareStateRequest("g", FOO, 0, leader_epoch=5))
    assert read.error == E.NONE and read.state is not None and read.state.leader_epoch == 5
    ack = c.ShareStateWrite(10, (r.StateBatch(10, 14, 2, 1), r.StateBatch(15, 19, 0, 1)))
    assert h.call(c.ShareStateRequest("g", FOO, 0, 5, ack)).error == E.NONE
    later = c.ShareStateWrite(8, (r.StateBatch(15, 16, 4, 2),))  # start offset behind: kept at 10
    assert h.call(c.ShareStateRequest("g", FOO, 0, 6, later)).error == E.NONE
    state = h.call(c.ShareStateRequest("g", FOO, 0, 6)).state
    assert state.start_offset == 10 and state.leader_epoch == 6
    assert state.batches == (r.StateBatch(10, 14, 2, 1), r.StateBatch(15, 16, 4, 2), r.StateBatch(17, 19, 0, 1))
    assert h.call(c.ShareStateRequest("g", FOO, 0, 5, ack)).error == E.FENCED_LEADER_EPOCH
    assert h.call(c.ShareStateRequest("g", FOO, 0, 5)).error == E.FENCED_LEADER_EPOCH
    missing = h.call(c.ShareStateRequest("g", FOO, 99, 6))
    assert (missing.error, missing.message) == (E.INVALID_REQUEST, "Read on uninitialized share partition.")
    assert h.call(c.ShareStateRequest("nope", FOO, 0, 6)).error == E.INVALID_REQUEST
    shard, _ = GroupCoordinatorShard.load(list(h.log), h.now, CONFIG)
    assert shard.share_groups["g"].share_states[(FOO, 0)] == h.shard.share_groups["g"].share_states[(FOO, 0)]


def test_state_batches_combine_later_over_earlier_from_the_start_offset() -> None:
    """PersisterStateBatchCombinerTest's shapes: overlap split, below-start pruned, neighbours of
    one state and count joined."""
    from coordinator.share_group.state import combine
    b = r.StateBatch
    assert combine([b(0, 9, 0, 1)], [b(3, 5, 2, 1)], 0) == (b(0, 2, 0, 1), b(3, 5, 2, 1), b(6, 9, 0, 1))
    assert combine([b(0, 9, 0, 1)], [b(0, 9, 2, 1)], 4) == (b(4, 9, 2, 1),)
    assert combine([b(0, 4, 2, 1)], [b(5, 9, 2, 1)], 0) == (b(0, 9, 2, 1),)
    assert combine([b(0, 4, 2, 1), b(10, 12, 4, 3)], [b(3, 11, 0, 2)], 2) == (b(2, 2, 2, 1), b(3, 11, 0, 2),
                                                                            b(12, 12, 4, 3))
    assert combine([], [b(5, 4, 0, 1)], 0) == ()


def test_share_records_round_trip_through_kafkas_layout() -> None:
    from coordinator.share_group import codec
    tid = bytes(range(16))
    values = [
        (r.MEMBER_METADATA, r.ShareMemberValue("rack", "cid", "/1.2.3.4", ("a", "b"))),
        (r.MEMBER_METADATA, r.ShareMemberValue(None, "cid", "/h", ())),
        (r.GROUP_METADATA, r.ShareEpochValue(7, -12345)),
        (r.TARGET_METADATA, r.ShareTargetEpochValue(7, 1_700_000_000_000)),
        (r.TARGET_METADATA, r.ShareTargetEpochValue(7, 0)),
        (r.TARGET_MEMBER, r.ShareTargetMemberValue((r.SharePartitions(tid, (0, 2)),))),
        (r.CURRENT_ASSIGNMENT, r.ShareAssignmentValue(3, 2, 0, (r.SharePartitions(tid, (1,)),))),
        (r.STATE_PARTITIONS, r.ShareStateValue((r.StateTopic(tid, "foo", (0, 1)),), (), (r.StateTopic(tid, "x"),))),
        (r.SHARE_STATE, r.SharePartitionState(3, 2, 7, 100, 1, 2, (r.StateBatch(100, 104, 2, 1),), 5)),
        (r.SHARE_STATE, r.SharePartitionState(0, 2, -1, -1, 1, 1)),
    ]
    for kind, value in values:
        assert codec.decode_value(kind, codec.encode_value(value)) == value
    # ShareGroupMetadataValue: version 0, Epoch int32, MetadataHash int64, empty tags
    assert codec.encode_value(r.ShareEpochValue(1, 2)) == bytes.fromhex("0000" "00000001" "0000000000000002" "00")
    key = r.ShareMemberKey(r.CURRENT_ASSIGNMENT, "g", "m")
    assert codec.encode_key(key) == bytes.fromhex("000e" "0001") + b"g" + bytes.fromhex("0001") + b"m"
    assert codec.decode_key(codec.encode_key(key)) == key
    state_key = r.ShareStateKey("g", tid, 3)
    assert codec.encode_key(state_key) == bytes.fromhex("0064" "0001") + b"g" + tid + bytes.fromhex("00000003")
    assert codec.decode_key(codec.encode_key(state_key)) == state_key


def test_a_request_is_checked_before_the_kind_of_its_group() -> None:
    """Kafka refuses a malformed heartbeat (KafkaApis, GroupCoordinatorService) before it looks
    the group up: an empty member id is INVALID_REQUEST even for a group of another kind (found
    by the differential harness)."""
    from coordinator.consumer_group.heartbeat_request import ConsumerHeartbeat
    h = Harness(CONFIG)
    h.commit("classic", {("foo", 0): 1})
    resp = h.call(c.ShareGroupHeartbeatRequest(ShareHeartbeat("classic", "", 0, subscribed_topic_names=("foo",)),
                                               TOPICS))
    assert resp.error == E.INVALID_REQUEST
    hb(h, "m1", 0, group="s")
    consumer = h.call(c.ConsumerGroupHeartbeatRequest(ConsumerHeartbeat("s", "c1", 0, owned={}), TOPICS))
    assert consumer.error == E.INVALID_REQUEST  # no rebalance timeout in a first request


def test_compacted_share_records_replay_to_the_same_groups_and_state() -> None:
    """``__consumer_offsets`` compaction keeps the latest record per key: a share group's records
    (members joining and leaving, a deleted and recreated group, share state written over) replay
    from the compacted log to what the whole log gives."""
    from cluster.offsets_compaction import compact_offsets
    from coordinator.codec import decode_batch, encode_batch
    h = Harness(CONFIG)
    hb(h, "m1", 0)
    hb(h, "m2", 0)
    h.call(c.ShareStateRequest("g", FOO, 0, 3, c.ShareStateWrite(0, (r.StateBatch(0, 4, 2, 1),))))
    h.call(c.ShareStateRequest("g", FOO, 0, 3, c.ShareStateWrite(5, (r.StateBatch(5, 9, 4, 2),))))
    h.call(c.ShareGroupHeartbeatRequest(ShareHeartbeat("g", "m2", -1), TOPICS))
    hb(h, "x", 0, group="gone")
    h.call(c.ShareGroupHeartbeatRequest(ShareHeartbeat("gone", "x", -1), TOPICS))
    assert h.call(c.DeleteGroupsRequest(("gone",))).results == (("gone", E.NONE),)
    hb(h, "y", 0, group="gone", names=("bar",))
    whole, _ = GroupCoordinatorShard.load(list(h.log), h.now, CONFIG)
    compacted = [rec for payload in compact_offsets([encode_batch(h.log)]) for rec in decode_batch(payload)]
    assert len(compacted) < len(h.log)
    again, _ = GroupCoordinatorShard.load(compacted, h.now, CONFIG)

    def view(shard: GroupCoordinatorShard) -> dict[str, Any]:
        return {g: (s.epoch, s.assignment_epoch, {m: (x.metadata, x.epoch, dict(x.assigned)) for m, x in s.members.items()},
                    dict(s.targets), dict(s.share_states)) for g, s in shard.share_groups.items()}
    assert view(again) == view(whole)
    assert set(whole.share_groups) == {"g", "gone"} and whole.share_groups["gone"].share_states.keys() == {
        (BAR, p) for p in range(3)}


def test_a_deleted_topic_does_not_bump_the_group_at_every_heartbeat() -> None:
    """From the review: a subscribed topic's share state outlives the topic; the group must not
    take a new epoch at each heartbeat for it."""
    h = Harness(CONFIG)
    first = hb(h, "m1", 0)
    without_bar = {"foo": (FOO, 6)}
    after = hb(h, "m1", first.member_epoch, topics=without_bar)
    n = len(h.log)
    again = hb(h, "m1", after.member_epoch, topics=without_bar)
    assert again.member_epoch == after.member_epoch and len(h.log) == n


def test_share_group_offsets_describe_start_offsets_and_what_is_done() -> None:
    """DescribeShareGroupOffsets reads the share state: the start offset, the leader epoch and the
    delivery complete count of each partition (start -1 where there is none, as Kafka answers)."""
    h = Harness(CONFIG)
    hb(h, "m1", 0)
    h.call(c.ShareStateRequest("g", FOO, 1, 4, c.ShareStateWrite(7, (r.StateBatch(8, 9, 2, 1),), 2)))
    every = h.call(c.ShareOffsetsRequest("g", None))
    assert len(every.offsets) == 9
    assert c.ShareOffset(FOO, 1, 7, 4, 2) in every.offsets
    some = h.call(c.ShareOffsetsRequest("g", ((FOO, (1, 99)),)))
    assert some.offsets == (c.ShareOffset(FOO, 1, 7, 4, 2), c.ShareOffset(FOO, 99, -1, 0, -1))
    assert h.call(c.ShareOffsetsRequest("none", None)).offsets == ()
