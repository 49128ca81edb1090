"""Reconciliation of consumer-protocol members (coordinator/consumer_group/reconcile.py): Kafka's
worked example (GroupMetadataManagerTest.testReconciliationProcess) step by step, and the
CurrentAssignmentBuilder cases."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.consumer_group.member import MemberAssignment, MemberState, Partitions
from coordinator.consumer_group.reconcile import FencedMemberEpoch, Target, reconcile

S = MemberState
SUBS = frozenset({"foo", "bar"})


def parts(**topics: set[int]) -> dict[str, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in topics.items()}


def at(epoch: int, **topics: set[int]) -> dict[str, dict[int, int]]:
    return {t: dict.fromkeys(ps, epoch) for t, ps in topics.items()}


class Group:
    """Members and the ownership map derived from them (Kafka's currentPartitionEpoch)."""

    def __init__(self, members: dict[str, MemberAssignment], targets: dict[str, Partitions], epoch: int) -> None:
        self.members, self.targets, self.epoch = members, targets, epoch

    def partition_epoch(self, topic: str, p: int) -> int:
        for m in self.members.values():
            if p in m.assigned.get(topic, {}) or p in m.pending_revocation.get(topic, {}):
                return m.epoch
        return -1

    def heartbeat(self, name: str, owned: Partitions | None) -> MemberAssignment:
        target = Target(self.epoch, self.targets[name], SUBS, self.partition_epoch)
        self.members[name] = reconcile(self.members[name], target, owned)
        return self.members[name]


def test_kafkas_worked_example_reconciles_three_members_without_double_ownership() -> None:
    g = Group({"A": MemberAssignment(10, 9, S.STABLE, at(10, foo={0, 1, 2}, bar={0, 1})),
               "B": MemberAssignment(10, 9, S.STABLE, at(10, foo={3, 4, 5}, bar={2})),
               "C": MemberAssignment()},
              {"A": parts(foo={0, 1}, bar={0}), "B": parts(foo={2, 3}, bar={2}), "C": parts(foo={4, 5}, bar={1})}, 11)
    c = g.heartbeat("C", parts())
    assert (c.state, c.epoch, c.partitions()) == (S.UNRELEASED_PARTITIONS, 11, {})
    a = g.heartbeat("A", parts(foo={0, 1, 2}, bar={0, 1}))
    assert (a.state, a.epoch, a.partitions(), a.pending_revocation) == (
        S.UNREVOKED_PARTITIONS, 10, parts(foo={0, 1}, bar={0}), at(10, foo={2}, bar={1}))
    b = g.heartbeat("B", parts(foo={3, 4, 5}, bar={2}))
    assert (b.state, b.epoch, b.partitions(), b.pending_revocation) == (
        S.UNREVOKED_PARTITIONS, 10, parts(foo={3}, bar={2}), at(10, foo={4, 5}))
    assert g.heartbeat("C", parts()) == c  # unchanged
    a = g.heartbeat("A", parts(foo={0, 1}, bar={0}))  # A gave foo-2 and bar-1 back
    assert (a.state, a.epoch, a.previous_epoch, a.assigned) == (S.STABLE, 11, 10, at(10, foo={0, 1}, bar={0}))
    c = g.heartbeat("C", parts())
    assert (c.state, c.epoch, c.assigned) == (S.UNRELEASED_PARTITIONS, 11, at(11, bar={1}))
    b = g.heartbeat("B", parts(foo={3}, bar={2}))
    assert (b.state, b.epoch) == (S.STABLE, 11)
    assert b.assigned == {"foo": {2: 11, 3: 10}, "bar": {2: 10}}  # new partitions at the new epoch
    c = g.heartbeat("C", parts(bar={1}))
    assert (c.state, c.epoch, c.partitions()) == (S.STABLE, 11, parts(foo={4, 5}, bar={1}))


def test_a_stable_member_at_the_target_epoch_is_left_alone() -> None:
    m = MemberAssignment(5, 4, S.STABLE, at(5, foo={0}))
    assert reconcile(m, Target(5, parts(foo={0, 1}), SUBS, lambda t, p: -1), parts(foo={0})) is m


def test_unknown_owned_partitions_count_as_owned() -> None:
    m = MemberAssignment(5, 4, S.STABLE, at(5, foo={0, 1}))
    out = reconcile(m, Target(6, parts(foo={0}), SUBS, lambda t, p: -1), None)
    assert (out.state, out.epoch, out.pending_revocation) == (S.UNREVOKED_PARTITIONS, 5, at(5, foo={1}))


def test_a_partition_the_member_already_gave_up_is_not_waited_for() -> None:
    m = MemberAssignment(5, 4, S.STABLE, at(5, foo={0, 1}))
    out = reconcile(m, Target(6, parts(foo={0}), SUBS, lambda t, p: -1), parts(foo={0}))
    assert (out.state, out.epoch, out.assigned, out.pending_revocation) == (S.STABLE, 6, at(5, foo={0}), {})


def test_a_revoked_partition_that_comes_back_to_its_member_is_not_unreleased() -> None:
    m = MemberAssignment(5, 4, S.UNREVOKED_PARTITIONS, at(5, foo={0}), at(5, foo={1}))
    held_by_itself = {("foo", 0): 5, ("foo", 1): 5}
    target = Target(6, parts(foo={0, 1}), SUBS, lambda t, p: held_by_itself.get((t, p), -1))
    out = reconcile(m, target, parts(foo={0}))
    assert (out.state, out.epoch, out.partitions()) == (S.STABLE, 6, parts(foo={0, 1}))


def test_unsubscribing_a_topic_at_the_same_epoch_revokes_it() -> None:
    m = MemberAssignment(5, 4, S.STABLE, at(5, foo={0}, bar={1}))
    target = Target(5, parts(foo={0}, bar={1}), frozenset({"foo"}), lambda t, p: 5)
    out = reconcile(m, target, parts(foo={0}, bar={1}), subscription_changed=True)
    assert (out.state, out.epoch, out.assigned, out.pending_revocation) == (
        S.UNREVOKED_PARTITIONS, 5, at(5, foo={0}), at(5, bar={1}))
    done = reconcile(out, target, parts(foo={0}))  # bar-1 given back: on to the target (foo-0 only)
    assert (done.state, done.partitions(), done.pending_revocation) == (S.STABLE, parts(foo={0}), {})


def test_an_unknown_state_fences_a_member_that_still_owns_something() -> None:
    m = MemberAssignment(5, 4, S.from_byte(9), at(5, foo={0}))
    assert m.state is S.UNKNOWN
    target = Target(6, parts(foo={0}), SUBS, lambda t, p: -1)
    for owned in (None, parts(foo={0})):
        with pytest.raises(FencedMemberEpoch):
            reconcile(m, target, owned)
    out = reconcile(m, target, parts())
    assert (out.state, out.epoch, out.partitions()) == (S.STABLE, 6, parts(foo={0}))


@given(st.data())
@settings(max_examples=300, deadline=None)
def test_random_heartbeats_never_give_a_partition_to_two_members_and_converge(data: st.DataObject) -> None:
    """Members heartbeat in any order, each reporting what it was last told it owns; at every step
    no partition is held (assigned or pending revocation) by two members, and round-robin
    heartbeats then bring every member to its target at the target epoch."""
    names = ["A", "B", "C"]
    n = data.draw(st.integers(1, 8))

    def split() -> dict[str, set[int]]:
        owner = data.draw(st.lists(st.sampled_from([None, *names]), min_size=n, max_size=n))
        return {m: {p for p, o in enumerate(owner) if o == m} for m in names}

    before, after = split(), split()
    members = {m: MemberAssignment(4, 3, S.STABLE, at(4, foo=before[m])) for m in names}
    g = Group(members, {m: parts(foo=after[m]) for m in names}, 5)
    told = {m: members[m].partitions() for m in names}

    def step(m: str) -> None:
        out = g.heartbeat(m, told[m])
        told[m] = out.partitions()
        held = [(p, x) for x, mm in g.members.items()
                for p in {**mm.assigned.get("foo", {}), **mm.pending_revocation.get("foo", {})}]
        assert len({p for p, _ in held}) == len(held), held

    for m in data.draw(st.lists(st.sampled_from(names), max_size=20)):
        step(m)
    for _ in range(4):
        for m in names:
            step(m)
    for m in names:
        got = g.members[m]
        assert (got.state, got.epoch, got.partitions()) == (S.STABLE, 5, parts(foo=after[m]) if after[m] else {})
