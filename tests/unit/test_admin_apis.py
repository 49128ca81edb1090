"""Describe/List/Delete groups and OffsetDelete, ported from Kafka's tests (reference §1.12, §4.8, §4.9)."""

from __future__ import annotations

from coordinator import commands as c
from coordinator.errors import ErrorCode
from coordinator.group import GroupState

from .harness import Harness, consumer_subscription
from .offset_helpers import (
    delete_groups,
    describe,
    group_tombstone,
    join_completing,
    list_groups,
    offset_delete,
    offset_tombstone,
)

E = ErrorCode
S = GroupState


def _groups_in_every_state(h: Harness) -> None:
    h.join_stable("stable", 1)
    join_completing(h, "completing", n=1)
    h.join("preparing")  # parked in the initial delay
    h.commit("simple", {("t", 0): 1})


def test_list_groups() -> None:
    """testListGroups"""
    h = Harness()
    _groups_in_every_state(h)
    assert list_groups(h) == {"stable": "Stable", "completing": "CompletingRebalance",
                              "preparing": "PreparingRebalance", "simple": "Empty"}
    resp = h.call(c.ListGroupsRequest())
    by_id = {g.group_id: g for g in resp.groups}
    assert by_id["simple"] == c.ListedGroup("simple", "", "Empty", "classic")
    assert by_id["stable"].protocol_type == "consumer"


def test_list_groups_state_filter_is_case_insensitive() -> None:
    """testListGroups (states filter, case-insensitive and trimmed)"""
    h = Harness()
    _groups_in_every_state(h)
    assert list_groups(h, states=("stable",)) == {"stable": "Stable"}
    assert list_groups(h, states=(" EMPTY ", "preparingrebalance")) == {"simple": "Empty",
                                                                        "preparing": "PreparingRebalance"}
    assert list_groups(h, states=("Dead",)) == {}


def test_list_groups_type_filter() -> None:
    """testListGroups (types filter: classic matches, unknown types match nothing)"""
    h = Harness()
    _groups_in_every_state(h)
    assert set(list_groups(h, types=("Classic",))) == {"stable", "completing", "preparing", "simple"}
    assert list_groups(h, types=("consumer",)) == {}
    assert list_groups(h, types=("bogus",)) == {}
    assert list_groups(h, states=("stable",), types=("CLASSIC",)) == {"stable": "Stable"}


def test_describe_group_stable() -> None:
    """testDescribeGroupStable"""
    h = Harness()
    leader, follower = h.join_stable("g", 2)
    d = describe(h, "g")
    assert (d.error, d.state, d.protocol_type, d.protocol_data, d.error_message) == (
        E.NONE, "Stable", "consumer", "range", None)
    assert [(m.member_id, m.client_id, m.client_host, m.metadata, m.assignment) for m in d.members] == [
        (leader, "client", "/127.0.0.1", b"range-meta", leader.encode()),
        (follower, "client", "/127.0.0.1", b"range-meta", follower.encode()),
    ]


def test_describe_group_rebalancing() -> None:
    """testDescribeGroupRebalancing"""
    h = Harness()
    leader, [follower], _ = join_completing(h, n=2)
    d = describe(h, "g")
    assert (d.state, d.protocol_type, d.protocol_data) == ("CompletingRebalance", "consumer", "")
    assert [(m.member_id, m.metadata, m.assignment) for m in d.members] == [(leader, b"", b""),
                                                                         (follower, b"", b"")]
    h.join("g", leader, protocols=(("roundrobin", b"x"),))
    d = describe(h, "g")
    assert (d.state, d.protocol_data) == ("PreparingRebalance", "")
    assert [m.metadata for m in d.members] == [b"", b""]


def test_describe_groups_group_id_not_found() -> None:
    """testDescribeGroupsGroupIdNotFoundException"""
    h = Harness()
    d = describe(h, "unknown")
    assert (d.error, d.group_id, d.state, d.protocol_type, d.protocol_data, d.members, d.error_message) == (
        E.GROUP_ID_NOT_FOUND, "unknown", "Dead", "", "", (), "Group unknown not found.")


def test_describe_dead_group() -> None:
    """testDescribeGroupsGroupIdNotFoundException (a Dead group is not found)"""
    h = Harness()
    h.join_stable("g", 1)
    h.group("g").transition_to(S.DEAD, h.now)
    d = describe(h, "g")
    assert (d.error, d.state, d.error_message) == (E.GROUP_ID_NOT_FOUND, "Dead", "Group g not found.")


def test_describe_simple_group() -> None:
    """testDescribeGroupStable (simple group: Empty, no protocol type)"""
    h = Harness()
    h.commit("simple", {("t", 0): 5})
    d = describe(h, "simple")
    assert (d.error, d.state, d.protocol_type, d.members, d.error_message) == (E.NONE, "Empty", "", (), None)


