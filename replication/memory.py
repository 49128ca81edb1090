"""``InMemoryLog``: a ReplicatedLog held in memory (tests, simulation).

By default it is the leader at epoch 1 and commits every append immediately. With
``auto_commit=False`` appends stay pending until the test calls ``commit()`` (or
``fail_pending()``), which lets tests observe "a response leaves only after commit".
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from replication.api import (
    CoordinatorLog,
    LeadershipChange,
    LeadershipListener,
    LogEntry,
    NotLeaderError,
    ReplicationError,
    StaleEpochError,
)


class InMemoryLog:
    def __init__(self, name: str = "p0", *, epoch: int = 1, leader: bool = True, auto_commit: bool = True) -> None:
        self._name = name
        self._epoch = epoch
        self._leader = leader
        self._auto_commit = auto_commit
        self._entries: list[LogEntry] = []
        self._committed = 0
        self._waiters: list[tuple[int, asyncio.Future[int]]] = []
        self._listeners: list[LeadershipListener] = []
        self.ready_to_lead: Callable[[], bool] = lambda: True
        self.busy: Callable[[], bool] = lambda: False

    @property
    def name(self) -> str:
        return self._name

    def is_leader(self) -> bool:
        return self._leader

    def lease_valid(self) -> bool:
        return self.is_leader()  # no peers: nobody else can lead

    def leader_epoch(self) -> int:
        return self._epoch if self._leader else -1

    def committed_offset(self) -> int:
        return self._committed

    def end_offset(self) -> int:
        return len(self._entries)

    async def append(self, payload: bytes, epoch: int) -> int:
        if not self._leader:
            raise NotLeaderError(self._name)
        if epoch != self._epoch:
            raise StaleEpochError(f"{self._name}: epoch {epoch} != {self._epoch}")
        offset = len(self._entries)
        self._entries.append(LogEntry(offset, epoch, bytes(payload)))
        if self._auto_commit:
            self._committed = offset + 1
            return offset
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, fut))
        return await fut

    def commit(self, upto: int | None = None) -> None:
        """Commit pending entries up to ``upto`` (exclusive; default: all)."""
        end = len(self._entries) if upto is None else min(upto, len(self._entries))
        self._committed = max(self._committed, end)
        keep: list[tuple[int, asyncio.Future[int]]] = []
        for off, fut in self._waiters:
            if off < self._committed:
                if not fut.done():
                    fut.set_result(off)
            else:
                keep.append((off, fut))
        self._waiters = keep

    def fail_pending(self, error: ReplicationError | None = None) -> None:
        """Drop uncommitted entries and fail their appends."""
        err = error or ReplicationError("append failed")
        del self._entries[self._committed :]
        for _, fut in self._waiters:
            if not fut.done():
                fut.set_exception(err)
        self._waiters = []

    def read_committed(self, start: int = 0) -> Iterable[LogEntry]:
        return list(self._entries[max(start, 0) : self._committed])

    def read_since(self, start: int) -> tuple[Iterable[LogEntry], int] | None:
        if not 0 <= start <= self._committed:
            return None
        return self.read_committed(start), self._committed

    def refence(self) -> bool:
        return False  # no epochs of its own making: the caller reloads at the same epoch

    def set_ready_to_lead(self, ready: Callable[[], bool]) -> None:
        self.ready_to_lead = ready  # nobody hands leadership over here; kept for tests to call

    def set_busy(self, busy: Callable[[], bool]) -> None:
        self.busy = busy  # nothing balances leadership here; kept for tests to call

    def set_leadership(self, is_leader: bool, epoch: int | None = None) -> None:
        """Change leadership (tests); pending appends fail with NotLeaderError on loss."""
        if epoch is not None:
            self._epoch = epoch
        self._leader = is_leader
        if not is_leader:
            self.fail_pending(NotLeaderError(self._name))
        self._publish()

    def set_epoch(self, epoch: int) -> None:
        self.set_leadership(self._leader, epoch)

    def subscribe(self, listener: LeadershipListener) -> None:
        self._listeners.append(listener)
        listener(LeadershipChange(self._name, self._leader, self._epoch))

    def _publish(self) -> None:
        change = LeadershipChange(self._name, self._leader, self._epoch)
        for listener in list(self._listeners):
            listener(change)


if TYPE_CHECKING:  # mypy checks InMemoryLog against the seam it implements
    _is_coordinator_log: type[CoordinatorLog] = InMemoryLog
