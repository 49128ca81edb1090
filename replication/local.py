"""``LocalLog``: a single-node, file-backed ReplicatedLog.

One append-only file: the magic ``KCL2``, then entries ``{"e": epoch, "p": payload}`` in
msgpack, each framed as a 4-byte big-endian length, a CRC-32C of the body, and the body.
Every append is written (unbuffered, at a tracked end) before it "commits"; a write that
fails is cut back and stops the node (``replication.failstop``). No fsync unless the
durability policy asks (``sync``): a process crash keeps the page cache, a machine crash may
lose the tail, which is the single-node trade-off. On open the whole file is re-read; a torn
last record is truncated away, a bad record with good ones after it refuses to start
(exit 2). A file of the first format (no magic, no CRC) is read once and rewritten.
Always leader, at epoch 1.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable, Iterator

import crc32c as _crc32c
import msgpack

from replication.api import LeadershipChange, LeadershipListener, LogEntry, StaleEpochError
from replication.failstop import EXIT_CORRUPT, fail_stop
from replication.journal import flush_policy

log = logging.getLogger("kcoord.replication.local")

_LEN = struct.Struct(">I")
_FRAME = struct.Struct(">II")  # length, crc32c(body)
MAGIC = b"KCL2"
MAX_ENTRY = 1 << 30
_write = os.write  # by name, so tests can fault it


def _crc(body: bytes) -> int:
    return int(_crc32c.crc32c(body)) & 0xFFFFFFFF


class LocalLog:
    def __init__(self, path: str, name: str | None = None, *, epoch: int = 1) -> None:
        self._path = path
        self._name = name or os.path.basename(path)
        self._epoch = epoch
        self._listeners: list[LeadershipListener] = []
        self._entries: list[LogEntry] = []
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._end = self._recover()
        self._unsynced = 0
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)  # the end is _end

    def _recover(self) -> int:
        """Read the file back; returns where the next frame goes."""
        if not os.path.exists(self._path):
            self._rewrite([])
            return len(MAGIC)
        with open(self._path, "rb") as fh:
            data = fh.read()
        if not data.startswith(MAGIC):  # the first format: read it once, rewrite it with CRCs
            for _pos, entry in self._scan_v1(data):
                self._entries.append(LogEntry(len(self._entries), entry[0], entry[1]))
            return self._rewrite(self._entries)
        pos = good = len(MAGIC)
        while pos + _FRAME.size <= len(data):
            n, crc = _FRAME.unpack_from(data, pos)
            end = pos + _FRAME.size + n
            if end > len(data):
                break
            body = data[pos + _FRAME.size:end]
            if _crc(body) != crc:
                if end < len(data):
                    fail_stop("local_log", f"{self._path}: the record at byte {pos} fails its CRC and "
                              f"{len(data) - end} bytes follow it: the log is corrupt in the middle; "
                              "refusing to start", EXIT_CORRUPT)
                break
            obj = msgpack.unpackb(body, raw=False)
            self._entries.append(LogEntry(len(self._entries), int(obj["e"]), bytes(obj["p"])))
            pos = good = end
        if good < len(data):
            log.warning("event=torn_tail_truncated log=%s kept_bytes=%d dropped_bytes=%d",
                        self._name, good, len(data) - good)
            os.truncate(self._path, good)
        return good

    @staticmethod
    def _frame(epoch: int, payload: bytes) -> bytes:
        body: bytes = msgpack.packb({"e": epoch, "p": bytes(payload)}, use_bin_type=True)
        return _FRAME.pack(len(body), _crc(body)) + body

    def _rewrite(self, entries: list[LogEntry]) -> int:
        tmp = self._path + ".tmp"
        data = MAGIC + b"".join(self._frame(e.epoch, e.payload) for e in entries)
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self._path)
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

    def leader_epoch(self) -> int:
        return self._epoch

    def committed_offset(self) -> int:
        return len(self._entries)

    async def append(self, payload: bytes, epoch: int) -> int:
        if epoch != self._epoch:
            raise StaleEpochError(f"{self._name}: epoch {epoch} != {self._epoch}")
        frame = self._frame(epoch, payload)
        try:
            view = memoryview(frame)
            while view:
                view = view[_write(self._fd, view):]
        except OSError as e:
            try:
                os.ftruncate(self._fd, self._end)
            except OSError:
                pass
            fail_stop("local_log", f"{self._path}: write failed: {type(e).__name__}: {e}")
        self._end += len(frame)
        self._unsynced += 1
        policy = flush_policy()
        if policy.before_send or (policy.every_messages and self._unsynced >= policy.every_messages):
            self.sync()  # durability = "fsync" (or log.flush.interval.messages): before the answer
        offset = len(self._entries)
        self._entries.append(LogEntry(offset, epoch, bytes(payload)))
        return offset

    def read_committed(self, start: int = 0) -> Iterable[LogEntry]:
        return list(self._entries[max(start, 0) :])

    def subscribe(self, listener: LeadershipListener) -> None:
        self._listeners.append(listener)
        listener(LeadershipChange(self._name, True, self._epoch))

    def sync(self) -> None:
        try:
            os.fsync(self._fd)
        except OSError as e:
            fail_stop("local_log", f"{self._path}: fsync failed: {type(e).__name__}: {e}")
        self._unsynced = 0

    def close(self) -> None:
        os.close(self._fd)
