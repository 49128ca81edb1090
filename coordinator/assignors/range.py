"""Kafka's server-side ``range`` assignor: per topic, contiguous ranges in member order (static
members by instance id, then dynamic ones by member id), the first ``n % subscribers`` members one
partition more; with equal subscriptions and partition counts every member gets the same partition
numbers of every topic (co-partitioning). Not sticky."""

from __future__ import annotations

from collections.abc import Mapping

from .spec import Assignment, MemberSpec, TopicSizes, sizes_of, utf16_key


def member_order(members: Mapping[str, MemberSpec]) -> list[MemberSpec]:
    static = sorted((m for m in members.values() if m.instance_id is not None),
                    key=lambda m: utf16_key(m.instance_id or ""))
    dynamic = sorted((m for m in members.values() if m.instance_id is None), key=lambda m: utf16_key(m.member_id))
    return static + dynamic


def assign_range(members: Mapping[str, MemberSpec], sizes: TopicSizes) -> Assignment:
    counts = sizes_of(members, sizes)
    order = member_order(members)
    subscribers = {t: sum(1 for m in order if t in m.topics) for t in counts}
    extra = {t: counts[t] % subscribers[t] for t in counts}
    start = dict.fromkeys(counts, 0)
    out: Assignment = {m.member_id: {} for m in order}
    for m in order:
        for t in sorted(m.topics):
            take = counts[t] // subscribers[t]
            if extra[t] > 0:
                take += 1
                extra[t] -= 1
            end = min(start[t] + take, counts[t])
            if end > start[t]:
                out[m.member_id][t] = frozenset(range(start[t], end))
            start[t] = end
    return out
