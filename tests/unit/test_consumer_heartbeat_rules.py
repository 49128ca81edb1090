"""The consumer group protocol's request checks and target assignment (coordinator/consumer_group):
Kafka's static validation in its order, the member epoch check, the preferred assignor and the
target records."""

from __future__ import annotations

from dataclasses import replace

import pytest

from coordinator.consumer_group.heartbeat_request import ConsumerHeartbeat, epoch_fenced, invalid
from coordinator.consumer_group.member import MemberAssignment, MemberState
from coordinator.consumer_group.target import Subscriber, compute_target, preferred_assignor
from coordinator.errors import ErrorCode

ASSIGNORS = ("uniform", "range")
JOIN = ConsumerHeartbeat("g", "m1", 0, rebalance_timeout_ms=45000, subscribed_topic_names=("t",), owned={})


@pytest.mark.parametrize(("change", "error"), [
    ({"member_id": " "}, ErrorCode.INVALID_REQUEST),                     # v1 needs the client's member id
    ({"group_id": ""}, ErrorCode.INVALID_REQUEST),
    ({"instance_id": " "}, ErrorCode.INVALID_REQUEST),
    ({"rack_id": ""}, ErrorCode.INVALID_REQUEST),
    ({"rebalance_timeout_ms": -1}, ErrorCode.INVALID_REQUEST),
    ({"owned": None}, ErrorCode.INVALID_REQUEST),                        # a joining member owns nothing...
    ({"owned": {"t": frozenset({0})}}, ErrorCode.INVALID_REQUEST),       # ...and says so
    ({"subscribed_topic_names": None}, ErrorCode.INVALID_REQUEST),
    ({"member_epoch": -2}, ErrorCode.INVALID_REQUEST),                   # a static leave needs its instance id
    ({"member_epoch": -3}, ErrorCode.INVALID_REQUEST),
    ({"server_assignor": "sticky"}, ErrorCode.UNSUPPORTED_ASSIGNOR),
])
def test_static_validation(change: dict, error: ErrorCode) -> None:  # type: ignore[type-arg]
    got = invalid(replace(JOIN, **change), ASSIGNORS)
    assert got is not None and got[0] is error, got


def test_valid_requests_pass() -> None:
    assert invalid(JOIN, ASSIGNORS) is None
    assert invalid(replace(JOIN, subscribed_topic_names=None, subscribed_topic_regex=""), ASSIGNORS) is None
    assert invalid(replace(JOIN, api_version=0, member_id=""), ASSIGNORS) is None  # v0: the server picks the id
    assert invalid(replace(JOIN, member_epoch=-2, instance_id="i", owned=None), ASSIGNORS) is None
    assert invalid(replace(JOIN, member_epoch=5, owned=None, rebalance_timeout_ms=-1,
                           subscribed_topic_names=None), ASSIGNORS) is None


def test_the_member_epoch_check() -> None:
    m = MemberAssignment(7, 6, MemberState.STABLE, {"t": {0: 6, 1: 7}})
    assert not epoch_fenced(m, 7, None)
    assert not epoch_fenced(m, 0, None)  # a rejoin
    assert epoch_fenced(m, 8, {})  # from the future
    assert not epoch_fenced(m, 6, {"t": frozenset({0})})  # the previous epoch: its last answer was lost
    assert epoch_fenced(m, 6, {"t": frozenset({2})})  # ...but it claims more than it has
    assert epoch_fenced(m, 6, None)
    assert epoch_fenced(m, 5, {})


def test_the_most_asked_assignor_wins_ties_to_the_first_name_and_the_default_otherwise() -> None:
    def members(*asks: str | None) -> dict[str, Subscriber]:
        return {f"m{i}": Subscriber(f"m{i}", frozenset(), server_assignor=a) for i, a in enumerate(asks)}
    assert preferred_assignor(members(None, None), ASSIGNORS) == "uniform"
    assert preferred_assignor(members("range", None), ASSIGNORS) == "range"
    assert preferred_assignor(members("uniform", "range", "range"), ASSIGNORS) == "range"
    assert preferred_assignor(members("uniform", "range"), ASSIGNORS) == "range"


def test_target_records_only_for_members_whose_target_changed_and_unknown_topics_are_left_out() -> None:
    members = {"a": Subscriber("a", frozenset({"t", "gone"})), "b": Subscriber("b", frozenset({"t", "gone"}))}
    first = compute_target(2, members, {}, {"t": 4}, ASSIGNORS)
    assert first.epoch == 2 and set(first.changed) == {"a", "b"}
    assert sorted(len(first.targets[m]["t"]) for m in "ab") == [2, 2]
    again = compute_target(3, members, first.targets, {"t": 4}, ASSIGNORS)
    assert again.changed == {} and again.targets == first.targets
    members["c"] = Subscriber("c", frozenset({"t"}))
    third = compute_target(4, members, first.targets, {"t": 4}, ASSIGNORS)
    assert "c" in third.changed and sum(len(t.get("t", ())) for t in third.targets.values()) == 4
