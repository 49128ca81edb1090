"""A closed segment replaced by its compacted copy, so that a crash at any point leaves the
segment as it was or as it was cleaned, never a mix, and never a log whose index does not match
its file:

1. the copy is written beside the segment as ``<base>.log.cleaned`` with its index as
   ``<base>.index.cleaned``, both fsync'd;
2. ``<base>.log.cleaned`` is renamed ``<base>.log.swap`` (the commit point; the directory fsync'd);
3. the index copy is renamed over ``<base>.index``, then ``<base>.log.swap`` over ``<base>.log``.

A log that opens finds the swaps a crash interrupted (``settle_swaps``): one committed (a
``.swap`` file) is completed, one not is deleted. Steps 2 and 3 are ``commit``. The index copy
is whole before the commit, so whichever index is in place matches the log file in place.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from replication.durable import fsync_dir, renamed, sync
from replication.log_cleaner import CleanState, CleanStats, build_key_map, clean_iter
from replication.record_batch import HEADER_SIZE, InvalidBatchError, parse_header
from replication.txn_index import AbortedTxn

CLEANED = ".cleaned"
SWAP = ".swap"
READ_CHUNK = 1 << 20
INDEX_ENTRY = struct.Struct(">qqq")  # the data log's: offset, position, max timestamp before it


def read_batches(fd: int, size: int) -> Iterator[bytes]:
    """The batches of a segment's first ``size`` bytes, read a chunk at a time through ``fd``."""
    pos, buf, at = 0, b"", 0  # buf[at:] holds the file's bytes from ``pos`` on
    while pos < size:
        have = len(buf) - at
        hdr = parse_header(buf, at) if have >= HEADER_SIZE else None
        if hdr is None or have < hdr.size:
            want = max(READ_CHUNK, hdr.size if hdr is not None else 0)
            buf = buf[at:] + os.pread(fd, min(want, size - pos) - have, pos + have)
            at = 0
            hdr = parse_header(buf, 0)
            if len(buf) < hdr.size:
                raise InvalidBatchError(f"a batch at byte {pos} runs past the segment's {size} bytes")
        yield buf[at:at + hdr.size]
        at += hdr.size
        pos += hdr.size


def write_copy(log_path: str, idx_path: str, batches: Iterable[bytes], index_interval: int) -> int:
    """Step 1: the copy and its index (an entry every ``index_interval`` bytes, as the data log
    writes them), fsync'd. Returns the copy's size."""
    pos, since, max_ts = 0, 0, -1
    entries = bytearray()
    with open(log_path + CLEANED, "wb") as out:
        for batch in batches:
            hdr = parse_header(batch)
            if pos == 0 or since >= index_interval:
                entries += INDEX_ENTRY.pack(hdr.base_offset, pos, max_ts)
                since = 0
            out.write(batch)
            pos += len(batch)
            since += len(batch)
            max_ts = max(max_ts, hdr.max_timestamp)
        out.flush()
        sync(out.fileno())
    with open(idx_path + CLEANED, "wb") as out:
        out.write(entries)
        out.flush()
        sync(out.fileno())
    return pos


def resync(log_path: str, idx_path: str) -> None:
    """fsync the copy again where it is committed (it was written, and fsync'd, by another process)."""
    for path in (log_path + CLEANED, idx_path + CLEANED):
        fd = os.open(path, os.O_RDONLY)
        try:
            sync(fd)
        finally:
            os.close(fd)


def commit(log_path: str, idx_path: str) -> None:
    """Steps 2 and 3."""
    os.replace(log_path + CLEANED, log_path + SWAP)
    renamed(log_path + CLEANED, log_path + SWAP)
    fsync_dir(log_path)
    _complete(log_path, idx_path)


def _complete(log_path: str, idx_path: str) -> None:
    if os.path.exists(idx_path + CLEANED):
        os.replace(idx_path + CLEANED, idx_path)
        renamed(idx_path + CLEANED, idx_path)
        fsync_dir(idx_path)  # before the log's rename: a power loss must not keep that one alone
    os.replace(log_path + SWAP, log_path)
    renamed(log_path + SWAP, log_path)
    fsync_dir(log_path)


