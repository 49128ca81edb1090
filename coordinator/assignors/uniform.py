"""Kafka's server-side ``uniform`` assignor: balanced first, then sticky.

Every member subscribing to the same topics (homogeneous): member sizes differ by at most one,
and a member keeps as much of its previous target as its quota allows (Kafka's
UniformHomogeneousAssignmentBuilder, members in id order, a kept topic's lowest partitions kept).

Different subscriptions (heterogeneous): each member keeps what it had of the topics it still
subscribes to; free partitions go, topic by topic (most partitions per subscriber first), to the
least loaded subscriber; then, per topic, a partition moves from its most loaded holder to the
least loaded subscriber while they differ by two or more. Every move lowers the sum of squared
sizes, so this ends, and at the end no subscriber of a topic holds a partition of it while
another subscriber has two fewer. Kafka's heterogeneous builder follows the same plan with other
tie-breaks, so the exact maps may differ; the guarantees are the same.
"""

from __future__ import annotations

from collections.abc import Mapping

from .spec import Assignment, AssignorError, MemberSpec, TopicSizes, sizes_of, utf16_key

Partition = tuple[str, int]


def assign_uniform(members: Mapping[str, MemberSpec], sizes: TopicSizes) -> Assignment:
    counts = sizes_of(members, sizes)
    order = sorted(members.values(), key=lambda m: utf16_key(m.member_id))
    if not order:
        return {}
    if len({m.topics for m in order}) == 1:
        return _homogeneous(order, counts)
    return _heterogeneous(order, counts)


def _kept(m: MemberSpec, counts: Mapping[str, int], taken: set[Partition]) -> list[Partition]:
    """What ``m`` may keep of its previous target: still subscribed, still existing, not claimed by
    a member before it (previous targets never overlap, but a bad one must not duplicate)."""
    out = []
    for t in sorted(m.previous):
        if t in m.topics:
            out += [(t, p) for p in sorted(m.previous[t]) if p < counts[t] and (t, p) not in taken]
    return out


def _homogeneous(order: list[MemberSpec], counts: Mapping[str, int]) -> Assignment:
    topics = sorted(order[0].topics)
    total = sum(counts[t] for t in topics)
    n = len(order)
    base, extra = divmod(total, n)
    taken: set[Partition] = set()
    held: dict[str, list[Partition]] = {}
    unfilled: list[tuple[str, int]] = []
    for i, m in enumerate(order):
        quota = base + (1 if extra > 0 else 0)
        has_extra = extra > 0
        keep = _kept(m, counts, taken)[:quota]
        taken.update(keep)
        quota -= len(keep)
        if quota > 0 and has_extra and n - i > extra:
            quota -= 1  # leave the extra partition to a later member, which may keep one it has
            has_extra = False
        if quota > 0:
            unfilled.append((m.member_id, quota))
        if has_extra:
            extra -= 1
        held[m.member_id] = keep
    free = [(t, p) for t in topics for p in range(counts[t]) if (t, p) not in taken]
    i = 0
    for member_id, quota in unfilled:
        held[member_id] += free[i:i + quota]
        i += quota
    if i != len(free):
        raise AssignorError(f"{len(free) - i} partition(s) left unassigned")
    return {m.member_id: _by_topic(held[m.member_id]) for m in order}


def _heterogeneous(order: list[MemberSpec], counts: Mapping[str, int]) -> Assignment:
    ids = [m.member_id for m in order]
    rank = {m: i for i, m in enumerate(ids)}
    subscribers = {t: [m.member_id for m in order if t in m.topics] for t in counts}
    owner: dict[Partition, str] = {}
    size = dict.fromkeys(ids, 0)
    for spec in order:
        for tp in _kept(spec, counts, set(owner)):
            owner[tp] = spec.member_id
            size[spec.member_id] += 1

    def topic_key(t: str) -> tuple[float, int, bytes]:
        return (-counts[t] / len(subscribers[t]), len(subscribers[t]), utf16_key(t))

    topics = sorted((t for t in counts if subscribers[t]), key=topic_key)
    for t in topics:
        for p in range(counts[t]):
            if (t, p) not in owner:
                least = min(subscribers[t], key=lambda x: (size[x], rank[x]))
                owner[(t, p)] = least
                size[least] += 1
    moved = True
    while moved:
        moved = False
        for t in topics:
            subs = subscribers[t]
            if len(subs) < 2 or counts[t] == 0:
                continue
            while True:
                holders = {owner[(t, p)] for p in range(counts[t])}
                hi = max(holders, key=lambda x: (size[x], -rank[x]))
                lo = min(subs, key=lambda x: (size[x], rank[x]))
                if size[hi] - size[lo] <= 1:
                    break
                p = max(q for q in range(counts[t]) if owner[(t, q)] == hi)
                owner[(t, p)] = lo
                size[hi] -= 1
                size[lo] += 1
                moved = True
    held: dict[str, list[Partition]] = {m: [] for m in ids}
    for tp, member_id in sorted(owner.items()):
        held[member_id].append(tp)
    return {m: _by_topic(held[m]) for m in ids}


def _by_topic(parts: list[Partition]) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for t, p in parts:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}
