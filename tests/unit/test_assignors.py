"""The server-side assignors of KIP-848 (coordinator/assignors): examples from Kafka's tests and
properties over random groups (hypothesis): every subscribed partition assigned exactly once and
only to a subscriber, balance, stickiness, stability, independence from member order."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.assignors import (
    ASSIGNORS,
    Assignment,
    AssignorError,
    MemberSpec,
    assign_range,
    assign_uniform,
)


def members(*specs: MemberSpec) -> dict[str, MemberSpec]:
    return {m.member_id: m for m in specs}


def sizes_of(a: Assignment) -> dict[str, int]:
    return {m: sum(len(ps) for ps in topics.values()) for m, topics in a.items()}


def check_complete(group: Mapping[str, MemberSpec], counts: Mapping[str, int], a: Assignment) -> None:
    """Every partition of every subscribed topic exactly once, each to one of its subscribers."""
    seen = Counter((t, p) for topics in a.values() for t, ps in topics.items() for p in ps)
    subscribed = {t for m in group.values() for t in m.topics}
    assert set(seen) == {(t, p) for t in subscribed for p in range(counts[t])}
    assert all(n == 1 for n in seen.values())
    assert set(a) == set(group)
    for m, topics in a.items():
        assert set(topics) <= group[m].topics
        assert all(ps for ps in topics.values())  # no empty entries


# ---------------------------------------------------------------- examples

def test_uniform_balances_one_topic_over_three_members() -> None:
    group = members(*(MemberSpec(m, frozenset({"t"})) for m in "ABC"))
    a = assign_uniform(group, {"t": 7})
    check_complete(group, {"t": 7}, a)
    assert sorted(sizes_of(a).values()) == [2, 2, 3]


def test_uniform_keeps_what_a_member_had_when_one_joins() -> None:
    before = {"A": {"t": frozenset({0, 1, 2})}, "B": {"t": frozenset({3, 4, 5})}}
    group = members(MemberSpec("A", frozenset({"t"}), previous=before["A"]),
                    MemberSpec("B", frozenset({"t"}), previous=before["B"]),
                    MemberSpec("C", frozenset({"t"})))
    a = assign_uniform(group, {"t": 6})
    assert a["A"]["t"] < before["A"]["t"] and a["B"]["t"] < before["B"]["t"]  # each gave one up
    assert sizes_of(a) == {"A": 2, "B": 2, "C": 2}


def test_uniform_drops_what_a_member_no_longer_subscribes_to() -> None:
    group = members(MemberSpec("A", frozenset({"t"}), previous={"t": frozenset({0}), "u": frozenset({0, 1})}),
                    MemberSpec("B", frozenset({"t", "u"})))
    a = assign_uniform(group, {"t": 2, "u": 2})
    check_complete(group, {"t": 2, "u": 2}, a)
    assert a["B"]["u"] == frozenset({0, 1})


def test_range_gives_contiguous_ranges_extra_first_and_co_partitions() -> None:
    group = members(MemberSpec("b", frozenset({"x", "y"})), MemberSpec("a", frozenset({"x", "y"})))
    a = assign_range(group, {"x": 3, "y": 3})
    assert a == {"a": {"x": frozenset({0, 1}), "y": frozenset({0, 1})}, "b": {"x": frozenset({2}), "y": frozenset({2})}}


def test_range_orders_static_members_first_by_instance_id() -> None:
    group = members(MemberSpec("a", frozenset({"t"})), MemberSpec("z", frozenset({"t"}), instance_id="i1"))
    assert assign_range(group, {"t": 3}) == {"z": {"t": frozenset({0, 1})}, "a": {"t": frozenset({2})}}


def test_range_with_more_members_than_partitions_leaves_the_last_ones_empty() -> None:
    group = members(*(MemberSpec(m, frozenset({"t"})) for m in "ABC"))
    assert assign_range(group, {"t": 2}) == {"A": {"t": frozenset({0})}, "B": {"t": frozenset({1})}, "C": {}}


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_an_unknown_subscribed_topic_is_an_error(name: str) -> None:
    with pytest.raises(AssignorError):
        ASSIGNORS[name](members(MemberSpec("A", frozenset({"nope"}))), {})


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_no_members_or_no_subscriptions(name: str) -> None:
    assert ASSIGNORS[name]({}, {"t": 3}) == {}
    assert ASSIGNORS[name](members(MemberSpec("A", frozenset())), {"t": 3}) == {"A": {}}


# ---------------------------------------------------------------- properties

TOPICS = ["t0", "t1", "t2", "t3"]


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool) -> tuple[dict[str, MemberSpec], dict[str, int]]:
    counts = {t: draw(st.integers(0, 9)) for t in TOPICS}
    ids = draw(st.lists(st.text("abcdé𝄞", min_size=1, max_size=3), min_size=1, max_size=7, unique=True))
    shared = frozenset(draw(st.sets(st.sampled_from(TOPICS), min_size=1)))
    subs = {m: shared if homogeneous else frozenset(draw(st.sets(st.sampled_from(TOPICS)))) for m in ids}
    # a previous target: each partition with some member, or nobody (disjoint, possibly stale)
    prev: dict[str, dict[str, set[int]]] = {m: {} for m in ids}
    for t in TOPICS:
        for p in range(counts[t] + draw(st.integers(0, 1))):  # sometimes a partition that is gone
            owner = draw(st.sampled_from([None, *ids]))
            if owner is not None:
                prev[owner].setdefault(t, set()).add(p)
    instance = {m: draw(st.sampled_from([None, f"i-{m}"])) for m in ids}
    group = {m: MemberSpec(m, subs[m], instance[m], {t: frozenset(ps) for t, ps in prev[m].items()}) for m in ids}
    return group, counts


def _again(group: Mapping[str, MemberSpec], a: Assignment) -> dict[str, MemberSpec]:
    """The same members with ``a`` as their previous target, in reverse order."""
    return {m: MemberSpec(s.member_id, s.topics, s.instance_id, a[m]) for m, s in reversed(list(group.items()))}


@settings(max_examples=300, deadline=None)
@given(groups(homogeneous=True))
def test_uniform_homogeneous_is_complete_balanced_sticky_and_stable(g: tuple[dict[str, MemberSpec], dict[str, int]]) -> None:
    group, counts = g
    a = assign_uniform(group, counts)
    check_complete(group, counts, a)
    sizes = sizes_of(a)
    assert max(sizes.values()) - min(sizes.values()) <= 1
    base = sum(counts[t] for t in next(iter(group.values())).topics) // len(group)
    for m, spec in group.items():
        had = {(t, p) for t, ps in spec.previous.items() if t in spec.topics for p in ps if p < counts[t]}
        kept = {(t, p) for t, ps in a[m].items() for p in ps} & had
        assert len(kept) >= min(len(had), base)  # stickiness up to the quota
    assert assign_uniform(_again(group, a), counts) == a  # its own output is a fixed point


@settings(max_examples=300, deadline=None)
@given(groups(homogeneous=False))
def test_uniform_heterogeneous_is_complete_locally_balanced_and_stable(g: tuple[dict[str, MemberSpec], dict[str, int]]) -> None:
    group, counts = g
    a = assign_uniform(group, counts)
    check_complete(group, counts, a)
    sizes = sizes_of(a)
    for t in {t for s in group.values() for t in s.topics}:
        subs = [m for m, s in group.items() if t in s.topics]
        holders = [m for m in subs if a[m].get(t)]
        # no holder of a partition of t could give one to a subscriber of t two smaller
        assert all(sizes[h] <= sizes[s] + 1 for h in holders for s in subs)
    assert assign_uniform(_again(group, a), counts) == a


@settings(max_examples=200, deadline=None)
@given(groups(homogeneous=False))
def test_range_is_complete_contiguous_and_balanced_per_topic(g: tuple[dict[str, MemberSpec], dict[str, int]]) -> None:
    group, counts = g
    a = assign_range(group, counts)
    check_complete(group, counts, a)
    for t in {t for s in group.values() for t in s.topics}:
        got = [len(a[m].get(t, ())) for m, s in group.items() if t in s.topics]
        assert max(got) - min(got) <= 1
        for m in a:
            ps = sorted(a[m].get(t, ()))
            assert ps == list(range(ps[0], ps[0] + len(ps))) if ps else True


@settings(max_examples=100, deadline=None)
@given(groups(homogeneous=True), st.sampled_from(sorted(ASSIGNORS)))
def test_member_order_does_not_matter(g: tuple[dict[str, MemberSpec], dict[str, int]], name: str) -> None:
    group, counts = g
    assert ASSIGNORS[name](group, counts) == ASSIGNORS[name](dict(reversed(list(group.items()))), counts)


@settings(max_examples=100, deadline=None)
@given(groups(homogeneous=True))
def test_range_co_partitions_topics_of_equal_size(g: tuple[dict[str, MemberSpec], dict[str, int]]) -> None:
    group, counts = g
    topics = sorted(next(iter(group.values())).topics)
    same = {t: 6 for t in topics}
    a = assign_range(group, {**counts, **same})
    for m in a:
        assert len({a[m].get(t, frozenset()) for t in topics}) == 1


# ---------------------------------------------------------------- cases of Kafka's assignor tests, by name
# (UniformHomogeneousAssignmentBuilderTest, UniformHeterogeneousAssignmentBuilderTest, RangeAssignorTest):
# the behaviour each checks; the exact partitions chosen may differ where Kafka leaves it to map order.

def test_one_member_no_topic_subscription() -> None:
    for assign in (assign_uniform, assign_range):
        assert assign(members(MemberSpec("A", frozenset())), {"t": 3}) == {"A": {}}


def test_one_member_subscribed_to_nonexistent_topic() -> None:
    for assign in (assign_uniform, assign_range):
        with pytest.raises(AssignorError):
            assign(members(MemberSpec("A", frozenset({"missing"}))), {"t": 3})


def test_first_assignment_two_members_two_topics_no_member_racks() -> None:
    group = members(MemberSpec("A", frozenset({"t1", "t3"})), MemberSpec("B", frozenset({"t1", "t3"})))
    a = assign_uniform(group, {"t1": 3, "t3": 2})
    check_complete(group, {"t1": 3, "t3": 2}, a)
    assert sorted(sizes_of(a).values()) == [2, 3]


def test_reassignment_for_two_members_two_topics_given_unbalanced_prev_assignment() -> None:
    prev_a = {"t1": frozenset({0, 1}), "t2": frozenset({0, 1})}
    prev_b = {"t1": frozenset({2})}
    group = members(MemberSpec("A", frozenset({"t1", "t2"}), previous=prev_a),
                    MemberSpec("B", frozenset({"t1", "t2"}), previous=prev_b))
    a = assign_uniform(group, {"t1": 3, "t2": 3})
    check_complete(group, {"t1": 3, "t2": 3}, a)
    assert sizes_of(a) == {"A": 3, "B": 3}
    assert a["B"]["t1"] >= prev_b["t1"]  # B keeps what it had and gets the rest from the free ones
    assert all(a["A"].get(t, frozenset()) <= prev_a.get(t, frozenset()) | {2} for t in ("t1", "t2"))


def test_reassignment_when_partitions_are_added_for_two_members() -> None:
    prev = {"A": {"t": frozenset({0, 2})}, "B": {"t": frozenset({1, 3})}}
    group = members(*(MemberSpec(m, frozenset({"t"}), previous=prev[m]) for m in "AB"))
    a = assign_uniform(group, {"t": 6})
    check_complete(group, {"t": 6}, a)
    assert sizes_of(a) == {"A": 3, "B": 3} and a["A"]["t"] > prev["A"]["t"] and a["B"]["t"] > prev["B"]["t"]


def test_reassignment_when_one_member_removed_after_initial_assignment_with_three_members_two_topics() -> None:
    prev = {"A": {"t1": frozenset({0}), "t2": frozenset({0})}, "B": {"t1": frozenset({1}), "t2": frozenset({1})},
            "C": {"t1": frozenset({2}), "t2": frozenset({2})}}
    group = members(*(MemberSpec(m, frozenset({"t1", "t2"}), previous=prev[m]) for m in "AB"))
    a = assign_uniform(group, {"t1": 3, "t2": 3})
    check_complete(group, {"t1": 3, "t2": 3}, a)
    for m in "AB":  # the survivors keep theirs and share C's
        assert all(a[m][t] >= prev[m][t] for t in ("t1", "t2"))
    assert sizes_of(a) == {"A": 3, "B": 3}


def test_one_static_consumer_and_one_dynamic_consumer_two_topics() -> None:
    """RangeAssignorTest: static members come first, by instance id."""
    group = members(MemberSpec("dyn", frozenset({"t1", "t2"})),
                    MemberSpec("st", frozenset({"t1", "t2"}), instance_id="i-1"))
    a = assign_range(group, {"t1": 3, "t2": 3})
    assert a["st"] == {"t1": frozenset({0, 1}), "t2": frozenset({0, 1})}
    assert a["dyn"] == {"t1": frozenset({2}), "t2": frozenset({2})}
