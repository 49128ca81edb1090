"""Reconciliation: how a member moves from what it owns to its target assignment, one heartbeat at
a time (Kafka's CurrentAssignmentBuilder).

Revocation comes first and at the member's current epoch: partitions leaving the member are put in
``pending_revocation`` (state UNREVOKED_PARTITIONS) until a heartbeat no longer lists them as owned.
Only then does the member move to the target epoch, and it is given only partitions no other member
still holds (their partition epoch is -1); the rest follow on later heartbeats (state
UNRELEASED_PARTITIONS) as their previous owners let go. So a partition is never owned by two
members at once. A heartbeat whose owned partitions are unknown (null) counts as owning everything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from .member import MemberAssignment, MemberState, Owned, Partitions

S = MemberState


class FencedMemberEpoch(Exception):
    """The member's state is unknown and it still reports partitions: it must rejoin."""


@dataclass(frozen=True, slots=True)
class Target:
    epoch: int  # the assignment epoch
    partitions: Partitions  # this member's target assignment
    subscribed: frozenset[str]  # the topics the member subscribes to (names and resolved regex)
    # the epoch of the member currently holding a partition (assigned or pending revocation), -1 if free
    partition_epoch: Callable[[str, int], int]


def reconcile(member: MemberAssignment, target: Target, owned: Partitions | None,
              subscription_changed: bool = False) -> MemberAssignment:
    """The member after this heartbeat (``owned``: the partitions it reports, None if not sent)."""
    if member.state is S.STABLE:
        if member.epoch != target.epoch:
            return _next(member, member.epoch, target, owned)
        if subscription_changed:
            return _drop_unsubscribed(member, target, owned)
        return member
    if member.state is S.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return _drop_unsubscribed(member, target, owned) if subscription_changed else member
        return _next(member, member.epoch, target, owned)
    if member.state is S.UNRELEASED_PARTITIONS:
        return _next(member, member.epoch, target, owned)
    if owned is None or any(owned.values()):
        raise FencedMemberEpoch("the member's state is unknown")
    return _next(member, target.epoch, target, owned)


def _owns_any(owned: Partitions | None, parts: Owned) -> bool:
    if owned is None:
        return True
    return any(p in parts.get(t, {}) for t, ps in owned.items() for p in ps)


def _next(member: MemberAssignment, epoch: int, target: Target, owned: Partitions | None) -> MemberAssignment:
    keep: dict[str, dict[int, int]] = {}
    revoke: dict[str, dict[int, int]] = {}
    want: dict[str, set[int]] = {}
    unreleased = False
    for t in set(target.partitions) | set(member.assigned):
        wanted = target.partitions.get(t, frozenset()) if t in target.subscribed else frozenset()
        current = member.assigned.get(t, {})
        kept = {p: e for p, e in current.items() if p in wanted}
        gone = {p: e for p, e in current.items() if p not in wanted}
        if kept:
            keep[t] = kept
        if gone:
            revoke[t] = gone
        pending = member.pending_revocation.get(t, {})
        for p in wanted - kept.keys():
            if target.partition_epoch(t, p) != -1 and p not in pending:
                unreleased = True  # still held by another member: later
            else:
                want.setdefault(t, set()).add(p)
    if revoke and _owns_any(owned, revoke):
        return MemberAssignment(epoch, member.epoch, S.UNREVOKED_PARTITIONS, keep, revoke)
    for t, ps in want.items():
        keep.setdefault(t, {}).update(dict.fromkeys(ps, target.epoch))
    state = S.UNRELEASED_PARTITIONS if unreleased else S.STABLE
    if (member.epoch, member.state, member.assigned, member.pending_revocation) == (target.epoch, state, keep, {}):
        return member  # nothing moved (still waiting for a release): nothing to write
    return MemberAssignment(target.epoch, member.epoch, state, keep, {})


def _drop_unsubscribed(member: MemberAssignment, target: Target, owned: Partitions | None) -> MemberAssignment:
    """The subscription changed at the same epoch: topics no longer subscribed go to revocation."""
    moved = {t: ps for t, ps in member.assigned.items() if t not in target.subscribed}
    if not moved:
        return member
    assigned = {t: ps for t, ps in member.assigned.items() if t not in moved}
    pending = {t: dict(ps) for t, ps in member.pending_revocation.items()}
    for t, ps in moved.items():
        pending.setdefault(t, {}).update(ps)
    if _owns_any(owned, pending):
        return MemberAssignment(member.epoch, member.epoch, S.UNREVOKED_PARTITIONS, assigned, pending)
    return replace(member, previous_epoch=member.epoch, assigned=assigned)
