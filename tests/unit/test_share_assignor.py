"""The simple share group assignor, as properties (Kafka's SimpleAssignorTest asserts these on
examples): members get only assignable partitions of topics they subscribe to; within each pool
(all partitions when subscriptions agree, else each topic among its subscribers) every partition
is held by 1..ceil(members/partitions) members and holdings differ by at most one per member; an
assignment computed again from itself does not move."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.share_group.assignor import assign

TOPICS = ["t0", "t1", "t2"]


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[str, frozenset[str]], dict[str, frozenset[int]], bool]:
    n = draw(st.integers(1, 9))
    homogeneous = draw(st.booleans())
    if homogeneous:
        subs = draw(st.frozensets(st.sampled_from(TOPICS), min_size=1))
        subscriptions = {f"m{i}": subs for i in range(n)}
    else:
        subscriptions = {f"m{i}": draw(st.frozensets(st.sampled_from(TOPICS), min_size=1)) for i in range(n)}
    assignable = {t: draw(st.frozensets(st.integers(0, 7))) for t in TOPICS}
    return subscriptions, assignable, len(set(subscriptions.values())) == 1


def _pools(subs: dict[str, frozenset[str]], assignable: dict[str, frozenset[int]],
           homogeneous: bool) -> list[tuple[list[str], set[tuple[str, int]]]]:
    if homogeneous:
        topics = next(iter(subs.values()))
        return [(sorted(subs), {(t, p) for t in topics for p in assignable[t]})]
    return [([m for m in sorted(subs) if t in subs[m]], {(t, p) for p in assignable[t]}) for t in TOPICS]


@settings(max_examples=300, deadline=None)
@given(groups())
def test_simple_assignor_balances_shares_and_sticks(group: tuple[dict[str, frozenset[str]], dict[str, frozenset[int]],
                                                                 bool]) -> None:
    subs, assignable, homogeneous = group
    out = assign(subs, assignable, {})
    for m, parts in out.items():
        for t, ps in parts.items():
            assert t in subs[m] and ps <= assignable[t]
    for members, pool in _pools(subs, assignable, homogeneous):
        if not members or not pool:
            continue
        sharing = -(-len(members) // len(pool))
        held = {tp: sum(tp[1] in out[m].get(tp[0], frozenset()) for m in members) for tp in pool}
        assert all(1 <= n <= sharing for n in held.values()), (held, sharing)
        counts = [sum(1 for tp in pool if tp[1] in out[m].get(tp[0], frozenset())) for m in members]
        assert max(counts) - min(counts) <= 1, counts
    assert assign(subs, assignable, out) == out


def test_a_member_joining_moves_only_what_balance_needs() -> None:
    """Stickiness: a second member takes half, the first keeps the rest of what it held."""
    one = assign({"a": frozenset({"t"})}, {"t": frozenset(range(6))}, {})
    assert one == {"a": {"t": frozenset(range(6))}}
    two = assign({"a": frozenset({"t"}), "b": frozenset({"t"})}, {"t": frozenset(range(6))}, one)
    assert two["a"]["t"] <= one["a"]["t"] and len(two["a"]["t"]) == 3
    assert two["a"]["t"] | two["b"]["t"] == frozenset(range(6))


def test_a_member_subscribed_to_two_topics_gets_its_share_of_each() -> None:
    """Kafka's heterogeneous example: M1 on T1, M2 on T2, M3 on both: M3 gets half of each."""
    out = assign({"m1": frozenset({"t1"}), "m2": frozenset({"t2"}), "m3": frozenset({"t1", "t2"})},
                 {"t1": frozenset(range(4)), "t2": frozenset(range(4))}, {})
    assert len(out["m3"]["t1"]) == 2 and len(out["m3"]["t2"]) == 2
    assert out["m1"]["t1"] | out["m3"]["t1"] == frozenset(range(4))
