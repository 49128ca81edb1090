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


def initialize_all(h: Harness, group: str = "g") -> None:
    """The share coordinator creates every state asked for."""
    asked, h.initializations = h.initializations, []
    for init in asked:
        assert init.group_id == group
        resp = h.call(c.ShareStateInitializedRequest(group, TOPICS, {t: ps for t, (ps, _) in init.topics.items()}))
        assert resp.error == E.NONE


def test_share_group_member_joins_empty_group_with_assignments() -> None:
    """testShareGroupMemberJoinsEmptyGroupWithAssignments: the first heartbeat creates the group at
    epoch 2 and asks for every subscribed partition's state; once it is created the next
    heartbeat assigns them (Kafka's mock assignor hands them out at once; the simple assignor
    assigns initialized partitions only)."""
    h = Harness(CONFIG)
    first = hb(h, "m1", 0)
    assert (first.error, first.member_id, first.member_epoch, first.heartbeat_interval_ms) == (E.NONE, "m1", 2, 1000)
    assert first.assignment == {}
    [init] = h.initializations
    assert init.state_epoch == 2
    assert dict(init.topics) == {FOO: (frozenset(range(6)), -1), BAR: (frozenset(range(3)), -1)}
    kinds = [rec.key.record_type for rec in h.log]
    assert kinds == [r.MEMBER_METADATA, r.GROUP_METADATA, r.TARGET_METADATA, r.CURRENT_ASSIGNMENT, r.STATE_PARTITIONS]
    initialize_all(h)
    second = hb(h, "m1", 2)
    assert second.member_epoch == 3
    assert second.assignment == {FOO: frozenset(range(6)), BAR: frozenset(range(3))}
    assert hb(h, "m1", 3).assignment is None  # nothing changed: not sent again


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
    initialize_all(h)
    assert hb(h, "m1", 2).member_epoch == 3
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
    initialize_all(h)
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
        for init in h.initializations:
            h.call(c.ShareStateInitializedRequest("g", topics, {t: ps for t, (ps, _) in init.topics.items()}))
        h.initializations = []
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
    initialize_all(h)
    hb(h, "m1", 2)
    d = h.call(c.ShareGroupDescribeRequest("g", TOPICS))
    assert (d.error, d.state, d.group_epoch, d.assignment_epoch, d.assignor) == (E.NONE, "Stable", 3, 3, "simple")
    [m] = d.members
    assert (m.member_id, m.member_epoch, m.client_id, m.subscribed_topic_names) == ("m1", 3, "client", ("bar", "foo"))
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
    assert [rec.key.record_type for rec in h.log[n:]] == [r.TARGET_METADATA, r.STATE_PARTITIONS, r.GROUP_METADATA]
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


def test_share_group_initialize_retries_and_failures() -> None:
    """testShareGroupHeartbeatPersisterRequestWithInitializing and the retry interval: partitions
    being initialized are not asked for again until the interval passes; a failed initialization
    is asked for again at the next heartbeat; a known topic's new partitions start at offset 0
    (testShareGroupHeartbeatInitializeOnPartitionUpdate)."""
    config = GroupConfig(share=ShareConfig(heartbeat_interval_ms=1000, session_timeout_ms=10_000,
                                           initialize_retry_interval_ms=5000))
    h = Harness(config)
    hb(h, "m1", 0)
    [first] = h.initializations
    h.initializations = []
    hb(h, "m1", 2)
    assert h.initializations == []  # still initializing, within the interval
    h.call(c.ShareStateInitializedRequest("g", TOPICS, failed={BAR: frozenset(range(3))},
                                          initialized={FOO: frozenset(range(6))}))
    hb(h, "m1", 2)
    [again] = h.initializations
    assert dict(again.topics) == {BAR: (frozenset(range(3)), -1)}  # failed: unknown again, reset decides
    h.initializations = []
    h.sleep(config.share.initialize_retry_interval_ms)
    resp = hb(h, "m1", 3)
    assert resp.error == E.NONE, resp
    [retried] = h.initializations
    assert set(retried.topics) == {BAR}
    h.initializations = []
    grown = {"foo": (FOO, 8), "bar": (BAR, 3)}
    resp = hb(h, "m1", resp.member_epoch, topics=grown)
    [update] = h.initializations
    assert dict(update.topics)[FOO] == (frozenset({6, 7}), 0)


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
    ]
    for kind, value in values:
        assert codec.decode_value(kind, codec.encode_value(value)) == value
    # ShareGroupMetadataValue: version 0, Epoch int32, MetadataHash int64, empty tags
    assert codec.encode_value(r.ShareEpochValue(1, 2)) == bytes.fromhex("0000" "00000001" "0000000000000002" "00")
    key = r.ShareMemberKey(r.CURRENT_ASSIGNMENT, "g", "m")
    assert codec.encode_key(key) == bytes.fromhex("000e" "0001") + b"g" + bytes.fromhex("0001") + b"m"
    assert codec.decode_key(codec.encode_key(key)) == key
