"""The state machine protocol of a Raft group, and ``EntryStore``: a partition whose state is its
entries (the ``__consumer_offsets`` and metadata logs), compacted by an injected function."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

import msgpack

from replication.api import (
    LogEntry,
)


class StateMachine(Protocol):
    """What a partition's replicated state looks like to this module (bytes in, int out)."""

    def apply(self, epoch: int, payload: bytes) -> int: ...

    def snapshot(self) -> bytes: ...

    def restore(self, data: bytes) -> None: ...


class EntryStore:
    """A partition whose state is its entries, compacted by an injected function.

    ``compact(payloads) -> payloads`` must keep the meaning of replaying them in order
    (the coordinator keeps the latest record per key). Offsets keep counting across
    compactions; the compacted prefix is served with offset -1.
    """

    def __init__(self, compact: Callable[[list[bytes]], list[bytes]] | None = None,
                 compact_every: int = 20_000, compact_bytes: int = 16 * 1024 * 1024) -> None:
        self._compact = compact
        self._compact_every = compact_every
        self._compact_bytes = compact_bytes
        self._tail_bytes = 0
        self.lock = threading.Lock()
        self.base: list[bytes] = []
        self.tail: list[tuple[int, int, bytes]] = []
        self.next_offset = 0
        self.on_change: Callable[[], None] | None = None  # after each apply or restore (Raft's thread)

    def apply(self, epoch: int, payload: bytes) -> int:
        with self.lock:
            offset = self.next_offset
            self.tail.append((offset, epoch, payload))
            self.next_offset += 1
            self._tail_bytes += len(payload)
            if self._compact is not None and (len(self.tail) >= self._compact_every
                                              or self._tail_bytes >= self._compact_bytes):
                self.base = self._compact(self.base + [p for _, _, p in self.tail])
                self.tail = []
                self._tail_bytes = 0
        if self.on_change is not None:
            self.on_change()
        return offset

    def entries(self, start: int = 0) -> list[LogEntry]:
        with self.lock:
            return self._listed(start)

    def _listed(self, start: int) -> list[LogEntry]:
        """Under the lock: the base (from 0 only, offset -1) and the tail entries from ``start``."""
        out = [LogEntry(-1, 0, p) for p in self.base] if start <= 0 else []
        out.extend(LogEntry(o, e, p) for o, e, p in self.tail if o >= start)
        return out

    def entries_since(self, start: int) -> tuple[list[LogEntry], int] | None:
        """``(entries at offsets >= start, next offset)``; from 0 that includes the compacted
        base. None when entries past ``start`` now live only in the base (a compaction or a
        snapshot install moved past it): then read again from 0."""
        with self.lock:
            first = self.tail[0][0] if self.tail else self.next_offset
            if start > 0 and not first <= start <= self.next_offset:
                return None
            return self._listed(start), self.next_offset

    def snapshot(self) -> bytes:
        with self.lock:
            base = self._compact(self.base + [p for _, _, p in self.tail]) if self._compact else (
                self.base + [p for _, _, p in self.tail])
            return bytes(msgpack.packb({"base": base, "next": self.next_offset}, use_bin_type=True))

    def restore(self, data: bytes) -> None:
        state = msgpack.unpackb(data, raw=False)
        with self.lock:
            self.base = list(state["base"])
            self.tail = []
            self._tail_bytes = 0
            self.next_offset = int(state["next"])
        if self.on_change is not None:
            self.on_change()


