"""ConsumerGroupHeartbeat on a group (coordinator/consumer_group/heartbeat.py), step by step: joins,
revocation before reassignment, leave, static members, errors; and load = replay: the records a
sequence of heartbeats wrote rebuild the same group."""

from __future__ import annotations

import itertools
from dataclasses import replace

from coordinator.config import ConsumerConfig
from coordinator.consumer_group import records as r
from coordinator.consumer_group.group import ConsumerGroup, GroupState
from coordinator.consumer_group.heartbeat import HeartbeatAnswer, consumer_heartbeat
from coordinator.consumer_group.heartbeat_request import ConsumerHeartbeat
from coordinator.consumer_group.member import MemberState
from coordinator.errors import ErrorCode

FOO = bytes(range(16)).hex()
TOPICS = {"foo": (FOO, 4)}
CONFIG = ConsumerConfig(heartbeat_interval_ms=3000)


class Coordinator:
    """One group driven by heartbeats, keeping every record written."""

    def __init__(self, config: ConsumerConfig = CONFIG) -> None:
        self.group: ConsumerGroup | None = None
        self.log: list[tuple[r.ConsumerGroupKey, r.ConsumerGroupValue | None]] = []
        self.ids = (f"gen-{i}" for i in itertools.count())
        self.config = config

    def hb(self, member: str, epoch: int, owned: dict[str, frozenset[int]] | None = None, **kw: object) -> HeartbeatAnswer:
        fields = {"rebalance_timeout_ms": 45000, "subscribed_topic_names": ("foo",)} if epoch == 0 else {}
        fields.update(kw)  # type: ignore[arg-type]
        req = ConsumerHeartbeat("g", member, epoch, owned=owned if owned is not None or epoch != 0 else {},
                                **fields)  # type: ignore[arg-type]
        self.group, answer = consumer_heartbeat(self.group, req, TOPICS, "client", "/127.0.0.1", self.config,
                                                lambda: next(self.ids))
        self.log += answer.records
        return answer

    def rebuilt(self) -> ConsumerGroup:
        g = ConsumerGroup("g")
        for key, value in self.log:
            g.replay(key, value)
        return g


def parts(*ps: int) -> dict[str, frozenset[int]]:
    return {FOO: frozenset(ps)} if ps else {}


def same_group(a: ConsumerGroup, b: ConsumerGroup) -> None:
    assert (a.epoch, a.assignment_epoch, a.targets, a.partition_epochs) == (
        b.epoch, b.assignment_epoch, b.targets, b.partition_epochs)
    assert {m: (x.metadata, x.assignment) for m, x in a.members.items()} == {
        m: (x.metadata, x.assignment) for m, x in b.members.items()}


def test_a_second_member_gets_its_partitions_only_after_the_first_revoked_them() -> None:
    c = Coordinator()
    a = c.hb("a", 0)
    assert (a.error, a.member_epoch, a.assignment, a.heartbeat_interval_ms) == (ErrorCode.NONE, 1, parts(0, 1, 2, 3),
                                                                                3000)
    kinds = [k.record_type for k, _ in a.records]
    assert kinds == [r.MEMBER_METADATA, r.GROUP_METADATA, r.TARGET_MEMBER, r.TARGET_METADATA, r.CURRENT_ASSIGNMENT]
    assert c.hb("a", 1, parts(0, 1, 2, 3)).records == []  # nothing changed, nothing written
    b = c.hb("b", 0)
    assert (b.member_epoch, b.assignment) == (2, {})  # its partitions are still a's
    assert c.group is not None and c.group.state is GroupState.RECONCILING
    a = c.hb("a", 1, parts(0, 1, 2, 3))
    assert a.member_epoch == 1 and a.assignment is not None and len(a.assignment[FOO]) == 2  # revoke two first
    assert c.group.members["a"].assignment.state is MemberState.UNREVOKED_PARTITIONS
    assert c.hb("b", 2, {}).assignment is None  # still nothing free
    kept = a.assignment[FOO]
    a = c.hb("a", 1, {FOO: kept})  # a let go
    assert (a.member_epoch, a.assignment) == (2, None)
    b = c.hb("b", 2, {})
    assert b.assignment == parts(*({0, 1, 2, 3} - kept))
    c.hb("b", 2, b.assignment)
    assert c.group.state is GroupState.STABLE
    same_group(c.group, c.rebuilt())


def test_leaving_bumps_the_epoch_and_the_rest_take_the_partitions_over() -> None:
    c = Coordinator()
    c.hb("a", 0)
    c.hb("b", 0)
    a = c.hb("a", 1, parts(0, 1, 2, 3))
    assert a.assignment is not None
    c.hb("a", 1, a.assignment)
    b = c.hb("b", 2, {})
    assert b.assignment
    left = c.hb("b", -1)
    assert left.member_epoch == -1
    assert [k.record_type for k, v in left.records] == [r.CURRENT_ASSIGNMENT, r.TARGET_MEMBER, r.MEMBER_METADATA,
                                                        r.GROUP_METADATA]
    a2 = c.hb("a", 2, a.assignment)
    assert (a2.member_epoch, a2.assignment) == (3, parts(0, 1, 2, 3))
    assert c.group is not None
    same_group(c.group, c.rebuilt())


def test_the_last_member_leaving_empties_the_group() -> None:
    c = Coordinator()
    c.hb("a", 0)
    c.hb("a", -1)
    assert c.group is not None and c.group.state is GroupState.EMPTY
    assert c.group.assignment_epoch == c.group.epoch
    same_group(c.group, c.rebuilt())


