"""The replication seam: partitions of opaque bytes, never groups.

Everything above this module (the coordinator driver, the data plane) talks to a
``ReplicatedLog`` per partition. Implementations: ``memory.InMemoryLog`` (tests,
simulation), ``local.LocalLog`` (one node, file-backed) and ``raft.RaftLog`` (pysyncobj).
Each further ability a caller uses is declared here as a protocol, so that the callers are
type-checked against the seam rather than a concrete log: ``CoordinatorLog`` (what the group
coordinator driver needs: pre-replay, re-fencing, readiness to lead) and ``PeerLog`` (a log
replicated between nodes: who leads, who is connected, appends from any node).

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


class EntryTooLargeError(ReplicationError):
    """The entry is over the log's limit: trying again cannot help."""


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


class CoordinatorLog(ReplicatedLog, Protocol):
    """A ``__consumer_offsets`` partition's log, as the coordinator driver uses it."""

    def read_since(self, start: int) -> tuple[Iterable[LogEntry], int] | None:
        """``(committed entries from start, next offset)``, for keeping a follower's image
        current; None when that range is no longer held (read again from 0) or the log keeps
        no entries to read this way."""
        ...

    def refence(self) -> bool:
        """After a failed append: start a new epoch of this node's leadership, fencing whatever
        the failed append left in flight (its LeadershipChange then reloads the shard). False
        when the log has no such notion (the caller reloads at the same epoch)."""
        ...

    def set_ready_to_lead(self, ready: Callable[[], bool]) -> None:
        """Take leadership over by transfer only while ``ready()`` (called by the Raft driver)."""
        ...

    def set_busy(self, busy: Callable[[], bool]) -> None:
        """Never hand leadership over (to balance it) while ``busy()`` (called by the Raft driver)."""
        ...


class PeerLog(ReplicatedLog, Protocol):
    """A log replicated between nodes (Raft): its leadership and its links, as the cluster's
    metadata and routing use them."""

    async def submit(self, payload: bytes) -> int:
        """Append from any node, without fencing (idempotent operations); resolves with the
        entry's offset once committed."""
        ...

    def leader_address(self) -> str | None:
        """The leader's address in this log's group, as this node last heard (None: unknown)."""
        ...

    def connected_peers(self) -> set[str]:
        """Addresses of the peers this node's member of the group is connected to."""
        ...

    def leader_heard_lately(self) -> bool:
        """A follower heard its leader within the longest election timeout."""
        ...

    def likely_leader(self) -> str | None:
        """Who leads, or most likely leads on the majority side of a partition (None: a group of
        one node, which does not lead it now)."""
        ...
