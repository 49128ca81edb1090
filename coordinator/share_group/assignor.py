"""The ``simple`` share group assignor (Kafka's SimpleAssignor): balance first, then stickiness;
racks are ignored. A partition may go to several members: when members outnumber the assignable
partitions, each partition is shared by up to ceil(members / partitions) of them.

When every member subscribes to the same topics, all their partitions form one pool; otherwise
each topic is shared among its own subscribers and the results are combined (a member of two
topics gets its share of each), as Kafka's heterogeneous builder does. Written our own way:
deterministic (members and partitions in sorted order) where Kafka follows hash-map order.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

Partitions = Mapping[str, frozenset[int]]
TopicPartition = tuple[str, int]

NAME = "simple"


def assign(subscriptions: Mapping[str, frozenset[str]], assignable: Mapping[str, frozenset[int]],
           current: Mapping[str, Partitions]) -> dict[str, dict[str, frozenset[int]]]:
    """Each member's target: ``subscriptions`` member -> topic ids, ``assignable`` topic id ->
    partitions whose share state is initialized, ``current`` the members' present targets."""
    members = sorted(subscriptions)
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    if not members:
        return {}
    topic_sets = {subscriptions[m] for m in members}
    if len(topic_sets) == 1:
        pools = [(members, _pool(next(iter(topic_sets)), assignable))]
    else:
        topics = sorted(set().union(*topic_sets))
        pools = [([m for m in members if t in subscriptions[m]], _pool(frozenset({t}), assignable)) for t in topics]
    for who, pool in pools:
        for m, tps in _share(who, pool, current).items():
            owned[m] |= tps
    out: dict[str, dict[str, frozenset[int]]] = {}
    for m in members:
        by_topic: dict[str, set[int]] = {}
        for t, p in owned[m]:
            by_topic.setdefault(t, set()).add(p)
        out[m] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out


def _pool(topics: frozenset[str], assignable: Mapping[str, frozenset[int]]) -> list[TopicPartition]:
    return [(t, p) for t in sorted(topics) for p in sorted(assignable.get(t, ()))]


def _share(members: Sequence[str], pool: Sequence[TopicPartition],
           current: Mapping[str, Partitions]) -> dict[str, set[TopicPartition]]:
    """Spread ``pool`` over ``members``: every partition held by 1..sharing members, every member
    holding its quota (the quotas differ by at most one), keeping what members hold where it fits."""
    out: dict[str, set[TopicPartition]] = {m: set() for m in members}
    if not members or not pool:
        return out
    in_pool = set(pool)
    sharing = -(-len(members) // len(pool))
    slots = sharing * len(pool)
    kept = {m: sorted(tp for tp in ((t, p) for t, ps in current.get(m, {}).items() for p in ps) if tp in in_pool)
            for m in members}
    # the members holding the most keep the larger quotas (stickiness)
    order = sorted(members, key=lambda m: (-len(kept[m]), m))
    quota = {m: slots // len(members) + (1 if i < slots % len(members) else 0) for i, m in enumerate(order)}
    holders: dict[TopicPartition, int] = dict.fromkeys(pool, 0)
    for m in order:
        for tp in kept[m]:
            if len(out[m]) < quota[m] and holders[tp] < sharing:
                out[m].add(tp)
                holders[tp] += 1
    # the rest go, least-held first, to the members below their quota
    free = [(holders[tp], i, tp) for i, tp in enumerate(pool) if holders[tp] < sharing]
    heapq.heapify(free)
    for m in members:
        skipped = []
        while len(out[m]) < quota[m] and free:
            n, i, tp = heapq.heappop(free)
            if tp in out[m]:
                skipped.append((n, i, tp))
                continue
            out[m].add(tp)
            if n + 1 < sharing:
                heapq.heappush(free, (n + 1, i, tp))
        for entry in skipped:
            heapq.heappush(free, entry)
    return out
