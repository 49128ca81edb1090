"""A data partition's Raft snapshot sent to a lagging follower as it is on disk.

The leader's snapshot of a data partition names its segments and their sizes (``DataLog.manifest``);
the bytes stay in the segment files. A follower that needs it is sent those bytes in bounded
chunks read from disk (``next_chunk``), and builds a staging copy of the log beside its own
(``SnapshotInstall``): every batch is checked (length, CRC, offsets that follow on) before it is
written, at most one chunk plus one batch is held in memory, and only a copy that ends exactly
where the snapshot says replaces the partition's log.

A stream is ``begin`` (the first segment's base offset, the bytes to come), then ``seg`` chunks in
order (segment base, position, bytes), then ``end`` with the snapshot's own bytes. The leader reads
its segments as they are now, up to the offset its *current* snapshot ends at, so a stream outlives
the snapshots taken while it runs (a 2 GB catch-up takes longer than the journal takes to fill).

None of the disk work is done on the event loop, which also drives Raft: the leader reads a few
chunks ahead on a reader thread (``ReadAhead``), and the follower checks and writes them on a
thread of its own install, so the loop only hands pieces over (and waits for the disk only when
the copy falls ``QUEUE_PIECES`` behind the link, and at the end for what is still queued).
"""

from __future__ import annotations

import os
import queue
import shutil
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import msgpack

from replication.data_log import INSTALL_SUFFIX, DataLog
from replication.failstop import fail_stop
from replication.leader_epochs import restamp
from replication.raft.snapshot_transfer import NOT_READY, InstallError, StreamCursor
from replication.record_batch import ATTRIBUTES_OFFSET, HEADER_SIZE, crc32c, parse_header

CHUNK_BYTES = 1 << 20  # one message of a stream
MAX_BATCH_BYTES = 128 << 20  # no batch is larger (a request's bound): what a piece may leave unfinished
DISK_MARGIN = 256 << 20
READ_AHEAD = 4  # chunks a leader reads in one go on its reader thread (one pass's share)
QUEUE_PIECES = 4  # chunks a follower's install thread may be behind the link before the loop waits
SYNC_BYTES = 8 << 20  # the install thread fsyncs the copy this often: little is left for the end


def encode(kind: str, *fields: Any) -> bytes:
    return bytes(msgpack.packb([kind, *fields], use_bin_type=True))


def decode(data: bytes) -> list[Any]:
    value = msgpack.unpackb(data, raw=False, strict_map_key=False)
    if not isinstance(value, list) or not value or not isinstance(value[0], str):
        raise InstallError("not a snapshot stream message")
    return value


def next_chunk(data: DataLog, end: int, cursor: StreamCursor) -> bytes | None:
    """The stream's next ``begin`` or ``seg`` message for ``cursor`` (advanced), reading at most
    ``CHUNK_BYTES`` from disk, of this log's segments up to offset ``end`` (the snapshot's); None
    once all of it was sent (the caller then sends ``end``). Raises InstallError when retention
    deleted the segment being sent."""
    bounds = data.stream_bounds(end)
    if not bounds and cursor.base in (None, end) and data.log_start_offset >= end:
        # Everything below the snapshot's end was deleted (DeleteRecords, retention): the copy is
        # an empty log that starts there (it used to fail until the next Raft snapshot).
        if cursor.base is None:
            cursor.base, cursor.pos = end, 0
            return encode("begin", end, 0)
        return None
    if not bounds:
        raise InstallError(f"the log holds nothing below offset {end}")
    if cursor.base is None:
        cursor.base, cursor.pos = bounds[0][0], 0
        return encode("begin", cursor.base, sum(size for _, size in bounds))
    bases = [base for base, _ in bounds]
    if cursor.base not in bases:
        raise InstallError(f"segment {cursor.base} was deleted while it was sent")
    i = bases.index(cursor.base)
    while cursor.pos >= bounds[i][1]:
        if i + 1 == len(bounds):
            return None
        i += 1
        cursor.base, cursor.pos = bounds[i][0], 0
    if cursor.pos == 0:  # a compaction may replace a segment before its sending begins, not during it
        cursor.generation = data.segment_generation(cursor.base)
    chunk = data.read_segment(cursor.base, cursor.pos, min(CHUNK_BYTES, bounds[i][1] - cursor.pos),
                              cursor.generation)
    if not chunk:
        raise InstallError(f"segment {cursor.base} was deleted or compacted while it was sent")
    message = encode("seg", cursor.base, cursor.pos, chunk)
    cursor.pos += len(chunk)
    return message