def test_a_static_member_rejoining_under_a_new_id_keeps_its_partitions_without_a_new_epoch() -> None:
    c = Coordinator()
    c.hb("a", 0, instance_id="i-a")
    b = c.hb("b", 0)
    a = c.hb("a", 1, parts(0, 1, 2, 3), instance_id="i-a")
    assert a.assignment is not None
    c.hb("a", 1, a.assignment, instance_id="i-a")
    c.hb("b", 2, {})
    assert c.group is not None
    epoch = c.group.epoch
    assert c.hb("a", -2, instance_id="i-a").member_epoch == -2
    # the instance id is still held while it is not released... by someone else's id it is refused
    back = c.hb("a2", 0, instance_id="i-a")
    assert back.error is ErrorCode.NONE and back.assignment == a.assignment
    assert c.group.epoch == epoch and "a" not in c.group.members  # no rebalance
    same_group(c.group, c.rebuilt())
    assert b.member_epoch == 2


def test_an_instance_id_held_by_a_live_member_is_not_released() -> None:
    c = Coordinator()
    c.hb("a", 0, instance_id="i-a")
    answer = c.hb("z", 0, instance_id="i-a")
    assert answer.error is ErrorCode.UNRELEASED_INSTANCE_ID and answer.records == []


def test_errors_write_nothing() -> None:
    c = Coordinator()
    assert c.hb("x", 3).error is ErrorCode.GROUP_ID_NOT_FOUND
    c.hb("a", 0)
    assert c.hb("nobody", 1, {}).error is ErrorCode.UNKNOWN_MEMBER_ID
    assert c.hb("a", 9, {}).error is ErrorCode.FENCED_MEMBER_EPOCH
    assert c.hb("a", 1, {}, server_assignor="nope").error is ErrorCode.UNSUPPORTED_ASSIGNOR
    assert c.hb("nobody", -1).error is ErrorCode.UNKNOWN_MEMBER_ID
    full = Coordinator(replace(CONFIG, max_size=1))
    full.hb("a", 0)
    assert full.hb("b", 0).error is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert c.group is not None
    same_group(c.group, c.rebuilt())


def test_a_v0_join_gets_a_member_id_from_the_coordinator() -> None:
    c = Coordinator()
    answer = c.hb("", 0, api_version=0)
    assert answer.member_id == "gen-0" and answer.member_epoch == 1


def test_a_subscription_change_bumps_the_epoch_and_revokes_what_is_no_longer_wanted() -> None:
    c = Coordinator()
    c.hb("a", 0)
    assert c.group is not None
    before = c.group.epoch
    a = c.hb("a", 1, parts(0, 1, 2, 3), subscribed_topic_names=())
    assert c.group.epoch == before + 1
    assert (a.member_epoch, a.assignment) == (1, {})  # revoke everything first
    a = c.hb("a", 1, {})
    assert (a.member_epoch, a.error) == (2, ErrorCode.NONE)
    same_group(c.group, c.rebuilt())


def test_a_fenced_member_is_removed_and_the_others_take_its_partitions() -> None:
    from coordinator.consumer_group.heartbeat import fence_member

    c = Coordinator()
    c.hb("a", 0)
    c.hb("b", 0)
    assert c.group is not None
    records = fence_member(c.group, "b")  # b's session expired
    c.log += records
    assert "b" not in c.group.members and fence_member(c.group, "b") == []
    a = c.hb("a", 1, parts(0, 1, 2, 3))
    assert (a.member_epoch, a.assignment) == (c.group.epoch, None)  # a keeps everything, now at the new epoch
    assert c.group.members["a"].assignment.partitions() == parts(0, 1, 2, 3)
    same_group(c.group, c.rebuilt())


def test_a_regex_subscribes_to_every_topic_it_matches_whole() -> None:
    topics = {"foo": (FOO, 4), "food": (bytes(range(2, 18)).hex(), 2), "xfoo": (bytes(range(3, 19)).hex(), 2)}
    group, answer = consumer_heartbeat(None, ConsumerHeartbeat(
        "g", "m", 0, rebalance_timeout_ms=45000, subscribed_topic_regex="foo.*", owned={}), topics, "c", "/h",
        CONFIG, lambda: "x")
    assert answer.error == ErrorCode.NONE
    assert answer.assignment == {FOO: frozenset(range(4)), topics["food"][0]: frozenset(range(2))}  # not xfoo

    # a topic created later that matches reaches the member on its next heartbeat
    grown = {**topics, "foobar": (bytes(range(4, 20)).hex(), 1)}
    again = consumer_heartbeat(group, ConsumerHeartbeat("g", "m", 1, owned=dict(answer.assignment or {})), grown,
                               "c", "/h", CONFIG, lambda: "x")[1]
    assert again.member_epoch == 2 and grown["foobar"][0] in (again.assignment or {})

    # dropping the regex ("") leaves the member with its names only: nothing here
    dropped = consumer_heartbeat(group, ConsumerHeartbeat("g", "m", 2, subscribed_topic_regex="",
                                                          owned=dict(again.assignment or {})), grown,
                                 "c", "/h", CONFIG, lambda: "x")[1]
    assert dropped.assignment == {}


def test_an_invalid_regex_new_to_the_group_is_refused_and_writes_nothing() -> None:
    group, answer = consumer_heartbeat(None, ConsumerHeartbeat(
        "g", "m", 0, rebalance_timeout_ms=45000, subscribed_topic_regex="(?=foo)", owned={}), TOPICS, "c", "/h",
        CONFIG, lambda: "x")
    assert answer.error == ErrorCode.INVALID_REGULAR_EXPRESSION and answer.records == []
    assert answer.message is not None and "(?=foo)" in answer.message
