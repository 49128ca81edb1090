"""The group's target assignment (Kafka's TargetAssignmentBuilder): which assignor, and the new
targets it computes from every member's subscription and current target.

The preferred assignor is the one most members ask for (``ServerAssignor``), ties to the name
that sorts first (Kafka leaves ties to hash-map order), else the first configured one. Only the
members whose target changed get a record; the group's assignment epoch moves to the group epoch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from coordinator.assignors import ASSIGNORS, MemberSpec, TopicSizes

from .member import Partitions


@dataclass(frozen=True, slots=True)
class Subscriber:
    member_id: str
    topics: frozenset[str]  # subscribed names (and the topics a resolved regex reached)
    instance_id: str | None = None
    server_assignor: str | None = None


def preferred_assignor(members: Mapping[str, Subscriber], configured: Sequence[str]) -> str:
    votes = Counter(m.server_assignor for m in members.values() if m.server_assignor)
    if votes:
        return min(votes, key=lambda name: (-votes[name], name))
    return configured[0]


@dataclass(frozen=True, slots=True)
class NewTarget:
    epoch: int
    changed: Mapping[str, Partitions]  # members whose target changed: a TargetAssignmentMember record each
    targets: Mapping[str, Partitions]  # every member's target


def compute_target(group_epoch: int, members: Mapping[str, Subscriber], current: Mapping[str, Partitions],
                   sizes: TopicSizes, configured: Sequence[str]) -> NewTarget:
    """New targets for ``members`` at ``group_epoch``; subscribed topics that do not exist are left
    out (Kafka resolves names through the metadata image and drops unknown ones). Raises
    AssignorError as the assignor does (the heartbeat then fails with UNKNOWN_SERVER_ERROR)."""
    assign = ASSIGNORS[preferred_assignor(members, configured)]
    specs = {m: MemberSpec(m, frozenset(t for t in s.topics if sizes.get(t, -1) >= 0), s.instance_id,
                           current.get(m, {}))
             for m, s in members.items()}
    new = assign(specs, sizes)
    targets = {m: {t: ps for t, ps in new.get(m, {}).items() if ps} for m in members}
    changed = {m: t for m, t in targets.items() if dict(current.get(m, {})) != t}
    return NewTarget(group_epoch, changed, targets)
