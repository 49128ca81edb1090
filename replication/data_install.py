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
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from typing import Any

import msgpack

from replication.data_log import INSTALL_SUFFIX, DataLog
from replication.raft.snapshot_transfer import InstallError, StreamCursor
from replication.record_batch import ATTRIBUTES_OFFSET, HEADER_SIZE, crc32c, parse_header

CHUNK_BYTES = 1 << 20  # one message of a stream
MAX_BATCH_BYTES = 128 << 20  # no batch is larger (a request's bound): what a piece may leave unfinished
DISK_MARGIN = 256 << 20


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
    chunk = data.read_segment(cursor.base, cursor.pos, min(CHUNK_BYTES, bounds[i][1] - cursor.pos))
    if not chunk:
        raise InstallError(f"segment {cursor.base} was deleted while it was sent")
    message = encode("seg", cursor.base, cursor.pos, chunk)
    cursor.pos += len(chunk)
    return message


@dataclass
class SnapshotInstall:
    """A follower's staging copy of the leader's log, built chunk by chunk."""

    target: DataLog
    first_base: int
    total: int  # the bytes to come: refused at once if the disk cannot hold them twice over
    staging: DataLog = field(init=False)
    _base: int = field(init=False)  # the segment the next chunk must continue, and where
    _pos: int = field(init=False, default=0)
    _carry: bytearray = field(init=False, default_factory=bytearray)

    def __post_init__(self) -> None:
        path = self.target.directory + INSTALL_SUFFIX
        shutil.rmtree(path, ignore_errors=True)
        free = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free
        if free < self.total + DISK_MARGIN:  # a full disk would stop the node (and again after it restarts)
            raise InstallError(f"{free} bytes free, the copy needs {self.total} and {DISK_MARGIN} to spare")
        self.staging = DataLog(path, **self.target.settings())
        self.staging.reset_to(self.first_base, b"", {}, None)
        self._base = self.first_base

    def feed(self, base: int, pos: int, chunk: bytes) -> None:
        if base != self._base:  # the next segment: it starts where the last one's batches ended
            if pos != 0 or self._carry or base != self.staging.log_end_offset:
                raise InstallError(f"segment {base} does not follow on (log end {self.staging.log_end_offset})")
            self._base, self._pos = base, 0
        if pos != self._pos:
            raise InstallError(f"segment {base}: chunk at {pos}, expected {self._pos}")
        self._pos += len(chunk)
        carry = self._carry
        carry += chunk
        at = 0
        while len(carry) - at >= HEADER_SIZE:
            hdr = parse_header(bytes(carry[at : at + HEADER_SIZE]))
            if hdr.magic != 2 or not HEADER_SIZE <= hdr.size <= MAX_BATCH_BYTES:
                raise InstallError(f"segment {base}: not a batch at byte {self._pos - len(carry) + at}")
            if len(carry) - at < hdr.size:
                break
            batch = bytes(carry[at : at + hdr.size])
            if crc32c(batch[ATTRIBUTES_OFFSET:]) != hdr.crc:
                raise InstallError(f"segment {base}: the batch at offset {hdr.base_offset} fails its CRC")
            try:
                self.staging.append(batch)
            except ValueError as e:
                raise InstallError(f"segment {base}: {e}") from e
            at += hdr.size
        del carry[:at]

    def finish(self, manifest: dict[str, Any]) -> None:
        """Check the copy against the snapshot and put it in the partition's place."""
        if self._carry or self.staging.log_end_offset != int(manifest["end"]):
            raise InstallError(f"the copy ends at {self.staging.log_end_offset} with {len(self._carry)} bytes "
                               f"left over; the snapshot at {manifest['end']}")
        self.staging.load_state(manifest["producers"], manifest.get("txns"))
        self.staging.sync()  # (rolled segments were at their roll) a failed fsync stops the node
        self.staging.close()
        self.target.adopt(self.staging.directory)

    def abort(self) -> None:
        path = self.staging.directory
        self.staging.close()
        shutil.rmtree(path, ignore_errors=True)
