"""The replication seam: partitions of opaque bytes, never groups.

Everything above this module (the coordinator driver, the data plane) talks to a
``ReplicatedLog`` per partition. Implementations: ``memory.InMemoryLog`` (tests,
simulation), ``local.LocalLog`` (one node, file-backed), and later a pysyncobj log.

Offsets are entry indexes: the first entry of a log has offset 0, and
``append`` resolves with the offset the entry got once a majority holds it
("committed"). Every append carries the epoch of the leadership the caller
believes in; a log whose current epoch differs rejects it with ``StaleEpochError``
so a deposed leader can never add to the log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

MAX_ENTRY_BYTES = 8 * 1024 * 1024  # the largest payload one replicated entry may carry


class ReplicationError(Exception):
    """An append did not commit. Callers treat it as retriable and reload."""


class NotLeaderError(ReplicationError):
    """This node does not lead the partition (any more)."""


class StaleEpochError(ReplicationError):
    """The append carried an epoch that is not the log's current leader epoch."""


@dataclass(frozen=True, slots=True)
class LogEntry:
    offset: int
    epoch: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class LeadershipChange:
    """Published when this node gains or loses leadership of a partition."""

    partition: str
    is_leader: bool
    epoch: int


LeadershipListener = Callable[[LeadershipChange], None]


class ReplicatedLog(Protocol):
    """One replicated, totally ordered log of byte entries."""

    @property
    def name(self) -> str: ...

    def is_leader(self) -> bool: ...

    def lease_valid(self) -> bool:
        """Leads, and no other node can have been elected meanwhile: reads of this node's
        state are current (always so for a log without peers)."""
        ...

    def leader_epoch(self) -> int:
        """Epoch of the current leadership as this node sees it (-1 if none)."""
        ...

    def committed_offset(self) -> int:
        """Offset one past the last committed entry."""
        ...

    async def append(self, payload: bytes, epoch: int) -> int:
        """Append one entry at ``epoch``; resolves with its offset once committed.

        Raises ``NotLeaderError``/``StaleEpochError``/``ReplicationError``.
        """
        ...

    def read_committed(self, start: int = 0) -> Iterable[LogEntry]:
        """Committed entries from ``start`` (used to load a partition)."""
        ...

    def subscribe(self, listener: LeadershipListener) -> None:
        """Call ``listener`` on every leadership change of this log."""
        ...
