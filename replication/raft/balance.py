"""Preferred-leader balancing of one node's Raft groups, rare and bounded as Kafka's controller
does it (``auto.leader.rebalance.enable``, ``leader.imbalance.check.interval.seconds``,
``leader.imbalance.per.broker.percentage``).

Every group has a preferred node. Once per check interval the node holds a round: from every
group it is a member of it finds the nodes whose share of their preferred groups led elsewhere
exceeds the threshold. In that round each group it leads whose preferred node is one of those
is handed back once, if its owner is not busy and the preferred node has been connected for a
while (``RaftLog.wants_transfer``). Between rounds nothing moves: a coordinator partition that
moves is unloaded here and loaded there, with its groups, so handing leadership back every few
seconds (as before) moved a chaos run's group ten times in a minute.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable
from typing import Protocol

from replication.raft.settings import RaftTimings

log = logging.getLogger("kcoord.raft")


class Member(Protocol):
    def balance_view(self) -> tuple[str, str | None]:
        """(the group's preferred node, the node leading it now or None), as node keys."""
        ...


def imbalanced(views: Iterable[tuple[str, str | None]], percentage: float) -> frozenset[str]:
    """The nodes whose preferred groups are led elsewhere in more than ``percentage`` % of
    cases (Kafka's per-broker imbalance ratio; a group without a known leader counts as led
    elsewhere)."""
    preferred: dict[str, int] = {}
    elsewhere: dict[str, int] = {}
    for node, leader in views:
        preferred[node] = preferred.get(node, 0) + 1
        if leader != node:
            elsewhere[node] = elsewhere.get(node, 0) + 1
    return frozenset(n for n, k in elsewhere.items() if k * 100 > percentage * preferred[n])


class BalanceRounds:
    """The balancing rounds of one node: its groups join, and the first of them to ask after
    the interval has passed starts the next round for all (the ticker asks each in turn)."""

    def __init__(self) -> None:
        self.round = 0  # rounds held so far (0: none yet)
        self.imbalanced: frozenset[str] = frozenset()  # found by the current round
        self._next: float | None = None
        self._members: weakref.WeakSet[Member] = weakref.WeakSet()

    def join(self, member: Member) -> None:
        self._members.add(member)

    def leave(self, member: Member) -> None:
        self._members.discard(member)

    def advance(self, now: float, timings: RaftTimings) -> int:
        """The current round at ``now`` (time.monotonic). The first round comes one interval
        after the node first asked, so a node that just started (or a cluster that just
        formed) is not rebalanced before its elections have settled."""
        if self._next is None:
            self._next = now + timings.leader_imbalance_check_interval
        elif now >= self._next:
            self._next = now + timings.leader_imbalance_check_interval
            self.round += 1
            views = [m.balance_view() for m in list(self._members)]
            self.imbalanced = imbalanced(views, timings.leader_imbalance_per_broker_percentage)
            if self.imbalanced:
                log.info("event=leader_imbalance round=%d nodes=%s", self.round, ",".join(sorted(self.imbalanced)))
        return self.round


_ROUNDS: weakref.WeakKeyDictionary[object, BalanceRounds] = weakref.WeakKeyDictionary()


def rounds_of(host: object) -> BalanceRounds:
    """The rounds shared by every group that ``host`` (a ``RaftHost``) drives."""
    rounds = _ROUNDS.get(host)
    if rounds is None:
        rounds = _ROUNDS[host] = BalanceRounds()
    return rounds
