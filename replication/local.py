"""``LocalLog``: a single-node, file-backed ReplicatedLog.

One append-only file of length-prefixed msgpack entries ``{"e": epoch, "p": payload}``
(4-byte big-endian length, then the msgpack map). Every append is written before it
"commits" (no fsync: a process crash keeps the page cache, a machine crash may lose the
tail, which is the single-node trade-off). On open the whole file is re-read; a torn last
record (short length prefix, short body, or undecodable body) is truncated away.
Always leader, at epoch 1.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable, Iterator

import msgpack

from replication.api import LeadershipChange, LeadershipListener, LogEntry, StaleEpochError

log = logging.getLogger("kcoord.replication.local")

_LEN = struct.Struct(">I")
MAX_ENTRY = 1 << 30


class LocalLog:
    def __init__(self, path: str, name: str | None = None, *, epoch: int = 1) -> None:
        self._path = path
        self._name = name or os.path.basename(path)
        self._epoch = epoch
        self._listeners: list[LeadershipListener] = []
        self._entries: list[LogEntry] = []
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._recover()
        self._fh = open(path, "ab")  # noqa: SIM115 - kept open for the log's lifetime

    def _recover(self) -> None:
        if not os.path.exists(self._path):
            return
        with open(self._path, "rb") as fh:
            data = fh.read()
        good = 0
        for pos, entry in self._scan(data):
            self._entries.append(LogEntry(len(self._entries), entry[0], entry[1]))
            good = pos
        if good < len(data):
            log.warning("event=torn_tail_truncated log=%s kept_bytes=%d dropped_bytes=%d",
                        self._name, good, len(data) - good)
            with open(self._path, "r+b") as fh:
                fh.truncate(good)

    @staticmethod
    def _scan(data: bytes) -> Iterator[tuple[int, tuple[int, bytes]]]:
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
        body = msgpack.packb({"e": epoch, "p": bytes(payload)}, use_bin_type=True)
        self._fh.write(_LEN.pack(len(body)) + body)
        self._fh.flush()
        offset = len(self._entries)
        self._entries.append(LogEntry(offset, epoch, bytes(payload)))
        return offset

    def read_committed(self, start: int = 0) -> Iterable[LogEntry]:
        return list(self._entries[max(start, 0) :])

    def subscribe(self, listener: LeadershipListener) -> None:
        self._listeners.append(listener)
        listener(LeadershipChange(self._name, True, self._epoch))

    def close(self) -> None:
        self._fh.close()