_reader: ThreadPoolExecutor | None = None
_reader_lock = threading.Lock()


def _reader_pool() -> ThreadPoolExecutor:
    """The node's one snapshot reader thread (a leader's streams take turns on it)."""
    global _reader
    with _reader_lock:
        if _reader is None:
            _reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot-read")
        return _reader


class ReadAhead:
    """A leader's reads for one follower's stream, done on the reader thread ``READ_AHEAD`` chunks
    at a time, the next ones read while these are sent. While a read is in flight only it moves
    the cursor's place (``base``, ``pos``)."""

    def __init__(self, data: DataLog, cursor: StreamCursor) -> None:
        self._data, self._cursor = data, cursor
        self._ready: deque[bytes] = deque()
        self._job: Future[tuple[list[bytes], int | None]] | None = None
        self._read_to: int | None = None  # the end offset everything was read up to, if it was

    def next(self, end: int) -> bytes | None:
        """The stream's next message, ``NOT_READY`` while it is read, None once everything below
        ``end`` was handed out. Raises InstallError when the stream must start over."""
        job = self._job
        if job is not None and job.done():
            self._job = None
            pieces, self._read_to = job.result()
            self._ready.extend(pieces)
        if self._job is None and self._read_to != end and len(self._ready) < READ_AHEAD:
            self._job = _reader_pool().submit(self._read, end)
        if self._ready:
            return self._ready.popleft()
        return NOT_READY if self._job is not None else None

    def _read(self, end: int) -> tuple[list[bytes], int | None]:
        pieces: list[bytes] = []
        for _ in range(READ_AHEAD):
            try:
                piece = next_chunk(self._data, end, self._cursor)
            except (OSError, ValueError) as e:
                if self._data.closed:  # its topic deleted under the read: the stream has no end
                    raise InstallError(f"the log was closed: {type(e).__name__}: {e}") from e
                fail_stop("data_log", f"{self._data.directory}: reading a snapshot stream failed: "
                          f"{type(e).__name__}: {e}")
            if piece is None:
                return pieces, end
            pieces.append(piece)
        return pieces, None


