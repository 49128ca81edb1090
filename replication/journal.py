"""A crash-safe Raft journal for pysyncobj (implements its Journal interface).

pysyncobj 0.3.17's FileJournal shortens its log in place when it compacts
(``deleteEntriesTo`` = clear, then re-add): a kill in the middle leaves a short
journal and acknowledged entries are gone. This journal appends framed entries to a
plain file and compacts by writing the kept entries to a new file and renaming it
over the old one, so a crash leaves either the old or the new journal, never half.
Term and vote live in a small side file (CRC, fsync'd, replaced by rename); the commit index,
a hint a restarted node can re-learn, in another that is never fsync'd.

Every frame carries a CRC-32C of its index, term and command. On load, a torn tail (the
last frame cut short or failing its CRC, followed by nothing that is a valid frame: a crash
mid-write, or the zeros or garbage a power loss leaves after it) is truncated with one log
line; a bad frame followed by a valid one is corruption in the middle, and the node refuses
to start (exit 2) rather than replay a log it cannot trust. Journals of the first format
(``KCJ1``, no CRC) are read once and rewritten.

Writes go straight to the file (no user-space buffer) at a tracked end: a write that fails
(ENOSPC, EIO) is truncated back to the last whole frame and the node stops
(``replication.failstop``), so nothing is acknowledged that is not in the journal and no
stale bytes of a failed write are ever written later. Renames are fsync'd with their
directory. The journal itself is fsync'd only as ``durability`` says (``set_flush_policy``):
by default never, as Kafka (replication, not fsync, makes a write durable); in ``fsync``
mode before any Raft message of a ticker pass leaves, so nothing is acknowledged, by a
follower or to a client, before it is on disk.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import threading
import time
import weakref
from array import array
from dataclasses import dataclass
from typing import Any

import crc32c as _crc32c
import msgpack

from replication.durable import append_at, renamed, replace_durably, sync, write_durably
from replication.failstop import EXIT_CORRUPT, fail_stop

log = logging.getLogger("kcoord.journal")

_HEAD_V1 = struct.Struct("<IQQ")  # body length, index, term
_HEAD = struct.Struct("<IIQQ")  # body length, crc32c(index, term, body), index, term
_MAGIC_V1 = b"KCJ1"
_MAGIC = b"KCJ2"
_META_MAGIC = b"KCM1"
# Commands of the newest entries kept in memory per journal: what followers that keep up are
# sent and what is applied next. Older ones are read from the file when needed.
CACHE_BYTES = 4 * 1024 * 1024
_NONZERO = re.compile(rb"[^\x00]")
# What an operator should do with a node whose journal is corrupt. Not "start it empty and let
# its peers refill it": a node back under its old id with less than it acknowledged (entries, its
# vote) could help elect a leader lacking committed entries, and acknowledged writes would be lost.
# An older backup of the node is unsafe for the same reason.
CORRUPT_ADVICE = ("Keep this node down and keep this directory as it is, for inspection. Restart the node only "
                  "with its own intact data as it was when it stopped (e.g. an undamaged copy of this node's "
                  "volume taken after it stopped); an empty directory, an older backup or another node's "
                  "directory can lose acknowledged writes. The cluster keeps serving while a majority of its "
                  "nodes is up; replacing a node whose data is lost is not supported yet.")


_fsync = sync  # by name, so tests can fault it (appends: replication.durable._pwrite)


def _crc(idx: int, term: int, command: bytes) -> int:
    return int(_crc32c.crc32c(command, _crc32c.crc32c(struct.pack("<QQ", idx, term)))) & 0xFFFFFFFF


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


@dataclass(frozen=True, slots=True)
class FlushPolicy:
    """When journals are fsync'd (Kafka's ``log.flush.interval.messages`` / ``.ms``)."""

    before_send: bool = False  # durability = "fsync": every pass, before its messages leave
    every_messages: int = 0  # 0 = never by count
    every_ms: int = 0  # 0 = never by time


_policy = FlushPolicy()
_dirty: weakref.WeakSet[SafeJournal] = weakref.WeakSet()  # written since their last fsync
_dirty_lock = threading.Lock()


def set_flush_policy(policy: FlushPolicy) -> None:
    global _policy
    _policy = policy


def flush_policy() -> FlushPolicy:
    return _policy


def sync_due(before_send: bool) -> int:
    """fsync the journals the policy says are due; returns how many were synced. Called by the
    Raft ticker each pass (``before_send=True`` just before the pass's messages go out)."""
    if not _dirty:
        return 0
    with _dirty_lock:
        journals = list(_dirty)
    now = time.monotonic()
    synced = 0
    for j in journals:
        if (before_send and _policy.before_send) or j.flush_due(_policy, now):
            j.sync()
            synced += 1
    return synced


class SafeJournal:
    """Entries are ``(command: bytes, idx: int, term: int)``, as pysyncobj expects.

    Memory holds each entry's position, index and term (24 bytes), the first entry (pysyncobj
    reads it constantly) and the commands of the last ``cache_bytes`` of entries, which is what
    the leader sends to followers that keep up and what the state machine applies next. Older
    commands (a lagging follower's catch-up, a restart's replay) are read back from the file."""

    def __init__(self, path: str, cache_bytes: int = CACHE_BYTES) -> None:
        self._path = path
        self._meta_path = path + ".meta"
        self._cache_bytes = cache_bytes
        self._pos = array("q")  # file offset where each entry's frame starts
        self._idx = array("q")
        self._term = array("q")
        self._first: bytes = b""  # entry 0's command
        self._recent: list[bytes] = []  # commands of entries _recent_from..len-1
        self._recent_from = 0
        self._recent_bytes = 0
        self._commit_path = path + ".commit"
        self._meta: dict[str, Any] = self._read_meta()
        self._commit = self._read_commit()
        self._commit_dirty = False
        self._unsynced = 0  # entries written since the last fsync
        self._synced_at = time.monotonic()
        self._fd = -1
        self._rfd = -1
        self._end = 0  # the end of the last whole frame: where the next one is written
        # Told of every entry added and every truncation from now on (``added(command, idx)``,
        # ``truncated(idx)``, ``cleared()``): a group's configuration follows its log's entries.
        self.observer: Any = None
        self._load()
        if self._fd < 0:
            self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT, 0o600)
            self._end = os.lseek(self._fd, 0, os.SEEK_END)
        if self._rfd < 0:
            self._rfd = os.open(self._path, os.O_RDONLY)

    # ---------------------------------------------------------------- file

    def _load(self) -> None:
        if not os.path.exists(self._path):
            self._write_file(self._path, [])
            return
        with open(self._path, "rb") as f:
            data = f.read()
        if data.startswith(_MAGIC_V1):
            entries = self._load_v1(data)
            self._rewrite(entries)  # once: from now on every frame has its CRC
            log.info("event=journal_upgraded path=%s entries=%d", self._path, len(entries))
            return
        if not data.startswith(_MAGIC):
            fail_stop("journal", f"{self._path} is not a kcoord journal (unknown header {data[:4]!r})", EXIT_CORRUPT)
        pos = good = len(_MAGIC)
        while pos < len(data):
            if len(data) - pos < _HEAD.size:
                break  # a torn frame header at the end
            size, crc, idx, term = _HEAD.unpack_from(data, pos)
            end = pos + _HEAD.size + size
            if end > len(data) or _crc(idx, term, data[pos + _HEAD.size:end]) != crc:
                # Cut short or failing its CRC: a torn tail, unless a valid frame follows.
                after = self._valid_frame_after(data, pos)
                if after is not None:
                    fail_stop("journal", f"{self._path}: the frame at byte {pos} fails its CRC and a valid "
                              f"frame follows at byte {after}: the journal is corrupt in the middle; refusing "
                              f"to start. {CORRUPT_ADVICE}", EXIT_CORRUPT)
                break
            self._pos.append(pos)
            self._idx.append(idx)
            self._term.append(term)
            pos = good = end
        if good != len(data):
            log.warning("event=journal_torn_tail path=%s truncated_bytes=%d entries=%d", self._path,
                        len(data) - good, len(self._pos))
            os.truncate(self._path, good)
        self._end = good
        self._cache_from_bytes(data)

    def _valid_frame_after(self, data: bytes, bad: int) -> int | None:
        """Where a whole frame that passes its CRC starts after the bad frame at ``bad``, if any.

        The bad frame's length may be garbage too, so every byte offset after it is tried, not
        only the boundary its length implies. Cheap checks come before any CRC: the journal's
        indices are consecutive (pysyncobj's) and its terms never decrease, so a frame ``d``
        bytes on can only hold an index in ``(last, last + 1 + d // header size]`` (every entry
        in between takes at least a header) and a term at least the last one (with no good frame
        before, any index >= 1). Offsets that cannot hold such an index are skipped at C speed:
        windows of zeros (an index is at least 1) and windows whose index field lacks the zero
        high bytes every index below the bound has. The work is linear in the bytes after
        ``bad``, with a CRC only for the rare header that passes all that and fits in the file."""
        known = len(self._idx) > 0
        last_idx = self._idx[-1] if known else 0
        last_term = self._term[-1] if known else 0
        bound = last_idx + 1 + (len(data) - bad) // _HEAD.size
        high_zeros = bytes(8 - (bound.bit_length() + 7) // 8) if known else b""
        o = bad + 1
        while True:
            nonzero = _NONZERO.search(data, o)
            if nonzero is None:
                return None
            o = max(o, nonzero.start() - _HEAD.size + 1)
            if high_zeros:  # the index field is bytes 8..16 of a header, little-endian
                at = data.find(high_zeros, o + 16 - len(high_zeros))
                if at < 0:
                    return None
                o = at - 16 + len(high_zeros)
            if o + _HEAD.size > len(data):
                return None
            size, crc, idx, term = _HEAD.unpack_from(data, o)
            end = o + _HEAD.size + size
            if (idx > last_idx and (not known or idx <= last_idx + 1 + (o - bad) // _HEAD.size)
                    and term >= last_term and end <= len(data)
                    and _crc(idx, term, data[o + _HEAD.size:end]) == crc):
                return o
            o += 1

    def _cache_from_bytes(self, data: bytes) -> None:
        """Fill the first entry and the recent cache from the whole file's bytes (a load)."""
        n = len(self._pos)
        self._recent, self._recent_from, self._recent_bytes = [], n, 0
        if not n:
            return
        self._first = self._command_in(data, 0, 0)
        i = n
        while i > 0 and (i == n or self._recent_bytes + self._size(i - 1) <= self._cache_bytes):
            i -= 1
            self._recent_bytes += self._size(i)
        self._recent_from = i
        self._recent = [self._command_in(data, j, 0) for j in range(i, n)]

    def _frame_end(self, i: int) -> int:
        return self._pos[i + 1] if i + 1 < len(self._pos) else self._end

    def _size(self, i: int) -> int:
        """Entry ``i``'s command length, from the positions alone."""
        return self._frame_end(i) - self._pos[i] - _HEAD.size

    def _command_in(self, data: bytes, i: int, base: int) -> bytes:
        """Entry ``i``'s command out of ``data``, which holds the file from byte ``base``."""
        return data[self._pos[i] + _HEAD.size - base:self._frame_end(i) - base]

    @staticmethod
    def _load_v1(data: bytes) -> list[tuple[bytes, int, int]]:
        entries = []
        pos = len(_MAGIC_V1)
        while pos + _HEAD_V1.size <= len(data):
            size, idx, term = _HEAD_V1.unpack_from(data, pos)
            end = pos + _HEAD_V1.size + size
            if end > len(data):
                break
            entries.append((data[pos + _HEAD_V1.size:end], idx, term))
            pos = end
        return entries

    @staticmethod
    def _frame(command: bytes, idx: int, term: int) -> bytes:
        return _HEAD.pack(len(command), _crc(idx, term, command), idx, term) + command

    def _write_all(self, data: bytes) -> None:
        self._end = append_at(self._fd, data, self._end, "journal", self._path)

    def _read(self, start: int, stop: int) -> list[bytes]:
        """Commands of entries ``start..stop-1`` that are not cached: one read from the file."""
        if start >= stop:
            return []
        base = self._pos[start]
        data = os.pread(self._rfd, self._frame_end(stop - 1) - base, base)
        return [self._command_in(data, i, base) for i in range(start, stop)]

    def _commands(self, start: int, stop: int) -> list[bytes]:
        out = self._read(start, min(stop, self._recent_from))
        if stop > self._recent_from:
            out.extend(self._recent[max(start - self._recent_from, 0):stop - self._recent_from])
        return out

    def _cache(self, command: bytes) -> None:
        self._recent.append(command)
        self._recent_bytes += len(command)
        if self._recent_bytes > self._cache_bytes and len(self._recent) > 1:
            # Drop the oldest until half the bound is left (amortised: not one entry per add).
            drop, freed = 0, 0
            while len(self._recent) - drop > 1 and self._recent_bytes - freed > self._cache_bytes // 2:
                freed += len(self._recent[drop])
                drop += 1
            del self._recent[:drop]
            self._recent_from += drop
            self._recent_bytes -= freed

    # ---------------------------------------------------------------- Journal interface

    def add(self, command: bytes, idx: int, term: int) -> None:
        command = bytes(command)
        start = self._end
        self._write_all(self._frame(command, idx, term))
        if not self._pos:
            self._first = command
        self._pos.append(start)
        self._idx.append(idx)
        self._term.append(term)
        self._cache(command)
        self._unsynced += 1
        with _dirty_lock:
            _dirty.add(self)
        if self.observer is not None:
            self.observer.added(command, idx)

    def clear(self) -> None:
        self._rewrite([])
        if self.observer is not None:
            self.observer.cleared()

    def deleteEntriesFrom(self, entryFrom: int) -> None:  # noqa: N802 - pysyncobj's name
        if entryFrom >= len(self._pos):
            return
        cut, cut_idx = self._pos[entryFrom], self._idx[entryFrom]
        try:
            os.ftruncate(self._fd, cut)
        except OSError as e:
            fail_stop("journal", f"{self._path}: truncate failed: {type(e).__name__}: {e}")
        del self._pos[entryFrom:], self._idx[entryFrom:], self._term[entryFrom:]
        self._end = cut
        if entryFrom <= self._recent_from:
            self._recent, self._recent_from, self._recent_bytes = [], entryFrom, 0
        else:
            for c in self._recent[entryFrom - self._recent_from:]:
                self._recent_bytes -= len(c)
            del self._recent[entryFrom - self._recent_from:]
        if self.observer is not None:
            self.observer.truncated(cut_idx)

    def deleteEntriesTo(self, entryTo: int) -> None:  # noqa: N802 - pysyncobj's name
        """Compaction: the entries from ``entryTo`` on become the journal. Their frames are copied
        as they are (no decoding) to a new file that replaces the old one by rename."""
        entryTo = min(max(entryTo, 0), len(self._pos))
        first = self[entryTo][0] if entryTo < len(self._pos) else b""
        keep_from = self._pos[entryTo] if entryTo < len(self._pos) else self._end
        tmp = self._path + ".tmp"
        try:
            with open(tmp, "wb", buffering=0) as f:
                f.write(_MAGIC)
                pos = keep_from
                while pos < self._end:
                    chunk = os.pread(self._rfd, min(1 << 22, self._end - pos), pos)
                    view = memoryview(chunk)
                    while view:
                        view = view[f.write(view) or 0:]
                    pos += len(chunk)
                sync(f.fileno())
            replace_durably(tmp, self._path)
        except OSError as e:
            _unlink_quietly(tmp)
            fail_stop("journal", f"{self._path}: rewrite failed: {type(e).__name__}: {e}")
        shift = keep_from - len(_MAGIC)
        self._pos = array("q", (p - shift for p in self._pos[entryTo:]))
        del self._idx[:entryTo], self._term[:entryTo]
        self._end -= shift
        self._first = first
        if entryTo <= self._recent_from:
            self._recent_from -= entryTo
        else:
            for c in self._recent[:entryTo - self._recent_from]:
                self._recent_bytes -= len(c)
            del self._recent[:entryTo - self._recent_from]
            self._recent_from = 0
        self._reopen()

    def _reopen(self) -> None:
        for fd in (self._fd, self._rfd):
            if fd >= 0:
                os.close(fd)
        self._fd = os.open(self._path, os.O_WRONLY, 0o600)
        self._rfd = os.open(self._path, os.O_RDONLY)
        self._unsynced = 0

    def _write_file(self, path: str, keep: list[tuple[bytes, int, int]]) -> tuple[list[int], int]:
        """Write a whole journal to ``path`` (fsync'd); returns each frame's offset and the end."""
        offsets = []
        pos = len(_MAGIC)
        chunks = [_MAGIC]
        for command, idx, term in keep:
            frame = self._frame(command, idx, term)
            offsets.append(pos)
            chunks.append(frame)
            pos += len(frame)
        with open(path, "wb", buffering=0) as f:
            data = b"".join(chunks)
            view = memoryview(data)
            while view:
                view = view[f.write(view) or 0:]
            sync(f.fileno())
        return offsets, pos

    def _rewrite(self, keep: list[tuple[bytes, int, int]]) -> None:
        tmp = self._path + ".tmp"
        try:
            offsets, end = self._write_file(tmp, keep)
            replace_durably(tmp, self._path)  # also makes a snapshot renamed just before durable
        except OSError as e:
            _unlink_quietly(tmp)
            fail_stop("journal", f"{self._path}: rewrite failed: {type(e).__name__}: {e}")
        self._end = end
        self._pos = array("q", offsets)
        self._idx = array("q", (idx for _c, idx, _t in keep))
        self._term = array("q", (term for _c, _i, term in keep))
        self._first = keep[0][0] if keep else b""
        self._recent, self._recent_from, self._recent_bytes = [], 0, 0
        for command, _i, _t in keep:
            self._cache(command)
        self._reopen()

    def _still_ours(self) -> bool:
        """The file at our path is the one we write (a removed partition's directory may
        already hold a new incarnation's journal: its side files must not be overwritten)."""
        try:
            return os.fstat(self._fd).st_ino == os.stat(self._path).st_ino
        except OSError:
            return False

    @property
    def size_bytes(self) -> int:
        return self._end

    def __getitem__(self, item: Any) -> Any:
        n = len(self._pos)
        if isinstance(item, slice):
            start, stop, step = item.indices(n)
            if step != 1:
                raise ValueError("journal slices have no step")
            return self.entries(start, stop)
        i = item + n if item < 0 else item
        if not 0 <= i < n:
            raise IndexError(item)
        if i == 0:
            command = self._first
        elif i >= self._recent_from:
            command = self._recent[i - self._recent_from]
        else:
            command = self._read(i, i + 1)[0]
        return command, self._idx[i], self._term[i]

    def entries(self, start: int, stop: int | None = None, max_bytes: int | None = None) -> list[tuple[bytes, int, int]]:
        """Entries ``start..stop-1``; with ``max_bytes``, only up to and including the one whose
        command brings the total to ``max_bytes`` (pysyncobj's batch rule), decided from the
        positions before anything is read."""
        n = len(self._pos)
        stop = n if stop is None else min(stop, n)
        if max_bytes is not None:
            total, i = 0, start
            while i < stop:
                total += self._size(i)
                i += 1
                if total >= max_bytes:
                    break
            stop = i
        if start >= stop:
            return []
        return list(zip(self._commands(start, stop), self._idx[start:stop], self._term[start:stop], strict=True))

    def __len__(self) -> int:
        return len(self._pos)

    def index_at(self, i: int) -> int:
        """Entry ``i``'s Raft index, without its command."""
        return self._idx[i]

    def term_at(self, i: int) -> int:
        """Entry ``i``'s term, without its command."""
        return self._term[i]

    @property
    def cached_bytes(self) -> int:
        """Commands held in memory (the recent cache; the first entry aside)."""
        return self._recent_bytes

    def _destroy(self) -> None:
        with _dirty_lock:
            _dirty.discard(self)
        if self._still_ours():
            self._store_commit()
        for fd in (self._fd, self._rfd):
            try:
                os.close(fd)
            except OSError:
                pass

    def flush(self) -> None:
        pass

    # ---------------------------------------------------------------- fsync

    def flush_due(self, policy: FlushPolicy, now: float) -> bool:
        if not self._unsynced:
            return False
        if policy.every_messages and self._unsynced >= policy.every_messages:
            return True
        return bool(policy.every_ms) and (now - self._synced_at) * 1000 >= policy.every_ms

    def sync(self) -> None:
        try:
            _fsync(self._fd)
        except OSError as e:
            fail_stop("journal", f"{self._path}: fsync failed: {type(e).__name__}: {e}")
        self._unsynced = 0
        self._synced_at = time.monotonic()
        with _dirty_lock:
            _dirty.discard(self)

    # ---------------------------------------------------------------- meta

    def _read_meta(self) -> dict[str, Any]:
        try:
            with open(self._meta_path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return {}
        except OSError as e:
            fail_stop("journal", f"{self._meta_path}: cannot read term and vote: {e}", EXIT_CORRUPT)
        if data.startswith(_META_MAGIC):
            (crc,) = struct.unpack_from("<I", data, len(_META_MAGIC))
            body = data[len(_META_MAGIC) + 4:]
            if int(_crc32c.crc32c(body)) & 0xFFFFFFFF != crc:
                fail_stop("journal", f"{self._meta_path}: term and vote fail their CRC; a node that forgot its "
                          "vote could vote twice in one term: refusing to start", EXIT_CORRUPT)
        else:
            body = data  # the first format: msgpack alone
        try:
            meta = msgpack.unpackb(body, raw=False)
        except (ValueError, msgpack.UnpackException) as e:
            fail_stop("journal", f"{self._meta_path}: unreadable term and vote ({e})", EXIT_CORRUPT)
        return meta if isinstance(meta, dict) else {}

    def _store_meta(self) -> None:
        """Term and vote: written to a temporary file, fsync'd, renamed, directory fsync'd."""
        body = msgpack.packb(self._meta, use_bin_type=True)
        data = _META_MAGIC + struct.pack("<I", int(_crc32c.crc32c(body)) & 0xFFFFFFFF) + body
        try:
            write_durably(self._meta_path, data)
        except OSError as e:
            fail_stop("journal", f"{self._meta_path}: writing term and vote failed: {type(e).__name__}: {e}")

    def _read_commit(self) -> int:
        """The commit index is a hint (a node that restarts with an older one re-learns it from the
        leader): its own file, never fsync'd, and anything unreadable counts as unknown."""
        try:
            with open(self._commit_path, "rb") as f:
                data = f.read()
            (crc, commit) = struct.unpack("<IQ", data)
            if int(_crc32c.crc32c(data[4:])) & 0xFFFFFFFF == crc:
                return int(commit)
        except (OSError, struct.error):
            pass
        return int(self._meta.get("commit", 1))  # the first format kept it with term and vote

    def _store_commit(self) -> None:
        if not self._commit_dirty:
            return
        body = struct.pack("<Q", self._commit)
        tmp = self._commit_path + ".tmp"
        try:
            with open(tmp, "wb", buffering=0) as f:
                f.write(struct.pack("<I", int(_crc32c.crc32c(body)) & 0xFFFFFFFF) + body)
            os.replace(tmp, self._commit_path)
            renamed(tmp, self._commit_path)  # never fsync'd: a power loss may keep it or not
        except OSError as e:
            fail_stop("journal", f"{self._commit_path}: write failed: {type(e).__name__}: {e}")
        self._commit_dirty = False

    def setRaftCommitIndex(self, raftCommitIndex: int) -> None:  # noqa: N802,N803
        if self._commit != raftCommitIndex:  # heartbeats repeat it; write only changes
            self._commit = raftCommitIndex
            self._commit_dirty = True

    def getRaftCommitIndex(self) -> int:  # noqa: N802
        return self._commit

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
        self._store_commit()
