"""A crash-safe Raft journal for pysyncobj (implements its Journal interface).

pysyncobj 0.3.17's FileJournal shortens its log in place when it compacts
(``deleteEntriesTo`` = clear, then re-add): a kill in the middle leaves a short
journal and acknowledged entries are gone. This journal appends framed entries to a
plain file and compacts by writing the kept entries to a new file and renaming it
over the old one, so a crash leaves either the old or the new journal, never half.
Term, vote and commit index live in a small side file, also replaced by rename.

No fsync, like pysyncobj: this survives process crashes, not power loss of the host.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import msgpack

_HEAD = struct.Struct("<IQQ")  # body length, index, term
_MAGIC = b"KCJ1"


class SafeJournal:
    """Entries are ``(command: bytes, idx: int, term: int)``, as pysyncobj expects."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._meta_path = path + ".meta"
        self._entries: list[tuple[bytes, int, int]] = []
        self._offsets: list[int] = []  # file offset where each entry starts
        self._meta: dict[str, Any] = self._read_meta()
        self._meta_dirty = False
        self._load()
        self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._end = os.lseek(self._fd, 0, os.SEEK_END)  # kept here: no lseek per append

    # ---------------------------------------------------------------- file

    def _load(self) -> None:
        if not os.path.exists(self._path):
            with open(self._path, "wb") as f:
                f.write(_MAGIC)
            return
        with open(self._path, "rb") as f:
            data = f.read()
        if not data.startswith(_MAGIC):
            raise ValueError(f"{self._path} is not a kcoord journal")
        pos = len(_MAGIC)
        good = pos
        while pos + _HEAD.size <= len(data):
            size, idx, term = _HEAD.unpack_from(data, pos)
            end = pos + _HEAD.size + size
            if end > len(data):
                break  # torn tail from a crash mid-write
            self._offsets.append(pos)
            self._entries.append((data[pos + _HEAD.size : end], idx, term))
            pos = good = end
        if good != len(data):
            os.truncate(self._path, good)

    def _frame(self, command: bytes, idx: int, term: int) -> bytes:
        return _HEAD.pack(len(command), idx, term) + command

    # ---------------------------------------------------------------- Journal interface

    def add(self, command: bytes, idx: int, term: int) -> None:
        command = bytes(command)
        frame = self._frame(command, idx, term)
        self._offsets.append(self._end)
        written = os.write(self._fd, frame)
        while written < len(frame):  # a short write (e.g. a nearly full disk): finish or raise
            written += os.write(self._fd, frame[written:])
        self._end += len(frame)
        self._entries.append((command, idx, term))

    def clear(self) -> None:
        self._rewrite([])

    def deleteEntriesFrom(self, entryFrom: int) -> None:  # noqa: N802 - pysyncobj's name
        if entryFrom >= len(self._entries):
            return
        cut = self._offsets[entryFrom]
        del self._entries[entryFrom:]
        del self._offsets[entryFrom:]
        os.truncate(self._path, cut)
        self._end = cut

    def deleteEntriesTo(self, entryTo: int) -> None:  # noqa: N802 - pysyncobj's name
        self._rewrite(self._entries[entryTo:])

    def _rewrite(self, keep: list[tuple[bytes, int, int]]) -> None:
        tmp = self._path + ".tmp"
        offsets = []
        with open(tmp, "wb") as f:
            f.write(_MAGIC)
            pos = len(_MAGIC)
            for command, idx, term in keep:
                frame = self._frame(command, idx, term)
                offsets.append(pos)
                f.write(frame)
                pos += len(frame)
        os.replace(tmp, self._path)
        os.close(self._fd)
        self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND, 0o600)
        self._end = pos
        self._entries = list(keep)
        self._offsets = offsets

    def __getitem__(self, item: Any) -> Any:
        return self._entries[item]

    def __len__(self) -> int:
        return len(self._entries)

    def _destroy(self) -> None:
        self._store_meta()
        try:
            os.close(self._fd)
        except OSError:
            pass

    def flush(self) -> None:
        pass

    # ---------------------------------------------------------------- meta

    def _read_meta(self) -> dict[str, Any]:
        try:
            with open(self._meta_path, "rb") as f:
                meta = msgpack.unpackb(f.read(), raw=False)
                return meta if isinstance(meta, dict) else {}
        except (OSError, ValueError, msgpack.UnpackException):
            return {}

    def _store_meta(self) -> None:
        tmp = self._meta_path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(msgpack.packb(self._meta, use_bin_type=True))
        os.replace(tmp, self._meta_path)
        self._meta_dirty = False

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:  # noqa: N802,N803
        if self._meta.get("commit") != raftCommitIndex:  # heartbeats repeat it; write only changes
            self._meta["commit"] = raftCommitIndex
            self._meta_dirty = True

    def getRaftCommitIndex(self) -> int:  # noqa: N802
        return int(self._meta.get("commit", 1))

    def setCurrentTerm(self, term: int, votedForNodeId: Any) -> None:  # noqa: N802,N803
        # Raft needs term and vote durable before any message reflecting them leaves.
        self._meta["term"] = term
        self._meta["vote"] = votedForNodeId
        self._store_meta()

    def getCurrentTerm(self) -> int:  # noqa: N802
        return int(self._meta.get("term", 0))

    def getVotedForNodeId(self) -> Any:  # noqa: N802
        return self._meta.get("vote")

    def onOneSecondTimer(self) -> None:  # noqa: N802
        if self._meta_dirty:
            self._store_meta()
