"""Kafka record batches (magic v2): parse headers, rewrite offsets, build batches.

Layout of a v2 batch header (61 bytes, big endian)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
    recordsCount int32 | records...

``batchLength`` counts the bytes after the field itself (total = batchLength + 12).
The CRC is CRC-32C over everything from ``attributes`` to the end of the batch.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import crc32c as _crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
PARTITION_LEADER_EPOCH_OFFSET = 12  # not covered by the CRC
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

_HEADER = struct.Struct(">qiibIhiqqqhii")


class InvalidBatchError(ValueError):
    """The bytes are not a valid v2 record batch (size, magic or CRC)."""

    def __init__(self, message: str, *, corrupt: bool = True) -> None:
        super().__init__(message)
        self.corrupt = corrupt


def crc32c(data: bytes | memoryview) -> int:
    return int(_crc32c.crc32c(data)) & 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK


def parse_header(data: bytes | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos`` (no CRC or length check against the buffer)."""
    if len(data) - pos < HEADER_SIZE:
        raise InvalidBatchError("truncated batch header")
    return BatchHeader(*_HEADER.unpack_from(data, pos))


def iter_batches(data: bytes | memoryview, *, verify_crc: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each complete batch; raise on a malformed one."""
    pos = 0
    end = len(data)
    view = memoryview(data)
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            raise InvalidBatchError("truncated batch")
        hdr = parse_header(view, pos) if end - pos >= HEADER_SIZE else None
        if hdr is None:
            raise InvalidBatchError("truncated batch header")
        if hdr.magic != 2:
            raise InvalidBatchError(f"unsupported magic {hdr.magic}", corrupt=False)
        if hdr.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + hdr.size > end:
            raise InvalidBatchError("bad batch length")
        if verify_crc and crc32c(view[pos + ATTRIBUTES_OFFSET : pos + hdr.size]) != hdr.crc:
            raise InvalidBatchError("CRC mismatch")
        yield pos, hdr
        pos += hdr.size


def split_batches(data: bytes, *, verify_crc: bool = True) -> list[tuple[BatchHeader, bytes]]:
    """Split a RecordSet into ``(header, batch bytes)`` pairs, validating each batch."""
    out: list[tuple[BatchHeader, bytes]] = []
    for pos, hdr in iter_batches(data, verify_crc=verify_crc):
        out.append((hdr, bytes(data[pos : pos + hdr.size])))
    return out


def assign_offsets(batch: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """Return the batch with its baseOffset and partitionLeaderEpoch rewritten.

    Neither field is covered by the CRC, but we recompute the CRC over the
    attributes..end part anyway, as Kafka does when it rewrites a batch, so a batch
    that passes through here always leaves with a CRC matching its content.
    """
    buf = bytearray(batch)
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">i", buf, PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


# --- varints and records (used by tests, ListOffsets-by-timestamp and tools) -------


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def write_varint(out: bytearray, n: int) -> None:
    v = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def read_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    result = 0
    while True:
        if pos >= len(data):
            raise InvalidBatchError("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise InvalidBatchError("varint too long")
    return (result >> 1) ^ -(result & 1), pos


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def encode_record(
    offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]],
) -> bytes:
    body = bytearray()
    body.append(0)  # attributes
    write_varint(body, ts_delta)
    write_varint(body, offset_delta)
    for blob in (key, value):
        if blob is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(blob))
            body += blob
    write_varint(body, len(headers))
    for hk, hv in headers:
        kb = hk.encode("utf-8", "surrogateescape")
        write_varint(body, len(kb))
        body += kb
        if hv is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(hv))
            body += hv
    out = bytearray()
    write_varint(out, len(body))
    return bytes(out + body)


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    timestamp: int = 0,
    timestamps: Sequence[int] | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = -1,
    attributes: int = 0,
) -> bytes:
    """Build an uncompressed v2 batch of ``(key, value)`` records."""
    if not records:
        raise ValueError("a batch needs at least one record")
    ts = list(timestamps) if timestamps is not None else [timestamp] * len(records)
    base_ts = ts[0]
    body = b"".join(
        encode_record(i, ts[i] - base_ts, k, v, ()) for i, (k, v) in enumerate(records)
    )
    after_crc = struct.pack(
        ">hiqqqhii", attributes, len(records) - 1, base_ts, max(ts), producer_id,
        producer_epoch, base_sequence, len(records),
    ) + body
    crc = crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", base_offset, batch_length, partition_leader_epoch, 2, crc) + after_crc


def decode_records(batch: bytes | memoryview) -> list[Record]:
    """Decode the records of an uncompressed batch (compressed → InvalidBatchError)."""
    hdr = parse_header(batch)
    if hdr.compression:
        raise InvalidBatchError("compressed batch", corrupt=False)
    return decode_body(hdr, memoryview(batch)[HEADER_SIZE:])


def decode_body(hdr: BatchHeader, raw: bytes | memoryview) -> list[Record]:
    """The records of a batch from its (uncompressed) records bytes; a malformed one raises
    InvalidBatchError or IndexError."""
    pos = 0
    out: list[Record] = []
    for _ in range(hdr.records_count):
        length, pos = read_varint(raw, pos)
        end = pos + length
        pos += 1  # attributes
        ts_delta, pos = read_varint(raw, pos)
        off_delta, pos = read_varint(raw, pos)
        blobs: list[bytes | None] = []
        for _ in range(2):
            n, pos = read_varint(raw, pos)
            if n < 0:
                blobs.append(None)
            else:
                blobs.append(bytes(raw[pos : pos + n]))
                pos += n
        nh, pos = read_varint(raw, pos)
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(nh):
            n, pos = read_varint(raw, pos)
            # a key that is not UTF-8 is kept byte for byte (a batch rewritten by the cleaner
            # must say what it said)
            hk = bytes(raw[pos : pos + n]).decode("utf-8", "surrogateescape")
            pos += n
            n, pos = read_varint(raw, pos)
            hv: bytes | None = None
            if n >= 0:
                hv = bytes(raw[pos : pos + n])
                pos += n
            headers.append((hk, hv))
        out.append(Record(hdr.base_offset + off_delta, hdr.base_timestamp + ts_delta, blobs[0], blobs[1], tuple(headers)))
        pos = end
    return out


def iter_records(data: bytes | memoryview) -> Iterator[Record]:
    """Records of every (uncompressed) batch in a RecordSet."""
    view = memoryview(data)
    for pos, hdr in iter_batches(view, verify_crc=False):
        yield from decode_records(view[pos : pos + hdr.size])
