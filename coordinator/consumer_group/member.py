"""A consumer-protocol member's assignment as the coordinator tracks it (Kafka's
ConsumerGroupMember: epochs, state, assigned and pending-revocation partitions)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum

# topic -> partition -> the assignment epoch at which the member got it (KIP-1251)
Owned = Mapping[str, Mapping[int, int]]
# topic -> partitions
Partitions = Mapping[str, frozenset[int]]


class MemberState(IntEnum):
    """Persisted as one byte; an unknown byte read from the log is UNKNOWN."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def from_byte(cls, b: int) -> MemberState:
        try:
            return cls(b)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Owned = field(default_factory=dict)
    pending_revocation: Owned = field(default_factory=dict)

    def partitions(self) -> dict[str, frozenset[int]]:
        """What the member is told it owns (the Assignment field of a heartbeat response)."""
        return {t: frozenset(ps) for t, ps in self.assigned.items() if ps}
