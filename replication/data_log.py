"""One topic partition's storage: v2 record batches in on-disk segments.

Files in the partition directory:

* ``<base_offset:020d>.log`` — batches, back to back, as clients receive them.
* ``<base_offset:020d>.index`` — a sparse index: fixed 24-byte entries
  ``(offset int64, position int64, max_timestamp_before int64)``, one every
  ``index_interval_bytes`` of log, so a fetch seeks near its offset and scans at most
  one interval. ``max_timestamp_before`` lets a reopen recover the segment's largest
  timestamp by scanning only the bytes after the last entry.
* ``producer.snapshot`` — idempotent-producer state (msgpack) valid up to an offset,
  written at every roll and on close; a reopen replays batch headers after it.

Memory per segment is the sparse index only. On open every segment scans the bytes
after its last index entry, validating each batch (length + CRC); the first bad batch
and everything after it is a torn tail and is truncated (then later segments, which a
torn write cannot have produced, are kept only if the offsets still line up).

The caller (the partition leader) assigns offsets; :meth:`DataLog.append` takes a batch
whose ``baseOffset`` already equals :attr:`log_end_offset`.
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import struct
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

import msgpack

from replication import segment_swap
from replication.compacted import DEFAULT_POLICY, cleanup_policies, plain_records
from replication.durable import append_at, fsync_dir, renamed, sync, write_durably
from replication.failstop import EXIT_CORRUPT, fail_stop
from replication.leader_epochs import LeaderEpochs, restamp, term_of
from replication.log_cleaner import CleanStats
from replication.record_batch import (
    ATTR_TIMESTAMP_TYPE,
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    PARTITION_LEADER_EPOCH_OFFSET,
    BatchHeader,
    InvalidBatchError,
    crc32c,
    decode_body,
    decode_records,
    iter_batches,
    parse_header,
)
from replication.txn_index import PartitionTxns, read_marker

log = logging.getLogger("kcoord.replication.data_log")
_pread = os.pread  # by name, so tests can watch reads

START_FILE = "log-start-offset"  # where DeleteRecords moved the log start (Kafka's log-start-offset checkpoint)
MANIFEST_VERSION = 1  # of a data partition's Raft snapshot (``manifest``); none: version 0, or the old blob
CLEAN_SHUTDOWN = "clean-shutdown"  # written by a clean close: the active segment was fsync'd
_IDX = struct.Struct(">qqq")
PRODUCER_WINDOW = 5  # Kafka caches the metadata of the last 5 batches per producer
TERMS_FILE = "leader-epochs-are-terms"  # every batch's partitionLeaderEpoch is its leader's Raft term
CLEANED_TO_FILE = "cleaner-offset"  # how far compaction has cleaned (Kafka's cleaner-offset-checkpoint)
HORIZON_FILE = "cleaner-horizon"  # when the next kept delete's horizon passes (a pass is due then)
LONG_MAX = (1 << 63) - 1
# a compressed batch inflated to find its record of the largest timestamp: at most this much
MAX_TIMESTAMP_SEARCH_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class Compaction:
    """A topic's compaction settings (Kafka's topic configs, its defaults)."""

    delete_retention_ms: int = 86_400_000
    min_lag_ms: int = 0  # min.compaction.lag.ms
    max_lag_ms: int = LONG_MAX  # max.compaction.lag.ms: a dirty segment this old is cleaned whatever the ratio
    min_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    segment_ms: int = 604_800_000  # segment.ms: the active segment rolls at an append past this age
INT32_MAX = (1 << 31) - 1


class OffsetOutOfRangeError(Exception):
    pass


INSTALL_SUFFIX = ".install"  # a snapshot being installed, beside the partition's directory
OLD_SUFFIX = ".replaced"  # the partition's directory while an installed one takes its place


def settle_install(directory: str) -> None:
    """After a crash during a snapshot install, one whole log stays: a staging copy goes; a swap
    cut between its two renames is undone (the Raft snapshot naming the new copy is written only
    after the swap, so the old log still matches the snapshot on disk), even when the partition's
    directory was made again meanwhile (it then holds no segment); one cut after them keeps the
    new log (which holds everything the old snapshot names). Called before anything else opens
    or claims the directory."""
    shutil.rmtree(directory + INSTALL_SUFFIX, ignore_errors=True)
    old = directory + OLD_SUFFIX
    if not os.path.isdir(old):
        return
    has_log = os.path.isdir(directory) and any(f.endswith(".log") for f in os.listdir(directory))
    if has_log:
        shutil.rmtree(old, ignore_errors=True)
        return
    shutil.rmtree(directory, ignore_errors=True)
    os.replace(old, directory)  # cut before the installed copy was renamed in: keep the old one
    fsync_dir(directory)


def sweep_installs(root: str) -> None:
    """At start, no install is in progress: every staging copy under ``root`` goes (those of
    partitions deleted since would stay for ever; ``settle_install`` takes care of the others')."""
    for name in os.listdir(root):
        if name.endswith(INSTALL_SUFFIX):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def _copy_durably(src: str, dst: str) -> None:
    with open(src, "rb") as fh:
        data = fh.read()
    with open(dst, "wb") as fh:
        fh.write(data)
        fh.flush()
        sync(fh.fileno())


def _now_ms() -> int:
    return int(time.time() * 1000)


class _Segment:
    """One segment file plus its sparse index (only the index is held in memory)."""

    def __init__(self, directory: str, base: int, index_interval: int) -> None:
        self.base = base
        self.log_path = os.path.join(directory, f"{base:020d}.log")
        self.idx_path = os.path.join(directory, f"{base:020d}.index")
        self.index_interval = index_interval
        self.idx_offsets = array("q")
        self.idx_positions = array("q")
        self.idx_maxts = array("q")
        self.size = 0
        self.next_offset = base
        self.max_timestamp = -1
        self.max_timestamp_offset = -1
        self.first_timestamp = -1  # the first batch's largest timestamp (segment.ms counts from it)
        self.generation = 0  # compactions that replaced this segment's file (a stream reading it starts over)
        self.bytes_since_index = 0
        # Unbuffered: appends go straight to the file (replication.durable.append_at), and a read buffer
        # would serve bytes of a tail that recovery truncated and a new batch overwrote.
        self.fh = open(self.log_path, "a+b", buffering=0)  # noqa: SIM115 - lives as long as the segment
        self.idx_fh = open(self.idx_path, "a+b", buffering=0)  # noqa: SIM115

    # -- recovery -------------------------------------------------------------------

    def recover(self, verify_all: bool = False) -> int:
        """Load the index, scan the tail, truncate a torn tail. Returns bytes dropped.

        ``verify_all``: the segment may hold bytes that never reached the disk (the node did not
        shut down cleanly and the segment was never fsync'd): a power loss can leave zeros or
        stale pages anywhere after its last fsync, under index entries that did reach it, so the
        index is rebuilt from a scan that checks every batch's CRC, and the log ends at the first
        bad batch whatever follows it (as Kafka recovers a segment after an unclean shutdown;
        a replica's journal holds what came after, and its leader the rest)."""
        self.fh.seek(0, os.SEEK_END)
        file_size = self.fh.tell()
        self.idx_fh.seek(0)
        raw = b"" if verify_all else self.idx_fh.read()
        n = len(raw) // _IDX.size
        valid = 0
        for i in range(n):
            off, pos, mts = _IDX.unpack_from(raw, i * _IDX.size)
            if pos >= file_size or (valid and off <= self.idx_offsets[-1]):
                break
            self.idx_offsets.append(off)
            self.idx_positions.append(pos)
            self.idx_maxts.append(mts)
            valid += 1
        if verify_all or valid * _IDX.size != len(raw):
            self.idx_fh.truncate(valid * _IDX.size)
        if valid:
            pos, self.max_timestamp, self.next_offset = self.idx_positions[-1], self.idx_maxts[-1], self.idx_offsets[-1]
            last_index_pos = pos
            first = self._read_valid_header(0, file_size)
            self.first_timestamp = first.max_timestamp if first is not None else -1
        else:
            pos, last_index_pos = 0, 0
        while pos < file_size:
            hdr = self._read_valid_header(pos, file_size)
            if hdr is None or hdr.base_offset < self.next_offset:
                if not verify_all:  # unsynced pages reach the disk in any order: a hole may have valid batches after it
                    self._refuse_if_corrupt_inside(pos, file_size)
                break
            if verify_all:
                self._index(hdr, pos)
            self._track(hdr)
            pos += hdr.size
            self.bytes_since_index += hdr.size
        self.size = pos
        if not verify_all:
            self.bytes_since_index = pos - last_index_pos
        dropped = file_size - pos
        if dropped:
            log.warning("event=segment_torn_tail path=%s truncated_bytes=%d", self.log_path, dropped)
            self.fh.truncate(pos)
        return dropped

    def _refuse_if_corrupt_inside(self, pos: int, file_size: int) -> None:
        """A bad batch is a torn tail only if nothing valid follows it. If its length field
        still leads to a valid batch, the damage is in the middle of acknowledged data: refuse
        to start (truncating would throw away every batch after it)."""
        self.fh.seek(pos)
        head = self.fh.read(HEADER_SIZE)
        if len(head) < HEADER_SIZE:
            return
        size = parse_header(head).size
        if size <= 0 or pos + size >= file_size:
            return
        nxt = self._read_valid_header(pos + size, file_size)
        if nxt is not None:
            fail_stop("data_log", f"{self.log_path}: the batch at byte {pos} fails its CRC and valid batches "
                      f"follow it (from offset {nxt.base_offset}): the segment is corrupt in the middle; "
                      "refusing to start", EXIT_CORRUPT)

    def _read_valid_header(self, pos: int, file_size: int) -> BatchHeader | None:
        self.fh.seek(pos)
        head = self.fh.read(HEADER_SIZE)
        if len(head) < HEADER_SIZE:
            return None
        hdr = parse_header(head)
        if hdr.magic < 2 or hdr.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + hdr.size > file_size:
            return None
        self.fh.seek(pos + ATTRIBUTES_OFFSET)
        body = self.fh.read(hdr.size - ATTRIBUTES_OFFSET)
        if crc32c(body) != hdr.crc:
            return None
        if hdr.magic > 2:  # whole and checked: a later format, not a torn tail to cut off
            fail_stop("data_log", f"{self.log_path}: the batch at byte {pos} is of magic {hdr.magic}; this build "
                      "reads magic 2: written by a newer release (downgrades are not supported); refusing to "
                      "start", EXIT_CORRUPT)
        return hdr

    def _track(self, hdr: BatchHeader) -> None:
        if self.first_timestamp < 0:
            self.first_timestamp = hdr.max_timestamp
        if hdr.max_timestamp > self.max_timestamp:
            self.max_timestamp = hdr.max_timestamp
            self.max_timestamp_offset = hdr.base_offset
        self.next_offset = hdr.next_offset

    # -- writes ------------------------------------------------------------------------

    def append(self, hdr: BatchHeader, batch: bytes) -> None:
        pos = self.size
        append_at(self.fh.fileno(), batch, pos, "data_log", self.log_path)
        self._index(hdr, pos)
        self.size += len(batch)
        self.bytes_since_index += len(batch)
        self._track(hdr)

    def append_run(self, headers: list[BatchHeader], data: bytes | memoryview) -> None:
        """``append`` of consecutive batches (``data`` holds them all) in one write."""
        append_at(self.fh.fileno(), data, self.size, "data_log", self.log_path)
        for hdr in headers:
            self._index(hdr, self.size)
            self.size += hdr.size
            self.bytes_since_index += hdr.size
            self._track(hdr)

    # -- reads ---------------------------------------------------------------------------

    def _index(self, hdr: BatchHeader, pos: int) -> None:
        """A sparse index entry for the batch at ``pos``, every ``index_interval`` bytes."""
        if pos == 0 or self.bytes_since_index >= self.index_interval:
            entry = _IDX.pack(hdr.base_offset, pos, self.max_timestamp)
            append_at(self.idx_fh.fileno(), entry, len(self.idx_offsets) * _IDX.size, "data_log", self.idx_path)
            self.idx_offsets.append(hdr.base_offset)
            self.idx_positions.append(pos)
            self.idx_maxts.append(self.max_timestamp)
            self.bytes_since_index = 0

    def sync(self) -> None:
        sync(self.fh.fileno())
        sync(self.idx_fh.fileno())

    def iter_headers(self, from_offset: int) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of batches whose last offset is >= ``from_offset``."""
        i = bisect.bisect_right(self.idx_offsets, from_offset) - 1
        pos = self.idx_positions[i] if i >= 0 else 0
        while pos + HEADER_SIZE <= self.size:
            self.fh.seek(pos)
            hdr = parse_header(self.fh.read(HEADER_SIZE))
            if hdr.last_offset >= from_offset:
                yield pos, hdr
            pos += hdr.size

    def read_at(self, pos: int, n: int) -> bytes:
        self.fh.seek(pos)
        return self.fh.read(n)

    def close(self) -> None:
        self.fh.close()
        self.idx_fh.close()

    def delete(self) -> None:
        self.close()
        for p in (self.log_path, self.idx_path):
            try:
                os.remove(p)
            except FileNotFoundError:
                pass


class SeqResult(Enum):
    OK = "ok"
    DUPLICATE = "duplicate"  # exact resend of a cached batch: success with its offset
    DUPLICATE_SEQUENCE = "duplicate_sequence"  # an older sequence outside the cache
    OUT_OF_ORDER = "out_of_order"
    FENCED = "fenced"  # an older producer epoch


@dataclass(frozen=True, slots=True)
class SeqCheck:
    result: SeqResult
    base_offset: int = -1
    timestamp: int = -1


@dataclass(slots=True)
class _ProducerEntry:
    epoch: int
    # (first_seq, last_seq, base_offset, last_offset, max_timestamp)
    batches: deque[tuple[int, int, int, int, int]]


class ProducerStateManager:
    """Idempotent-producer state of one partition: the last 5 batches per producer id."""

    def __init__(self) -> None:
        self.producers: dict[int, _ProducerEntry] = {}

    def check(self, pid: int, epoch: int, first_seq: int, last_seq: int) -> SeqCheck:
        if pid == NO_PRODUCER_ID:
            return SeqCheck(SeqResult.OK)
        entry = self.producers.get(pid)
        if entry is None:
            # Unknown producer (new, or its state expired): accept what it sends.
            return SeqCheck(SeqResult.OK)
        if epoch < entry.epoch:
            return SeqCheck(SeqResult.FENCED)
        if not entry.batches:  # only its epoch is known (from a marker): any sequence starts it
            return SeqCheck(SeqResult.OK)
        if epoch > entry.epoch:
            # A bumped epoch restarts sequences at 0.
            return SeqCheck(SeqResult.OK if first_seq == 0 else SeqResult.OUT_OF_ORDER)
        for fs, ls, base, _last, ts in entry.batches:
            if fs == first_seq and ls == last_seq:
                return SeqCheck(SeqResult.DUPLICATE, base, ts)
        expected = (entry.batches[-1][1] + 1) % (INT32_MAX + 1)
        if first_seq == expected:
            return SeqCheck(SeqResult.OK)
        oldest = entry.batches[0][0]
        if _seq_before(first_seq, oldest) or _seq_before(first_seq, expected):
            return SeqCheck(SeqResult.DUPLICATE_SEQUENCE)
        return SeqCheck(SeqResult.OUT_OF_ORDER)

    def update(self, hdr: BatchHeader) -> None:
        if hdr.producer_id == NO_PRODUCER_ID or hdr.base_sequence < 0:
            return
        entry = self.producers.get(hdr.producer_id)
        if entry is None or hdr.producer_epoch != entry.epoch:
            entry = _ProducerEntry(hdr.producer_epoch, deque(maxlen=PRODUCER_WINDOW))
            self.producers[hdr.producer_id] = entry
        entry.batches.append((hdr.base_sequence, hdr.last_sequence, hdr.base_offset, hdr.last_offset,
                              hdr.max_timestamp))

    def observe_epoch(self, pid: int, epoch: int) -> None:
        """A transaction marker at ``epoch``: older epochs of the producer are fenced from now on."""
        entry = self.producers.get(pid)
        if entry is None or epoch > entry.epoch:
            self.producers[pid] = _ProducerEntry(epoch, deque(maxlen=PRODUCER_WINDOW))

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers whose last batch is older than ``expiration_ms`` (Kafka's
        producer.id.expiration.ms, judged by the batch's max timestamp as Kafka does). A
        forgotten producer's next batch is accepted as a new producer's. Returns how many."""
        old = [pid for pid, e in self.producers.items()
               if not e.batches or now_ms - e.batches[-1][4] >= expiration_ms]
        for pid in old:
            del self.producers[pid]
        return len(old)

    def to_obj(self) -> dict[int, list[object]]:
        return {pid: [e.epoch, [list(b) for b in e.batches]] for pid, e in self.producers.items()}

    def load_obj(self, obj: Any) -> None:
        self.producers = {}
        for pid, (epoch, batches) in obj.items():
            dq: deque[tuple[int, int, int, int, int]] = deque(maxlen=PRODUCER_WINDOW)
            for b in batches:
                dq.append((int(b[0]), int(b[1]), int(b[2]), int(b[3]), int(b[4])))
            self.producers[int(pid)] = _ProducerEntry(int(epoch), dq)


def _seq_before(a: int, b: int) -> bool:
    """``a`` precedes ``b`` in int32 sequence space (with wraparound)."""
    diff = (b - a) % (INT32_MAX + 1)
    return 0 < diff < (1 << 30)


class ReadPlan:
    """A read located under the log's lock, executed without it. Segments only grow (recovery
    truncates before anything reads), and the plan holds duplicated descriptors, so the planned
    bytes stay readable and unchanged even if retention or a snapshot install deletes the file
    meanwhile."""

    def __init__(self, max_bytes: int, upper: int | None, min_one: bool) -> None:
        self.budget = max_bytes
        self.upper = upper
        self.min_one = min_one
        self.ranges: list[tuple[int, int, int]] = []  # (fd, start, end) per segment
        self.planned = 0

    @property
    def size(self) -> int:
        """Bytes the read may cost (an upper bound, for choosing where to run it)."""
        return min(self.planned, self.budget)

    def execute(self) -> bytes:
        """Read the planned bytes and cut them at whole batches. Closes the descriptors."""
        chunks: list[bytes] = []
        left = self.budget
        try:
            for fd, start, end in self.ranges:
                if left <= 0:
                    break
                raw = _pread(fd, min(end - start, left), start)
                keep = self._whole_batches(raw)
                chunks.append(raw[:keep] if keep < len(raw) else raw)
                left -= keep
                if start + keep < end:
                    break  # stopped before this segment's end: later segments come after it
        finally:
            self.close()
        return b"".join(chunks)

    def _whole_batches(self, raw: bytes) -> int:
        pos = 0
        while pos + HEADER_SIZE <= len(raw):
            hdr = parse_header(raw, pos)
            if pos + hdr.size > len(raw) or (self.upper is not None and hdr.base_offset >= self.upper):
                break
            pos += hdr.size
        return pos

    def close(self) -> None:
        for fd, _s, _e in self.ranges:
            os.close(fd)
        self.ranges = []


class DataLog:
    """Segments of one partition plus its producer state; single writer, synchronous I/O."""

    def __init__(
        self,
        directory: str,
        *,
        segment_bytes: int = 1 << 30,
        retention_ms: int = 7 * 24 * 3600 * 1000,
        retention_bytes: int = -1,
        cleanup_policy: str = DEFAULT_POLICY,
        index_interval_bytes: int = 4096,
        clock: Callable[[], int] = _now_ms,
        compaction: Compaction = Compaction(),
    ) -> None:
        self.directory = directory
        self.compaction = compaction
        self.segment_bytes = segment_bytes
        self.retention_ms = retention_ms  # -1: for ever
        self.retention_bytes = retention_bytes  # -1: no bound
        self.cleanup_policy = cleanup_policies(cleanup_policy)  # the topic's cleanup.policy
        self.index_interval_bytes = index_interval_bytes
        self.clock = clock
        self.producer_state = ProducerStateManager()
        self.txns = PartitionTxns()  # open and aborted transactions, the last stable offset
        self.epochs = LeaderEpochs()  # each leader epoch's first offset (OffsetForLeaderEpoch)
        # Raft applies batches on the event loop while a snapshot install reads or writes on a thread: one lock.
        self.lock = threading.RLock()
        self.closed = False  # a reader on another thread (a snapshot stream) tells this from a failing disk
        self._segments: list[_Segment] = []
        self._bases: list[int] = []
        self._start_floor = 0  # DeleteRecords: the log starts here at the earliest (START_FILE)
        # when a tombstone or marker a pass kept may go (a pass is due then, dirty or not; 0: not
        # known, so the first chance is taken); kept in HORIZON_FILE, read when the log opens
        self._horizon_due = 0
        settle_install(directory)
        os.makedirs(directory, exist_ok=True)
        self._open()

    def reconfigure(self, *, segment_bytes: int, retention_ms: int, retention_bytes: int, cleanup_policy: str,
                    compaction: Compaction = Compaction()) -> None:
        """The topic's settings altered (IncrementalAlterConfigs): they hold from the next append
        (a segment rolls at the new size) and the next retention or compaction run on."""
        with self.lock:
            self.compaction = compaction
            self.segment_bytes = segment_bytes
            self.retention_ms = retention_ms
            self.retention_bytes = retention_bytes
            self.cleanup_policy = cleanup_policies(cleanup_policy)

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def _clean_path(self) -> str:
        return os.path.join(self.directory, CLEAN_SHUTDOWN)

    def _open(self) -> None:
        # Rolled segments were fsync'd when they rolled; the active one was only if the last
        # close was clean (the marker): otherwise every batch of it is checked.
        clean = os.path.exists(self._clean_path)
        if clean:
            os.remove(self._clean_path)
            fsync_dir(self._clean_path)
        segment_swap.settle_swaps(self.directory)  # a compaction a crash interrupted: as before, or as after
        bases = sorted(int(f[:-4]) for f in os.listdir(self.directory) if f.endswith(".log") and f[:-4].isdigit())
        for f in os.listdir(self.directory):  # orphan index files
            if f.endswith(".index") and f[:-6].isdigit() and int(f[:-6]) not in bases:
                os.remove(os.path.join(self.directory, f))
        expected: int | None = None
        for i, base in enumerate(bases):
            seg = _Segment(self.directory, base, self.index_interval_bytes)
            if expected is not None and base != expected:
                # Offsets no longer line up (earlier segment lost its tail): drop the rest.
                log.warning("event=segment_dropped dir=%s base=%d expected=%d", self.directory, base, expected)
                seg.delete()
                for later in bases[i + 1 :]:
                    _Segment(self.directory, later, self.index_interval_bytes).delete()
                break
            dropped = seg.recover(verify_all=not clean and i == len(bases) - 1)
            if dropped:
                log.warning("event=torn_tail_truncated dir=%s segment=%d dropped_bytes=%d",
                            self.directory, base, dropped)
            self._segments.append(seg)
            self._bases.append(base)
            expected = seg.next_offset
        if not self._segments:
            self._new_segment(0)
        if not os.path.exists(os.path.join(self.directory, TERMS_FILE)):
            self._restamp_terms()
        self._start_floor = self._read_start_floor()
        self._horizon_due = self._read_offset_file(HORIZON_FILE)
        self._load_producer_state()

    def _restamp_terms(self) -> None:
        """Once per log: batches an earlier release stamped with its leader's fence epoch (``term *
        EPOCH_STRIDE + n``, past what Kafka's clients take as an epoch) get the term instead. The
        field is outside the CRC; an interrupted pass is done again at the next open."""
        for seg in self._segments:
            fd = -1
            try:
                for pos, hdr in seg.iter_headers(seg.base):
                    if hdr.partition_leader_epoch != term_of(hdr.partition_leader_epoch):
                        if fd < 0:
                            fd = os.open(seg.log_path, os.O_WRONLY)
                        os.pwrite(fd, struct.pack(">i", term_of(hdr.partition_leader_epoch)),
                                  pos + PARTITION_LEADER_EPOCH_OFFSET)
                if fd >= 0:
                    os.fsync(fd)
            except OSError as e:
                fail_stop("data_log", f"{seg.log_path}: restamping leader epochs failed: {type(e).__name__}: {e}")
            finally:
                if fd >= 0:
                    os.close(fd)
        write_durably(os.path.join(self.directory, TERMS_FILE), b"1")

    def _new_segment(self, base: int) -> _Segment:
        seg = _Segment(self.directory, base, self.index_interval_bytes)
        self._segments.append(seg)
        self._bases.append(base)
        return seg

    def close(self) -> None:
        """A clean close: the active segment is fsync'd, then marked clean, so the next open
        trusts its index instead of checking every batch. Under the lock: a snapshot stream's
        reader thread never reads a descriptor closed (and reused) under it."""
        with self.lock:
            self.closed = True
            self._save_producer_state()
            try:
                if self._segments:
                    self._segments[-1].sync()
                with open(self._clean_path, "wb") as fh:
                    sync(fh.fileno())
            except OSError as e:
                log.warning("event=clean_close_failed dir=%s error=%r", self.directory, str(e))
            for seg in self._segments:
                seg.close()

    # -- producer state snapshots ----------------------------------------------------------

    @property
    def _snapshot_path(self) -> str:
        return os.path.join(self.directory, "producer.snapshot")

    def _save_producer_state(self) -> None:
        tmp = self._snapshot_path + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(msgpack.packb({"offset": self.log_end_offset, "producers": self.producer_state.to_obj(),
                                    "txns": self.txns.to_obj(), "epochs": self.epochs.to_obj()}, use_bin_type=True))
        os.replace(tmp, self._snapshot_path)
        renamed(tmp, self._snapshot_path)  # never fsync'd: a power loss may keep it or not

    def _load_producer_state(self) -> None:
        # From the first byte still on disk, not the log start DeleteRecords set: a batch that
        # straddles it, and the producer snapshot of the last roll below it, still count
        # (fencing, duplicates, aborted transactions a read_committed reader must skip).
        start = self._physical_start
        self.epochs = LeaderEpochs()
        rescanned = False
        try:
            with open(self._snapshot_path, "rb") as fh:
                snap = msgpack.unpackb(fh.read(), raw=False, strict_map_key=False)
            if start <= int(snap["offset"]) <= self.log_end_offset:
                self.producer_state.load_obj(snap["producers"])
                self.txns = PartitionTxns.from_obj(snap.get("txns"))
                if "epochs" in snap:
                    self.epochs = LeaderEpochs.from_obj(snap["epochs"])
                else:  # a snapshot from before epochs were kept: read from the batches below, once
                    self._scan_epochs(int(snap["offset"]))
                    rescanned = True
                start = int(snap["offset"])
        except (FileNotFoundError, ValueError, KeyError, TypeError, msgpack.UnpackException):
            self.producer_state, self.txns, self.epochs = ProducerStateManager(), PartitionTxns(), LeaderEpochs()
            rescanned = self.log_end_offset > start
        for seg, pos, hdr in self._iter_headers(start):
            if hdr.base_offset >= start:
                self.producer_state.update(hdr)
                self.epochs.observe(hdr.partition_leader_epoch, hdr.base_offset)
                if hdr.is_transactional:
                    self._track_txn(hdr, seg.read_at(pos, hdr.size) if hdr.is_control else b"")
        self.epochs.trim_before(self.log_start_offset)
        if self.txns.aborted and self.cleaned_to():
            # a snapshot from before a compaction removed some ABORT markers: as forget_markers
            # did then, readers are not told of those aborts
            self.txns.forget_markers({e.last_offset for e in self.txns.aborted if not self._control_at(e.last_offset)})
        if rescanned:
            self._save_producer_state()  # with the epochs: the next open reads them from it, not the batches

    def _scan_epochs(self, end: int) -> None:
        """The leader epochs of the batches below ``end``, read from their headers."""
        self.epochs = LeaderEpochs()
        for _seg, _pos, hdr in self._iter_headers(self._physical_start):
            if hdr.base_offset >= end:
                break
            self.epochs.observe(hdr.partition_leader_epoch, hdr.base_offset)

    def leader_epoch_end(self, requested: int, current: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) for ``requested``, ``current`` being the
        leader's own epoch (``LeaderEpochs.end_offset_for``)."""
        with self.lock:
            return self.epochs.end_offset_for(requested, current, self.log_end_offset)

    def epoch_at(self, offset: int) -> int:
        with self.lock:
            return self.epochs.epoch_at(offset)

    def _control_at(self, offset: int) -> bool:
        for _seg, _pos, hdr in self._iter_headers(offset):
            return hdr.base_offset == offset and hdr.is_control
        return False

    # -- offsets ----------------------------------------------------------------------------

    @property
    def _physical_start(self) -> int:
        return self._segments[0].base if self._segments[0].size else self._segments[0].next_offset

    @property
    def log_start_offset(self) -> int:
        return max(self._physical_start, min(self._start_floor, self.log_end_offset))

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: the log starts at ``offset`` (at most its end) from now on; whole
        segments below it go at once, the rest of the first one stays on disk unread. Kept in
        ``START_FILE`` (and in snapshots' ``start``). Returns the log start offset."""
        with self.lock:
            offset = min(offset, self.log_end_offset)
            if offset > self.log_start_offset:
                self._start_floor = offset
                self._write_start_floor(offset)
                while len(self._segments) > 1 and self._segments[1].base <= offset:
                    self._delete_oldest()
                self.txns.forget_before(self.log_start_offset)
                self.epochs.trim_before(self.log_start_offset)
                log.info("event=records_deleted dir=%s log_start_offset=%d", self.directory, self.log_start_offset)
            return self.log_start_offset

    def _read_offset_file(self, name: str) -> int:
        """The offset a checkpoint file of the log holds: 0 if there is none, or (with a warning)
        if it cannot be read (the log start comes back from the Raft log, its entry or the
        snapshot's start; the cleaner's offset by counting every segment dirty)."""
        try:
            with open(os.path.join(self.directory, name), encoding="ascii") as fh:
                return max(0, int(fh.read().strip()))
        except FileNotFoundError:
            return 0
        except (OSError, ValueError) as e:
            log.warning("event=offset_file_unreadable dir=%s file=%s error=%r", self.directory, name, str(e))
            return 0

    def _read_start_floor(self) -> int:
        return self._read_offset_file(START_FILE)

    def _write_start_floor(self, offset: int) -> None:
        write_durably(os.path.join(self.directory, START_FILE), str(offset).encode("ascii"))

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        # Only committed batches are applied here, so everything is below the HW.
        return self.log_end_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in list(self._segments))  # a copy: an install may swap the list meanwhile

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    # -- writes -------------------------------------------------------------------------------

    def _check_sequence_unlocked(self, producer_id: int, producer_epoch: int, first_seq: int, last_seq: int) -> SeqCheck:
        return self.producer_state.check(producer_id, producer_epoch, first_seq, last_seq)

    def _append_unlocked(self, batch: bytes) -> BatchHeader:
        """Append one offset-assigned batch (its baseOffset must be the log end offset)."""
        hdr = parse_header(batch)
        if hdr.size != len(batch):
            raise InvalidBatchError("batch length does not match its bytes")
        if hdr.base_offset != self.log_end_offset:
            raise ValueError(f"batch base offset {hdr.base_offset} != log end offset {self.log_end_offset}")
        active = self._segments[-1]
        if active.size > 0 and (active.size + len(batch) > self.segment_bytes or self._aged(active, hdr)):
            active = self.roll()
        active.append(hdr, batch)
        self.producer_state.update(hdr)
        self.epochs.observe(hdr.partition_leader_epoch, hdr.base_offset)
        if hdr.is_transactional:
            self._track_txn(hdr, batch)
        return hdr

    def _append_run_unlocked(self, headers: list[BatchHeader], data: bytes) -> None:
        """``_append_unlocked`` of checked batches in offset order, one write per segment they land
        in; a batch may start past the log end (a compacted log's copy has gaps)."""
        at = i = 0
        while i < len(headers):
            active = self._segments[-1]
            if active.size > 0 and (active.size + headers[i].size > self.segment_bytes or self._aged(active, headers[i])):
                active = self.roll()
            j, size, expect = i, active.size, self.log_end_offset
            while j < len(headers) and (size == 0 or size + headers[j].size <= self.segment_bytes):
                if headers[j].base_offset < expect:
                    raise ValueError(f"batch base offset {headers[j].base_offset} < log end offset {expect}")
                size, expect = size + headers[j].size, headers[j].next_offset
                j += 1
            n = size - active.size
            active.append_run(headers[i:j], memoryview(data)[at : at + n])
            for hdr in headers[i:j]:
                self.producer_state.update(hdr)
                self.epochs.observe(hdr.partition_leader_epoch, hdr.base_offset)
                if hdr.is_transactional:
                    self._track_txn(hdr, data[at : at + hdr.size])
                at += hdr.size
            i = j

    def _track_txn(self, hdr: BatchHeader, batch: bytes) -> None:
        kind, coordinator_epoch = None, -1
        if hdr.is_control:
            kind, coordinator_epoch = read_marker(batch) or (None, -1)
            # A marker carries the producer's latest epoch (a fenced producer's abort bumps it).
            self.producer_state.observe_epoch(hdr.producer_id, hdr.producer_epoch)
        self.txns.update(hdr, kind, coordinator_epoch)

    def _aged(self, seg: _Segment, hdr: BatchHeader) -> bool:
        """segment.ms, as Kafka counts it at an append: from the segment's first batch's
        timestamp to the new batch's (record time, not the clock: old timestamps roll nothing)."""
        return 0 <= seg.first_timestamp and hdr.max_timestamp - seg.first_timestamp > self.compaction.segment_ms

    def roll(self) -> _Segment:
        if self._segments:  # a rolled segment is trusted on open: it must be on disk
            try:
                self._segments[-1].sync()
            except OSError as e:
                fail_stop("data_log", f"{self._segments[-1].log_path}: fsync failed: {type(e).__name__}: {e}")
        seg = self._new_segment(self.log_end_offset)
        self._save_producer_state()
        return seg

    def _enforce_retention_unlocked(self) -> int:
        """Delete whole old segments past retention.ms / retention.bytes; returns count."""
        if "delete" not in self.cleanup_policy:
            return 0  # compact only: Kafka applies no time or size retention to such a topic
        deleted = 0
        now = self.clock()
        if self.retention_ms >= 0:
            while self._segments and self._segments[0].size:
                seg = self._segments[0]
                ts = seg.max_timestamp if seg.max_timestamp >= 0 else int(os.path.getmtime(seg.log_path) * 1000)
                if now - ts <= self.retention_ms:
                    break
                if len(self._segments) == 1:
                    self.roll()
                self._delete_oldest()
                deleted += 1
        if self.retention_bytes >= 0:
            total = self.size_bytes
            while len(self._segments) > 1 and total - self._segments[0].size >= self.retention_bytes:
                total -= self._segments[0].size
                self._delete_oldest()
                deleted += 1
        return deleted

    # -- compaction ------------------------------------------------------------------------------

    def compact(self, capacity: int, now_ms: int | None = None,
                run: Callable[[segment_swap.PassJob], segment_swap.PassResult] = segment_swap.run_pass,
                ) -> CleanStats | None:
        """One compaction pass (``cleanup.policy`` with ``compact``), from a cleaner thread, never
        the loop: the closed segments below the last stable offset whose newest record is
        ``min.compaction.lag.ms`` old, once their dirty share passes ``min.cleanable.dirty.ratio``
        (or a dirty one is ``max.compaction.lag.ms`` old, or a delete kept by a pass is past its
        horizon). ``run`` does the pass (``segment_swap.run_pass``: the node runs it in a process of
        its own); its copies are swapped in here, each under the lock. None if there was nothing
        to do. ``capacity``: keys the pass's map may hold."""
        if "compact" not in self.cleanup_policy:
            return None
        now = self.clock() if now_ms is None else now_ms
        started = time.monotonic()
        settings = self.compaction
        with self.lock:
            if self.closed:
                return None
            lso = self.txns.last_stable_offset(self.high_watermark, self.log_start_offset)
            picked: list[_Segment] = []
            for seg in self._segments[:-1]:
                if seg.next_offset > lso or seg.max_timestamp > now - settings.min_lag_ms:
                    break
                picked.append(seg)
            cleaned_to = self.cleaned_to()
            dirty = [seg for seg in picked if seg.next_offset > cleaned_to]
            total = sum(seg.size for seg in picked)
            overdue = any(0 <= seg.first_timestamp < now - settings.max_lag_ms for seg in dirty)
            due = self._horizon_due <= now  # deletes past their horizon (Kafka cleans such a log too)
            if not total or (not dirty or sum(seg.size for seg in dirty) / total < settings.min_dirty_ratio) and not (
                    overdue or due):
                return None
            job = segment_swap.PassJob(
                [(seg.log_path, seg.idx_path, seg.size, seg.base, seg.next_offset) for seg in picked], cleaned_to,
                capacity, now, settings.delete_retention_ms, list(self.txns.aborted),
                {pid: e.batches[-1][3] for pid, e in self.producer_state.producers.items() if e.batches},
                self.index_interval_bytes)
        result = run(job)
        for seg in picked:
            if seg.base in result.written:
                self._swap_in(seg)
        with self.lock:
            if result.dropped_markers:  # a reader is no longer told of aborts whose markers went
                self.txns.forget_markers(result.dropped_markers)
            self._horizon_due = result.next_horizon
        if not self.closed:
            write_durably(os.path.join(self.directory, CLEANED_TO_FILE),
                          str(max(result.end, cleaned_to)).encode("ascii"))
            write_durably(os.path.join(self.directory, HORIZON_FILE), str(result.next_horizon).encode("ascii"))
        stats = result.stats
        log.info("event=log_compacted dir=%s records_in=%d records_out=%d bytes_in=%d bytes_out=%d took_ms=%d",
                 self.directory, stats.records_in, stats.records_out, stats.bytes_in, stats.bytes_out,
                 int((time.monotonic() - started) * 1000))
        return stats

    def _swap_in(self, seg: _Segment) -> None:
        """The cleaned copy of ``seg`` replaces it, unless the segment went meanwhile (retention,
        DeleteRecords, a snapshot installed) or the log closed."""
        with self.lock:
            i = bisect.bisect_left(self._bases, seg.base)
            if self.closed or i == len(self._segments) or self._segments[i] is not seg:
                segment_swap.discard(seg.log_path, seg.idx_path)
                return
            try:
                segment_swap.resync(seg.log_path, seg.idx_path)  # noted in this process's power-loss ledger too
                segment_swap.commit(seg.log_path, seg.idx_path)
                fresh = _Segment(self.directory, seg.base, self.index_interval_bytes)
                fresh.recover()
            except OSError as e:  # half done: the next start completes it (settle_swaps)
                fail_stop("data_log", f"{seg.log_path}: swapping in its compacted copy failed: {type(e).__name__}: {e}")
            seg.close()
            fresh.generation = seg.generation + 1
            self._segments[i] = fresh

    def cleaned_to(self) -> int:
        """Where the last compaction pass stopped (0: never compacted, or the file unreadable)."""
        return self._read_offset_file(CLEANED_TO_FILE)

    def segment_generation(self, base: int) -> int | None:
        """How many compactions replaced segment ``base`` (None: no such segment)."""
        with self.lock:
            i = bisect.bisect_left(self._bases, base)
            return self._segments[i].generation if i < len(self._bases) and self._bases[i] == base else None

    def _delete_oldest(self) -> None:
        seg = self._segments.pop(0)
        self._bases.pop(0)
        seg.delete()
        self.txns.forget_before(self.log_start_offset)
        self.epochs.trim_before(self.log_start_offset)
        log.info("event=segment_deleted dir=%s base=%d log_start_offset=%d",
                 self.directory, seg.base, self.log_start_offset)

    # -- reads ---------------------------------------------------------------------------------

    def _segment_index(self, offset: int) -> int:
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    def _iter_headers(self, from_offset: int) -> Iterator[tuple[_Segment, int, BatchHeader]]:
        for seg in self._segments[self._segment_index(from_offset) :]:
            for pos, hdr in seg.iter_headers(from_offset):
                yield seg, pos, hdr

    def _plan_read_unlocked(self, offset: int, max_bytes: int, *, upper: int | None, min_one: bool) -> ReadPlan:
        """Where the bytes of a read are: positions and duplicated descriptors, found with the
        lock held (the sparse index, then at most one index interval of headers). The bytes
        themselves are read by :meth:`ReadPlan.execute` without the lock."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(offset)
        plan = ReadPlan(max_bytes, upper, min_one)
        first = True
        for seg in self._segments[self._segment_index(offset) :]:
            start = seg.size
            for pos, hdr in seg.iter_headers(offset if first else seg.base):
                start = pos
                if first and min_one:
                    plan.budget = max(plan.budget, hdr.size)  # the first batch whole, as Kafka does
                break
            first = False
            if start < seg.size:
                plan.ranges.append((os.dup(seg.fh.fileno()), start, seg.size))
                plan.planned += seg.size - start
            if plan.planned >= plan.budget:
                break
        return plan

    def _offset_for_timestamp_unlocked(self, timestamp: int) -> tuple[int, int] | None:
        """``(timestamp, offset)`` of the first record with timestamp >= ``timestamp``."""
        for seg in self._segments:
            if seg.max_timestamp < timestamp or not seg.size:
                continue
            start = self.log_start_offset
            for pos, hdr in seg.iter_headers(seg.base):
                if hdr.max_timestamp < timestamp or hdr.last_offset < start:
                    continue
                batch = seg.read_at(pos, hdr.size)
                try:
                    for rec in decode_records(batch):
                        if rec.timestamp >= timestamp and rec.offset >= start:
                            return rec.timestamp, rec.offset
                except InvalidBatchError:
                    return hdr.max_timestamp, max(hdr.base_offset, start)  # compressed: batch granularity
        return None

    def _max_timestamp_unlocked(self) -> tuple[int, int] | None:
        """``(timestamp, offset)`` of the record with the largest timestamp (the first, if several
        share it), as Kafka answers ListOffsets MAX_TIMESTAMP: in a LogAppendTime batch, where
        every record has the batch's time, its last offset."""
        best: _Segment | None = None
        for seg in self._segments:
            if seg.size and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        ts = best.max_timestamp
        for pos, hdr in best.iter_headers(best.max_timestamp_offset):
            if hdr.max_timestamp != ts:
                continue
            if hdr.attributes & ATTR_TIMESTAMP_TYPE:
                return ts, hdr.last_offset
            records = plain_records(hdr, best.read_at(pos, hdr.size), MAX_TIMESTAMP_SEARCH_BYTES)
            try:
                found = next((r.offset for r in decode_body(hdr, records) if r.timestamp == ts), None) \
                    if records is not None else None
            except (InvalidBatchError, IndexError):
                found = None
            return ts, found if found is not None else hdr.base_offset  # unreadable: the batch's start
        return ts, best.max_timestamp_offset


    # -- locked entry points (the Raft ticker applies while the event loop reads) -------------

    def append(self, batch: bytes) -> BatchHeader:
        """Append one offset-assigned batch (its baseOffset must be the log end offset)."""
        with self.lock:
            return self._append_unlocked(batch)

    def append_run(self, headers: list[BatchHeader], data: bytes) -> None:
        """Append offset-assigned batches already checked (a snapshot install's copy, with the
        gaps compaction left): ``data`` holds them, ``headers`` are theirs, in order."""
        with self.lock:
            self._append_run_unlocked(headers, data)

    def sync(self) -> None:
        """fsync the active segment and its index (durability = "fsync" on a single node)."""
        with self.lock:
            seg = self._segments[-1] if self._segments else None
            if seg is None:
                return
            try:
                sync(seg.fh.fileno())
                sync(seg.idx_fh.fileno())
            except OSError as e:
                fail_stop("data_log", f"{seg.log_path}: fsync failed: {type(e).__name__}: {e}")

    def plan_read(self, offset: int, max_bytes: int, *, upper: int | None = None, min_one: bool = True) -> ReadPlan:
        """Whole batches from the one containing ``offset``, up to ``max_bytes`` (the first one
        whole even if larger, when ``min_one``, so a consumer always progresses). Cheap and
        under the lock; the returned plan reads the bytes without it, on any thread."""
        with self.lock:
            return self._plan_read_unlocked(offset, max_bytes, upper=upper, min_one=min_one)

    def read(self, offset: int, max_bytes: int, *, upper: int | None = None, min_one: bool = True) -> bytes:
        return self.plan_read(offset, max_bytes, upper=upper, min_one=min_one).execute()

    def enforce_retention(self) -> int:
        """Delete whole old segments past retention.ms / retention.bytes; returns count."""
        with self.lock:
            return self._enforce_retention_unlocked()

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        with self.lock:
            return self._offset_for_timestamp_unlocked(timestamp)

    def max_timestamp(self) -> tuple[int, int] | None:
        with self.lock:
            return self._max_timestamp_unlocked()

    def txn_open_at(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether the producer has a transaction open here at ``producer_epoch`` (under
        transaction version 2 one open at an older epoch is its previous transaction, whose
        marker has not come yet)."""
        with self.lock:
            entry = self.producer_state.producers.get(producer_id)
            return self.txns.is_open(producer_id) and entry is not None and entry.epoch == producer_epoch

    def active_producers(self) -> list[tuple[int, int, int, int, int, int]]:
        """Kafka's DescribeProducers view: per producer id, its epoch, last sequence and timestamp
        (-1 if none kept), the coordinator epoch of its last marker (-1) and the first offset of its
        open transaction (-1)."""
        with self.lock:
            pids = set(self.producer_state.producers) | set(self.txns.ongoing)
            out = []
            for pid in sorted(pids):
                entry = self.producer_state.producers.get(pid)
                last = entry.batches[-1] if entry is not None and entry.batches else None
                out.append((pid, entry.epoch if entry is not None else -1, last[1] if last else -1,
                            last[4] if last else -1, self.txns.coordinator_epochs.get(pid, -1),
                            self.txns.ongoing.get(pid, -1)))
            return out

    def expire_producers(self, expiration_ms: int) -> int:
        """Forget idempotent producers idle past ``expiration_ms`` (see ProducerStateManager.expire)."""
        with self.lock:
            return self.producer_state.expire(self.clock(), expiration_ms)

    def check_sequence(self, producer_id: int, producer_epoch: int, first_seq: int, last_seq: int) -> SeqCheck:
        with self.lock:
            return self._check_sequence_unlocked(producer_id, producer_epoch, first_seq, last_seq)

    def reset_to(self, start_offset: int, batches: bytes, producers: Any, txns: Any = None) -> None:
        """Replace the whole partition with a snapshot: offsets from ``start_offset``, these batches."""
        with self.lock:
            for seg in self._segments:
                seg.delete()
            self._segments, self._bases = [], []
            self.txns, self.epochs = PartitionTxns(), LeaderEpochs()
            self._new_segment(start_offset)
            self._start_floor = start_offset
            self._write_start_floor(start_offset)
            headers = [hdr for _, hdr in iter_batches(batches)]
            if headers:
                stamped = bytearray(batches)
                restamp(stamped, headers)  # a snapshot of an earlier release: its fence epochs, as terms
                self._append_run_unlocked(headers, bytes(stamped))
            for name in (CLEANED_TO_FILE, HORIZON_FILE):  # a new log: nothing of it cleaned
                try:
                    os.remove(os.path.join(self.directory, name))
                except FileNotFoundError:
                    pass
            self.load_state(producers, txns)

    def load_state(self, producers: Any, txns: Any) -> None:
        """The producer state and transactions a snapshot names (they replace what the batches said)."""
        with self.lock:
            self.producer_state = ProducerStateManager()
            self.producer_state.load_obj(producers)
            if txns is not None:  # a snapshot from before transactions: what the batches said
                self.txns = PartitionTxns.from_obj(txns)
            self._save_producer_state()

    def manifest(self) -> dict[str, Any]:
        """A Raft snapshot of this partition without its bytes: the segments as they are on disk
        (each only ever grows, so ``[0, size)`` stays what it is while the segment exists), the
        producer state and the transactions. The active segment is fsync'd first: the journal
        entries this snapshot replaces are about to be dropped."""
        with self.lock:
            try:
                self._segments[-1].sync()
            except OSError as e:  # retried, a failed fsync "succeeds" over pages already lost
                fail_stop("data_log", f"{self._segments[-1].log_path}: fsync failed: {type(e).__name__}: {e}")
            return {"v": MANIFEST_VERSION, "start": self.log_start_offset, "end": self.log_end_offset,
                    "segments": [[seg.base, seg.size] for seg in self._segments],
                    "producers": self.producer_state.to_obj(), "txns": self.txns.to_obj()}

    def read_segment(self, base: int, pos: int, n: int, generation: int | None = None) -> bytes | None:
        """Up to ``n`` bytes of segment ``base`` from ``pos``; None once retention deleted it, or
        (``generation`` given) once a compaction replaced it."""
        with self.lock:
            i = bisect.bisect_left(self._bases, base)
            if i == len(self._bases) or self._bases[i] != base:
                return None
            seg = self._segments[i]
            if generation is not None and seg.generation != generation:
                return None
            return _pread(seg.fh.fileno(), max(0, min(n, seg.size - pos)), pos)

    def settings(self) -> dict[str, Any]:
        """What a copy of this log (an installed snapshot's staging log) is opened with."""
        return {"segment_bytes": self.segment_bytes, "retention_ms": self.retention_ms,
                "retention_bytes": self.retention_bytes, "index_interval_bytes": self.index_interval_bytes,
                "clock": self.clock, "compaction": self.compaction}

    def adopt(self, staging: str) -> None:
        """Become the log in ``staging`` (a complete, fsync'd, cleanly closed copy: an installed
        snapshot). The directory's own files that are not the log's (``.incarnation``) go with it;
        the directories are swapped by renames, so a crash leaves one whole log or the other
        (``settle_install``). A failure part way stops the node: it must not go on applying to a
        log whose files are closed, and its next start settles the swap."""
        with self.lock:
            for name in os.listdir(self.directory):
                if name.startswith("."):
                    _copy_durably(os.path.join(self.directory, name), os.path.join(staging, name))
            for seg in self._segments:
                seg.close()
            old = self.directory + OLD_SUFFIX
            try:
                shutil.rmtree(old, ignore_errors=True)
                moved = os.listdir(staging)
                os.replace(self.directory, old)
                os.replace(staging, self.directory)
                fsync_dir(self.directory)
                for name in moved:  # the power-loss ledger follows the files (replication.durable)
                    renamed(os.path.join(staging, name), os.path.join(self.directory, name))
                shutil.rmtree(old, ignore_errors=True)
                self._segments, self._bases = [], []
                self.producer_state, self.txns, self.epochs = ProducerStateManager(), PartitionTxns(), LeaderEpochs()
                self._open()
            except OSError as e:
                fail_stop("data_log", f"{self.directory}: installing a snapshot failed: {type(e).__name__}: {e}")

    def stream_bounds(self, end: int) -> list[tuple[int, int]]:
        """``(segment base, bytes)`` of this log's segments up to offset ``end`` (exclusive): what a
        follower is sent of it for a snapshot that ends there, whatever segments that snapshot's
        own manifest named (retention may have deleted some; an installed copy may roll at other
        sizes)."""
        with self.lock:
            out = []
            for seg in self._segments:
                if seg.base >= end:
                    break
                if seg.next_offset <= end:
                    out.append((seg.base, seg.size))
                    continue
                pos = seg.size
                for at, hdr in seg.iter_headers(end):  # the first batch that reaches ``end`` starts at ``pos``
                    if hdr.base_offset >= end:
                        pos = at
                        break
                out.append((seg.base, pos))
                break
            return out
