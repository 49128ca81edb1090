"""The state machine protocol of a Raft group, and ``EntryStore``: a partition whose state is its
entries (the ``__consumer_offsets`` and metadata logs), compacted by an injected function."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

import msgpack

from replication.api import (
    LogEntry,
)

log = logging.getLogger("kcoord.raft")


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
                 compact_every: int = 20_000, compact_bytes: int = 16 * 1024 * 1024,
                 background: bool = False) -> None:
        self._compact = compact
        self._compact_every = compact_every
        self._compact_bytes = compact_bytes
        # Compact on a thread of its own, and snapshot without compacting: compacting a large
        # partition (a million offsets: seconds of decoding and encoding) in the Raft pass stopped
        # the node's event loop that long, and its peers took it for dead.
        self._background = background
        self._compacting = False
        self._compact_failed = False
        self._tail_bytes = 0
        self._base_bytes = 0
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
            # ...and not before the tail is half the base's size: each compaction reads the whole
            # base, so a fixed trigger made filling a large partition quadratic (as Kafka's log
            # cleaner waits for min.cleanable.dirty.ratio).
            if self._compact is not None and (len(self.tail) >= self._compact_every
                                              or self._tail_bytes >= self._compact_bytes) \
                    and 2 * self._tail_bytes >= self._base_bytes:
                self._start_compaction()
        if self.on_change is not None:
            self.on_change()
        return offset

    def _start_compaction(self) -> None:
        """Under the lock: fold the tail into the base, here or (``background``) on a thread."""
        assert self._compact is not None
        if not self._background:
            self.base = self._compact(self.base + [p for _, _, p in self.tail])
            self._base_bytes = sum(map(len, self.base))
            self.tail = []
            self._tail_bytes = 0
            return
        if self._compacting or self._compact_failed:
            return
        self._compacting = True
        base, upto = self.base, len(self.tail)
        payloads = base + [p for _, _, p in self.tail]
        threading.Thread(target=self._compact_aside, args=(base, upto, payloads), name="entry-compaction",
                         daemon=True).start()

    def _compact_aside(self, base: list[bytes], upto: int, payloads: list[bytes]) -> None:
        """The compaction thread: the result replaces the base and the first ``upto`` tail entries
        it folded in, unless a snapshot was installed meanwhile (then it is stale)."""
        assert self._compact is not None
        try:
            compacted: list[bytes] | None = self._compact(payloads)
        except Exception:  # noqa: BLE001 - the entries stay as they are, uncompacted
            log.exception("event=entry_compaction_failed")
            compacted = None
        with self.lock:
            self._compacting = False
            if compacted is None:
                self._compact_failed = True
            elif self.base is base:
                folded, self.tail = self.tail[:upto], self.tail[upto:]
                self._tail_bytes -= sum(len(p) for _, _, p in folded)
                self.base = compacted
                self._base_bytes = sum(map(len, compacted))

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
            raw = self.base + [p for _, _, p in self.tail]
            base = self._compact(raw) if self._compact is not None and not self._background else raw
            return bytes(msgpack.packb({"base": base, "next": self.next_offset}, use_bin_type=True))

    def restore(self, data: bytes) -> None:
        state = msgpack.unpackb(data, raw=False)
        with self.lock:
            self.base = list(state["base"])
            self._base_bytes = sum(map(len, self.base))
            self.tail = []
            self._tail_bytes = 0
            self.next_offset = int(state["next"])
        if self.on_change is not None:
            self.on_change()


