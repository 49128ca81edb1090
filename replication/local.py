"""``LocalLog``: a single-node, file-backed ReplicatedLog.

One append-only file: the magic ``KCL2``, then entries ``{"e": epoch, "p": payload}`` in
msgpack, each framed as a 4-byte big-endian length, a CRC-32C of the body, and the body.
Every append is written (unbuffered, at a tracked end) before it "commits"; a write that
fails is cut back and stops the node (``replication.failstop``). No fsync unless the
durability policy asks (``sync``): a process crash keeps the page cache, a machine crash may
lose the tail, which is the single-node trade-off. On open the whole file is checked; a torn
last record is truncated away, a bad record with good ones after it refuses to start
(exit 2). A file of the first format (no magic, no CRC) is read once and rewritten. Nothing
is held in memory; compaction (see the class) bounds the file.
Always leader, at epoch 1.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import crc32c as _crc32c
import msgpack

from replication.api import CoordinatorLog, LeadershipChange, LeadershipListener, LogEntry, StaleEpochError
from replication.durable import append_at, replace_durably, sync
from replication.failstop import EXIT_CORRUPT, fail_stop
from replication.journal import flush_policy

log = logging.getLogger("kcoord.replication.local")

_LEN = struct.Struct(">I")
_FRAME = struct.Struct(">II")  # length, crc32c(body)
MAGIC = b"KCL2"
MAX_ENTRY = 1 << 30


# One compaction at a time per process: offsets partitions fill at the same pace and would all
# hold their files' bytes at once.
_COMPACTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="local-log-compact")


def _crc(body: bytes) -> int:
    return int(_crc32c.crc32c(body)) & 0xFFFFFFFF


class LocalLog:
    """The file is the log: entries are not kept in memory (a load reads them back), and past
    ``compact_bytes`` of appends since the last compaction the file is rewritten as
    ``compact(payloads)`` plus what was appended meanwhile, so memory and disk stay bounded
    by the live state, as a compacted topic's are."""

    def __init__(self, path: str, name: str | None = None, *, epoch: int = 1,
                 compact: Callable[[list[bytes]], list[bytes]] | None = None,
                 compact_bytes: int = 16 * 1024 * 1024) -> None:
        self._path = path
        self._name = name or os.path.basename(path)
        self._epoch = epoch
        self._compact = compact
        self._compact_bytes = compact_bytes
        self._listeners: list[LeadershipListener] = []
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        _remove(self._compact_path)  # a compaction that a crash interrupted: the log is whole
        self._count = 0
        self._end = self._recover()
        self._compacted_end = len(MAGIC)  # where the file ended after its last compaction
        self._compacting: asyncio.Future[tuple[int, int]] | None = None
        self._closed = False
        self._unsynced = 0
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)  # the end is _end

    @property
    def _compact_path(self) -> str:
        return self._path + ".compact"

    def _recover(self) -> int:
        """Check the file and count its entries; returns where the next frame goes."""
        if not os.path.exists(self._path):
            self._rewrite([])
            return len(MAGIC)
        with open(self._path, "rb") as fh:
            data = fh.read()
        if data.startswith(MAGIC[:3]) and not data.startswith(MAGIC):
            fail_stop("local_log", f"{self._path}: a log of format {data[:4]!r}; this build reads {MAGIC!r}: "
                      "written by a newer release (downgrades are not supported); refusing to start", EXIT_CORRUPT)
        if not data.startswith(MAGIC):  # the first format: read it once, rewrite it with CRCs
            entries = [entry for _pos, entry in self._scan_v1(data)]
            self._count = len(entries)
            return self._rewrite(entries)
        pos = good = len(MAGIC)
        while pos + _FRAME.size <= len(data):
            n, crc = _FRAME.unpack_from(data, pos)
            end = pos + _FRAME.size + n
            if n == 0 or end > len(data) or _crc(data[pos + _FRAME.size:end]) != crc:
                # (no record is empty: zeros a power loss left are not one) A torn tail, unless the
                # record's length still leads to a whole record: then the damage is in the middle.
                if n and self._whole_record_at(data, end):
                    fail_stop("local_log", f"{self._path}: the record at byte {pos} fails its CRC and a whole "
                              f"record follows it at byte {end}: the log is corrupt in the middle; refusing "
                              "to start", EXIT_CORRUPT)
                break
            self._count += 1
            pos = good = end
        if good < len(data):
            log.warning("event=torn_tail_truncated log=%s kept_bytes=%d dropped_bytes=%d",
                        self._name, good, len(data) - good)
            os.truncate(self._path, good)
        return good

    @staticmethod
    def _whole_record_at(data: bytes, pos: int) -> bool:
        if pos + _FRAME.size > len(data):
            return False
        n, crc = _FRAME.unpack_from(data, pos)
        end = pos + _FRAME.size + n
        return bool(n > 0 and end <= len(data) and _crc(data[pos + _FRAME.size:end]) == crc)

    @staticmethod
    def _entries(data: bytes) -> Iterator[tuple[int, bytes]]:
        """``(epoch, payload)`` of every frame in checked bytes (after the magic)."""
        pos = len(MAGIC)
        while pos + _FRAME.size <= len(data):
            n, _crc_value = _FRAME.unpack_from(data, pos)
            obj = msgpack.unpackb(data[pos + _FRAME.size:pos + _FRAME.size + n], raw=False)
            yield int(obj["e"]), bytes(obj["p"])
            pos += _FRAME.size + n

    @staticmethod
    def _frame(epoch: int, payload: bytes) -> bytes:
        body: bytes = msgpack.packb({"e": epoch, "p": bytes(payload)}, use_bin_type=True)
        return _FRAME.pack(len(body), _crc(body)) + body

    def _rewrite(self, entries: list[tuple[int, bytes]]) -> int:
        tmp = self._path + ".tmp"
        data = MAGIC + b"".join(self._frame(epoch, payload) for epoch, payload in entries)
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            sync(fh.fileno())
        replace_durably(tmp, self._path)
        return len(data)

    @staticmethod
    def _scan_v1(data: bytes) -> Iterator[tuple[int, tuple[int, bytes]]]:
        pos = 0
        while pos + 4 <= len(data):
            (n,) = _LEN.unpack_from(data, pos)
            if n > MAX_ENTRY or pos + 4 + n > len(data):
                return
            try:
                obj = msgpack.unpackb(data[pos + 4 : pos + 4 + n], raw=False)
                epoch, payload = int(obj["e"]), bytes(obj["p"])
            except Exception:  # noqa: BLE001 - any decode failure = torn record
                return
            pos += 4 + n
            yield pos, (epoch, payload)

    @property
    def name(self) -> str:
        return self._name

    def is_leader(self) -> bool:
        return True

    def lease_valid(self) -> bool:
        return self.is_leader()  # no peers: nobody else can lead

    def leader_epoch(self) -> int:
        return self._epoch

    def committed_offset(self) -> int:
        return self._count

    @property
    def size_bytes(self) -> int:
        return self._end

    async def append(self, payload: bytes, epoch: int) -> int:
        if epoch != self._epoch:
            raise StaleEpochError(f"{self._name}: epoch {epoch} != {self._epoch}")
        self._end = append_at(self._fd, self._frame(epoch, payload), self._end, "local_log", self._path)
        self._unsynced += 1
        policy = flush_policy()
        if policy.before_send or (policy.every_messages and self._unsynced >= policy.every_messages):
            self.sync()  # durability = "fsync" (or log.flush.interval.messages): before the answer
        offset = self._count
        self._count += 1
        self._maybe_compact()
        return offset

    def read_committed(self, start: int = 0) -> Iterable[LogEntry]:
        """Read back from the file (a load, once per start: the log keeps nothing in memory)."""
        with open(self._path, "rb") as fh:
            data = fh.read(self._end)
        return [LogEntry(i, epoch, payload) for i, (epoch, payload) in enumerate(self._entries(data))
                if i >= start]

    def read_since(self, start: int) -> tuple[Iterable[LogEntry], int] | None:
        return None  # always leader: nothing to keep an image of ahead of a load

    def refence(self) -> bool:
        return False  # one node, one epoch: the caller reloads at the same epoch

    def set_ready_to_lead(self, ready: Callable[[], bool]) -> None:
        pass  # always leader: leadership is never handed over

    def set_busy(self, busy: Callable[[], bool]) -> None:
        pass  # always leader: leadership is never handed over

    # -- compaction ------------------------------------------------------------------------------

    def _maybe_compact(self) -> None:
        if self._compact is None or self._compacting is not None or \
                self._end - self._compacted_end < self._compact_bytes:
            return
        upto, count = self._end, self._count
        self._compacting = asyncio.get_running_loop().run_in_executor(_COMPACTOR, self._write_compacted, upto)
        self._compacting.add_done_callback(lambda fut: self._swap(fut, upto, count))

    def _write_compacted(self, upto: int) -> tuple[int, int]:
        """(Worker thread.) The entries before ``upto``, compacted, into the ``.compact`` file,
        fsync'd. Returns its size and entry count."""
        assert self._compact is not None
        with open(self._path, "rb") as fh:
            data = fh.read(upto)
        kept = self._compact([payload for _epoch, payload in self._entries(data)])
        out = MAGIC + b"".join(self._frame(self._epoch, p) for p in kept)
        with open(self._compact_path, "wb") as fh:
            fh.write(out)
            fh.flush()
            sync(fh.fileno())
        return len(out), len(kept)

    def _swap(self, fut: asyncio.Future[tuple[int, int]], upto: int, count: int) -> None:
        """(Event loop, so no append interleaves.) The compacted file plus the frames appended
        since ``upto`` replaces the log."""
        self._compacting = None
        if self._closed or fut.cancelled():
            _remove(self._compact_path)
            return
        exc = fut.exception()
        if isinstance(exc, OSError):
            fail_stop("local_log", f"{self._compact_path}: compaction write failed: {type(exc).__name__}: {exc}")
        if exc is not None:
            log.error("event=compaction_failed log=%s error=%r", self._name, str(exc))
            _remove(self._compact_path)
            self._compacted_end = self._end  # try again after another compact_bytes
            return
        size, kept = fut.result()
        try:
            with open(self._path, "rb") as fh:
                fh.seek(upto)
                tail = fh.read(self._end - upto)
            fd = os.open(self._compact_path, os.O_WRONLY)
            append_at(fd, tail, size, "local_log", self._compact_path)
            sync(fd)
            replace_durably(self._compact_path, self._path)
        except OSError as e:
            fail_stop("local_log", f"{self._path}: compaction swap failed: {type(e).__name__}: {e}")
        os.close(self._fd)
        self._fd = fd
        log.info("event=log_compacted log=%s bytes_before=%d bytes_after=%d entries=%d",
                 self._name, self._end, size + len(tail), kept + self._count - count)
        self._end = size + len(tail)
        self._compacted_end = size
        self._count = kept + self._count - count

    def subscribe(self, listener: LeadershipListener) -> None:
        self._listeners.append(listener)
        listener(LeadershipChange(self._name, True, self._epoch))

    def sync(self) -> None:
        try:
            sync(self._fd)
        except OSError as e:
            fail_stop("local_log", f"{self._path}: fsync failed: {type(e).__name__}: {e}")
        self._unsynced = 0

    def close(self) -> None:
        self._closed = True
        os.close(self._fd)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


if TYPE_CHECKING:  # mypy checks LocalLog against the seam it implements
    _is_coordinator_log: type[CoordinatorLog] = LocalLog
