"""A simulated replicated log per ``__consumer_offsets`` partition (Raft's log rules, no Raft RPCs).

Every node keeps its own copy of the partition's entries. The leader appends at its epoch;
a replication message copies the leader's log onto a follower (truncating whatever diverged);
an index is committed once a majority holds it and the entry there is of the leader's epoch
(Raft's rule: earlier epochs commit only underneath one of the current epoch, which is why a
new leader first appends a no-op). Elections (decided by the simulator) pick a node whose log
is at least as up to date as a majority's, so committed entries survive; uncommitted entries
survive only if the winner holds them: an append in flight at a leadership change may
commit or be lost.

The committed prefix is the truth: ``committed`` only grows, and the entries under it never
change (checked on every advance).
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.records import Record

# (node, node incarnation, epoch, runtime context incarnation, runtime end_offset)
Origin = tuple[int, int, int, int, int]


@dataclass(eq=False, slots=True)
class Entry:
    epoch: int
    records: tuple[Record, ...]
    origin: Origin | None  # None: the leader's no-op


class LogInvariantError(AssertionError):
    pass


class PartitionLog:
    def __init__(self, partition: int, nodes: list[int]) -> None:
        self.partition = partition
        self.nodes = nodes
        self.epoch = 0
        self.leader: int | None = None
        self.logs: dict[int, list[Entry]] = {n: [] for n in nodes}
        self.match: dict[int, int] = {n: 0 for n in nodes}
        self.committed = 0
        self._committed_tail: Entry | None = None  # identity of the entry at committed-1

    # ---------------------------------------------------------------- queries

    def committed_entries(self) -> list[Entry]:
        # Any copy whose entry at committed-1 is the committed tail holds the whole prefix.
        for log in self.logs.values():
            if len(log) >= self.committed and (self.committed == 0 or log[self.committed - 1] is self._committed_tail):
                return log[: self.committed]
        raise LogInvariantError(f"p{self.partition}: no replica holds the committed prefix")

    def committed_records(self) -> list[Record]:
        return [r for e in self.committed_entries() for r in e.records]

    def last(self, node: int) -> tuple[int, int]:
        log = self.logs[node]
        return (log[-1].epoch if log else 0, len(log))

    def up_to_date(self, a: int, b: int) -> bool:
        """Raft's election restriction: is ``a``'s log at least as up to date as ``b``'s?"""
        return self.last(a) >= self.last(b)

    def leader_log(self) -> list[Entry]:
        assert self.leader is not None
        return self.logs[self.leader]

    def all_resolved(self) -> bool:
        """Every entry in the leader's log is committed (nothing of it is still in flight)."""
        return self.leader is not None and len(self.logs[self.leader]) == self.committed

    # ---------------------------------------------------------------- changes

    def elect(self, node: int) -> int:
        """``node`` becomes leader at a new epoch and appends its no-op."""
        self.epoch += 1
        self.leader = node
        log = self.logs[node]
        self.match = {n: 0 for n in self.nodes}
        self.match[node] = len(log)
        log.append(Entry(self.epoch, (), None))
        self.match[node] = len(log)
        return self.epoch

    def step_down(self) -> None:
        self.leader = None

    def append(self, node: int, epoch: int, records: tuple[Record, ...], origin: Origin) -> Entry | None:
        """The leader appends locally; ``None`` if ``node`` is not the leader at ``epoch``."""
        if self.leader != node or epoch != self.epoch:
            return None
        entry = Entry(epoch, records, origin)
        self.logs[node].append(entry)
        self.match[node] = len(self.logs[node])
        return entry

    def local_append(self, node: int, epoch: int, records: tuple[Record, ...], origin: Origin) -> None:
        """A deposed leader that does not know it yet writes to its own copy only."""
        self.logs[node].append(Entry(epoch, records, origin))

    def replicate(self, follower: int) -> None:
        """Copy the leader's log onto ``follower`` (AppendEntries with conflict truncation)."""
        assert self.leader is not None
        src = self.logs[self.leader]
        dst = self.logs[follower]
        i = 0
        n = min(len(src), len(dst))
        while i < n and src[i] is dst[i]:
            i += 1
        del dst[i:]
        dst.extend(src[i:])
        self.match[follower] = len(dst)

    def advance_commit(self) -> list[Entry]:
        """Move the commit index as far as a majority allows; returns the newly committed entries."""
        if self.leader is None:
            return []
        log = self.logs[self.leader]
        counts = sorted((self.match[n] for n in self.nodes), reverse=True)
        majority_len = counts[len(self.nodes) // 2]
        n = majority_len
        while n > self.committed and log[n - 1].epoch != self.epoch:
            n -= 1
        if n <= self.committed:
            return []
        if self.committed and log[self.committed - 1] is not self._committed_tail:
            raise LogInvariantError(f"p{self.partition}: the committed prefix changed under leader {self.leader}")
        new = log[self.committed : n]
        self.committed = n
        self._committed_tail = log[n - 1]
        return new