def discard(log_path: str, idx_path: str) -> None:
    """A copy not committed (the segment went meanwhile, or the log closed)."""
    for path in (log_path + CLEANED, idx_path + CLEANED):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


def settle_swaps(directory: str) -> None:
    """Complete the committed swaps a crash interrupted and delete the uncommitted copies."""
    names = os.listdir(directory)
    for name in names:
        if name.endswith(".log" + SWAP) and name[:20].isdigit():
            base = name[:20]
            _complete(os.path.join(directory, base + ".log"), os.path.join(directory, base + ".index"))
    for name in names:
        if name.endswith(CLEANED) and os.path.exists(os.path.join(directory, name)):
            os.remove(os.path.join(directory, name))


# ------------------------------------------------------------ one pass, off the node's process


@dataclass(frozen=True, slots=True)
class PassJob:
    """What a compaction pass over a log's closed segments needs (picklable: it may run in a
    process of its own, so that its CPU time does not hold the node's GIL)."""

    segments: list[tuple[str, str, int, int, int]]  # (log path, index path, size, base, next offset)
    cleaned_to: int
    capacity: int
    now_ms: int
    delete_retention_ms: int
    aborted: list[AbortedTxn]
    producers_last: dict[int, int]
    index_interval: int


@dataclass(slots=True)
class PassResult:
    written: list[int]  # bases of the segments whose compacted copy waits beside them (to be committed)
    stats: CleanStats
    dropped_markers: set[int]
    next_horizon: int
    end: int  # where the pass's key map ended: the next one maps on from there


def die_with_parent() -> None:
    """A cleaner process's first step: it is killed with the node that started it (SIGKILL
    included), rather than wait for work that will never come."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: it ends when the node closes it
        pass
    if os.getppid() == 1:  # the node died before the line above
        os._exit(0)


def run_pass(job: PassJob) -> PassResult:
    """Map the dirty part's keys, then write a copy of every segment up to where the map ends
    whose compaction changes it (step 1; the caller commits them). A failure discards every copy."""
    opened: list[tuple[int, str, str, int, int, int]] = []
    written: list[int] = []
    try:
        for log_path, idx_path, size, base, nxt in job.segments:  # (one gone since: the pass fails, nothing lost)
            opened.append((os.open(log_path, os.O_RDONLY), log_path, idx_path, size, base, nxt))
        dirty = (b for fd, _, _, size, _, nxt in opened if nxt > job.cleaned_to
                 for b in read_batches(fd, size) if parse_header(b).next_offset > job.cleaned_to)
        key_map = build_key_map(dirty, capacity=job.capacity, aborted=job.aborted)
        key_map.end = max(key_map.end, job.cleaned_to)  # what was cleaned before is cleaned again with it
        stats, state = CleanStats(), CleanState()  # one state: a transaction's marker may be in a later segment
        for fd, log_path, idx_path, size, base, _ in opened:
            if base >= key_map.end:
                break
            state.changed = False
            batches = clean_iter(read_batches(fd, size), key_map, now_ms=job.now_ms,
                                 delete_retention_ms=job.delete_retention_ms, aborted=job.aborted,
                                 producers_last=job.producers_last, stats=stats, keep_last=True, state=state)
            write_copy(log_path, idx_path, batches, job.index_interval)
            if state.changed:
                written.append(base)
            else:  # nothing of it went: no swap (its readers and streams go on undisturbed)
                discard(log_path, idx_path)
        return PassResult(written, stats, state.dropped_markers, state.next_horizon, key_map.end)
    except BaseException:
        for log_path, idx_path, *_ in job.segments:
            discard(log_path, idx_path)
        raise
    finally:
        for opened_fd in (o[0] for o in opened):
            os.close(opened_fd)