@dataclass
class SnapshotInstall:
    """A follower's staging copy of the leader's log, built chunk by chunk on a thread of its own:
    ``feed`` hands a chunk over (and raises what an earlier one failed with), ``finish`` waits for
    what is queued, then checks the copy and puts it in place."""

    target: DataLog
    first_base: int
    total: int  # the bytes to come: refused at once if the disk cannot hold them twice over
    staging: DataLog = field(init=False)
    _base: int = field(init=False)  # the segment the next chunk must continue, and where
    _pos: int = field(init=False, default=0)
    _carry: bytearray = field(init=False, default_factory=bytearray)
    _unsynced: int = field(init=False, default=0)
    _error: BaseException | None = field(init=False, default=None)  # the first chunk that failed
    _jobs: queue.Queue[tuple[int, int, bytes] | None] = field(init=False)
    _thread: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        path = self.target.directory + INSTALL_SUFFIX
        shutil.rmtree(path, ignore_errors=True)
        free = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free
        if free < self.total + DISK_MARGIN:  # a full disk would stop the node (and again after it restarts)
            raise InstallError(f"{free} bytes free, the copy needs {self.total} and {DISK_MARGIN} to spare")
        self.staging = DataLog(path, **self.target.settings())
        self.staging.reset_to(self.first_base, b"", {}, None)
        self._base = self.first_base
        self._jobs = queue.Queue(maxsize=QUEUE_PIECES)
        self._thread = threading.Thread(target=self._work, daemon=True,
                                        name=f"install:{os.path.basename(self.target.directory)}")
        self._thread.start()

    def feed(self, base: int, pos: int, chunk: bytes) -> None:
        """Queue a chunk (waiting only while ``QUEUE_PIECES`` are queued: a disk slower than the link)."""
        self._raise_failed()
        self._jobs.put((base, pos, chunk))

    def _raise_failed(self) -> None:
        e = self._error
        if isinstance(e, InstallError):
            raise e
        if e is not None:
            raise InstallError(f"{type(e).__name__}: {e}") from e

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                if self._error is None:
                    self._write(*job)
            except BaseException as e:  # noqa: BLE001 - handed to the loop by the next feed or finish
                self._error = e
            finally:
                self._jobs.task_done()

    def _write(self, base: int, pos: int, chunk: bytes) -> None:
        if base != self._base:  # the next segment: it starts where the last one's batches ended
            if pos != 0 or self._carry or base != self.staging.log_end_offset:
                raise InstallError(f"segment {base} does not follow on (log end {self.staging.log_end_offset})")
            self._base, self._pos = base, 0
        if pos != self._pos:
            raise InstallError(f"segment {base}: chunk at {pos}, expected {self._pos}")
        self._pos += len(chunk)
        carry = self._carry
        carry += chunk
        at, view, checked = 0, memoryview(carry), []
        try:
            while len(carry) - at >= HEADER_SIZE:
                hdr = parse_header(view, at)
                if hdr.magic != 2 or not HEADER_SIZE <= hdr.size <= MAX_BATCH_BYTES:
                    raise InstallError(f"segment {base}: not a batch at byte {self._pos - len(carry) + at}")
                if len(carry) - at < hdr.size:
                    break
                if crc32c(view[at + ATTRIBUTES_OFFSET : at + hdr.size]) != hdr.crc:
                    raise InstallError(f"segment {base}: the batch at offset {hdr.base_offset} fails its CRC")
                checked.append(hdr)
                at += hdr.size
            if checked:  # written in one go (one write per segment), offsets checked as they go
                run = bytearray(view[:at])
                restamp(run, checked)  # a leader of an earlier release sends fence epochs: stored as terms
                self.staging.append_run(checked, bytes(run))
        except ValueError as e:
            raise InstallError(f"segment {base}: {e}") from e
        finally:
            view.release()
        del carry[:at]
        self._unsynced += len(chunk)
        if self._unsynced >= SYNC_BYTES:  # here, not all at the end on the loop (a failed fsync stops the node)
            self.staging.sync()
            self._unsynced = 0

    def _stop(self) -> None:
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join()

    def finish(self, manifest: dict[str, Any]) -> None:
        """Check the copy against the snapshot and put it in the partition's place."""
        self._stop()  # what is still queued is written first
        self._raise_failed()
        if self._carry or self.staging.log_end_offset != int(manifest["end"]):
            raise InstallError(f"the copy ends at {self.staging.log_end_offset} with {len(self._carry)} bytes "
                               f"left over; the snapshot at {manifest['end']}")
        self.staging.load_state(manifest["producers"], manifest.get("txns"))
        self.staging.delete_records(int(manifest.get("start", 0)))  # where DeleteRecords moved it
        self.staging.sync()  # (rolled segments were at their roll) a failed fsync stops the node
        self.staging.close()
        self.target.adopt(self.staging.directory)

    def abort(self) -> None:
        if self._error is None:
            self._error = InstallError("aborted")  # the thread skips whatever is still queued
        self._stop()
        path = self.staging.directory
        self.staging.close()
        shutil.rmtree(path, ignore_errors=True)


def drain_reads() -> None:
    """Wait until the reads queued on the reader thread are done (a test's disk as fast as the loop)."""
    _reader_pool().submit(lambda: None).result()