def test_classic_group_delete() -> None:
    """testClassicGroupDelete"""
    h = Harness()
    [m] = h.join_stable("g", 1)
    h.commit("g", {("foo", 0): 10, ("foo", 1): 11, ("bar", 0): 5}, generation=1, member_id=m)
    h.leave("g", (m, None))
    n = len(h.log)
    assert delete_groups(h, "g") == {"g": E.NONE}
    written = h.log[n:]
    assert written[-1] == group_tombstone("g")
    assert sorted(written[:-1], key=repr) == sorted(
        [offset_tombstone("g", "foo", 0), offset_tombstone("g", "foo", 1), offset_tombstone("g", "bar", 0)],
        key=repr)
    assert "g" not in h.shard.groups and "g" not in h.shard.offsets
    assert describe(h, "g").error is E.GROUP_ID_NOT_FOUND
    assert h.fetch("g", {"foo": [0]}) == {("foo", 0): -1}


def test_delete_groups_errors_by_state() -> None:
    """testClassicGroupDelete (NON_EMPTY_GROUP / GROUP_ID_NOT_FOUND rows)"""
    h = Harness()
    _groups_in_every_state(h)
    n = len(h.log)
    assert delete_groups(h, "stable", "completing", "preparing", "unknown") == {
        "stable": E.NON_EMPTY_GROUP, "completing": E.NON_EMPTY_GROUP,
        "preparing": E.NON_EMPTY_GROUP, "unknown": E.GROUP_ID_NOT_FOUND}
    assert h.log[n:] == []
    h.group("stable").transition_to(S.DEAD, h.now)
    assert delete_groups(h, "stable") == {"stable": E.GROUP_ID_NOT_FOUND}


def test_delete_simple_group_and_duplicates() -> None:
    """testDeleteGroupAllOffsets (simple group; duplicate names deleted once)"""
    h = Harness()
    h.commit("simple", {("t", 0): 1})
    n = len(h.log)
    assert h.call(c.DeleteGroupsRequest(("simple", "simple"))).results == (("simple", E.NONE),)
    assert h.log[n:] == [offset_tombstone("simple", "t", 0), group_tombstone("simple")]


def test_classic_group_maybe_delete_only_empty_groups() -> None:
    """testClassicGroupMaybeDelete"""
    h = Harness()
    h.join_stable("g", 1)
    [m] = list(h.group("g").members)
    assert delete_groups(h, "g") == {"g": E.NON_EMPTY_GROUP}
    h.leave("g", (m, None))
    assert delete_groups(h, "g") == {"g": E.NONE}
    assert delete_groups(h, "g") == {"g": E.GROUP_ID_NOT_FOUND}


def test_generic_group_offset_delete() -> None:
    """testGenericGroupOffsetDelete"""
    h = Harness()
    h.commit("g", {("foo", 0): 1, ("foo", 1): 2, ("bar", 0): 3})
    n = len(h.log)
    resp = offset_delete(h, "g", {"foo": [0, 1, 7]})
    assert resp == c.OffsetDeleteResponse(E.NONE, (("foo", ((0, E.NONE), (1, E.NONE), (7, E.NONE))),))
    assert h.log[n:] == [offset_tombstone("g", "foo", 0), offset_tombstone("g", "foo", 1)]
    assert h.fetch("g") == {("bar", 0): 3}


def test_generic_group_offset_delete_with_errors() -> None:
    """testGenericGroupOffsetDeleteWithErrors"""
    h = Harness()
    assert offset_delete(h, "", {"foo": [0]}).error == E.INVALID_GROUP_ID
    assert offset_delete(h, "unknown", {"foo": [0]}).error == E.GROUP_ID_NOT_FOUND
    # A Stable consumer group subscribed to "foo" only.
    [m] = h.join_stable("g", 1, protocols=(("range", consumer_subscription("foo")),))
    h.commit("g", {("foo", 0): 1, ("bar", 0): 2}, generation=1, member_id=m)
    n = len(h.log)
    resp = offset_delete(h, "g", {"foo": [0], "bar": [0]})
    assert resp == c.OffsetDeleteResponse(E.NONE, (
        ("foo", ((0, E.GROUP_SUBSCRIBED_TO_TOPIC),)), ("bar", ((0, E.NONE),))))
    assert h.log[n:] == [offset_tombstone("g", "bar", 0)]
    h.group("g").transition_to(S.DEAD, h.now)
    assert offset_delete(h, "g", {"foo": [0]}).error == E.GROUP_ID_NOT_FOUND


def test_offset_delete_non_consumer_group_not_empty() -> None:
    """testGenericGroupOffsetDeleteWithErrors (non-consumer protocol and not Empty: NON_EMPTY_GROUP)"""
    h = Harness()
    [m] = h.join_stable("g", 1, protocol_type="connect")
    h.commit("g", {("foo", 0): 1}, generation=1, member_id=m)
    n = len(h.log)
    assert offset_delete(h, "g", {"foo": [0]}) == c.OffsetDeleteResponse(E.NON_EMPTY_GROUP)
    assert h.log[n:] == []


def test_offset_delete_consumer_group_unknown_subscription_is_subscribed() -> None:
    """testGenericGroupOffsetDeleteWithErrors (unparsable subscription: every topic counts as subscribed)"""
    h = Harness()
    [m] = h.join_stable("g", 1)  # CONSUMER_PROTOCOLS metadata is not a valid subscription
    assert h.group("g").subscribed_topics is None
    h.commit("g", {("foo", 0): 1}, generation=1, member_id=m)
    assert offset_delete(h, "g", {"foo": [0]}).topics == (("foo", ((0, E.GROUP_SUBSCRIBED_TO_TOPIC),)),)
