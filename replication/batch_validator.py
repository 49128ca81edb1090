"""Validation of a producer's record batch before it is given offsets, after Kafka's LogValidator.

``split_batches`` has already checked the magic, the batch length against the bytes and the
CRC. This adds what a batch header could still lie about, each a reason Kafka refuses:

- the offset range: ``lastOffsetDelta == recordsCount - 1 >= 0`` (a negative delta would move
  the partition's log end backwards and later produces would be acknowledged at offsets that
  already exist);
- the records themselves (uncompressed, or gzip, whose decompression is bounded): exactly
  ``recordsCount`` well-formed records filling the batch, offset deltas 0, 1, 2, ...;
- the compression codec (0-4), a sequence for an idempotent batch, and the batch size against the topic's ``max.message.bytes``.

Returns ``None`` for a valid batch, or ``(kind, message)`` with kind ``"invalid"`` (Kafka's
INVALID_RECORD), ``"corrupt"`` (CORRUPT_MESSAGE) or ``"too_large"`` (MESSAGE_TOO_LARGE).

Bounds that Kafka does not have (it inflates and reads whatever a batch holds): a gzip batch
inflates to at most ``min(16 x max.message.bytes, BATCH_INFLATE_CAP)``, and the batches of one
Produce request that share an ``InflateBudget`` to ``REQUEST_INFLATE_CAP`` in all; decompression
stops as soon as a bound is passed. ``validate_batch_async`` reads a large batch's records on a
worker thread: parsing them in Python takes about 0.3-0.5 us per byte, and the event loop also
drives Raft. snappy, lz4 and zstd records are not looked into (no codec for them here), so
nothing inflates them.
"""

from __future__ import annotations

import asyncio
import zlib
from concurrent.futures import ThreadPoolExecutor

from replication.record_batch import HEADER_SIZE, BatchHeader, read_varint

MAX_CODEC = 4  # none, gzip, snappy, lz4, zstd
GZIP = 1

BATCH_INFLATE_CAP = 64 * 1024 * 1024  # whatever the topic's max.message.bytes (16 x 2 GiB: 32 GiB)
REQUEST_INFLATE_CAP = 128 * 1024 * 1024  # all the gzip batches of one Produce request
_INFLATE_CHUNK = 1024 * 1024  # inflated per step: the output passes no bound by more than this
_INFLATE_INPUT = 64 * 1024  # compressed bytes fed per step
_MAX_DEFLATE_RATIO = 1032  # deflate's best: a gzip batch may hold this many times its size
INLINE_MAX = 16 * 1024  # records bytes read on the loop: ~8 ms at worst (records of a few bytes)

Problem = tuple[str, str]


class InflateBudget:
    """What the gzip batches of one Produce request may still inflate to: one is made for each
    request and handed to the validation of each of its batches (they are validated in turn)."""

    def __init__(self, limit: int = REQUEST_INFLATE_CAP) -> None:
        self.limit = limit
        self.left = limit


def validate_batch(hdr: BatchHeader, batch: bytes, max_message_bytes: int,
                   budget: InflateBudget | None = None) -> Problem | None:
    """``budget``: the Produce request's, shared by its batches (None: only the batch's bounds)."""
    if hdr.size > max_message_bytes:
        return "too_large", (f"The batch of {hdr.size} bytes is larger than the topic's max.message.bytes "
                             f"({max_message_bytes})")
    if hdr.records_count <= 0:
        return "invalid", f"Invalid reported count for record batch: {hdr.records_count}"
    if hdr.last_offset_delta != hdr.records_count - 1:
        return "invalid", (f"Inconsistent batch offset range (lastOffsetDelta {hdr.last_offset_delta}) and "
                           f"record count ({hdr.records_count})")
    if hdr.base_offset != 0:
        return "invalid", f"Batch base offset must be 0 in a produce request, not {hdr.base_offset}"
    codec = hdr.compression
    if codec > MAX_CODEC:
        return "invalid", f"Unknown compression codec {codec}"
    if hdr.producer_id >= 0 and hdr.base_sequence < 0:
        # an idempotent batch must say where it starts (its sequence is checked against the
        # producer's state next); without a producer id Kafka ignores the sequence fields
        return "invalid", f"Invalid sequence {hdr.base_sequence} for producer {hdr.producer_id}"
    records = memoryview(batch)[HEADER_SIZE:hdr.size]
    if codec == GZIP:
        plain = _inflate(records, max_message_bytes, budget)
        if isinstance(plain, tuple):
            return plain
        return _check_records(memoryview(plain), hdr.records_count)
    if codec == 0:
        return _check_records(records, hdr.records_count)
    return None  # snappy, lz4, zstd: no codec here to look inside; the header checks above still hold


async def validate_batch_async(hdr: BatchHeader, batch: bytes, max_message_bytes: int,
                               budget: InflateBudget | None = None) -> Problem | None:
    """``validate_batch``, on the worker thread when reading the records could take the loop
    more than a few milliseconds (a gzip batch: whenever it could inflate past ``INLINE_MAX``)."""
    records = hdr.size - HEADER_SIZE
    work = records if hdr.compression == 0 else records * _MAX_DEFLATE_RATIO if hdr.compression == GZIP else 0
    if work <= INLINE_MAX or hdr.size > max_message_bytes:
        return validate_batch(hdr, batch, max_message_bytes, budget)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_worker(), validate_batch, hdr, batch, max_message_bytes, budget)


_executor: ThreadPoolExecutor | None = None


def _worker() -> ThreadPoolExecutor:
    """One thread for the whole node: parsing holds the GIL, so more would only take turns
    with the loop, and one at a time keeps a single batch's inflated bytes in memory."""
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batch-validator")
    return _executor


def _inflate(records: memoryview, max_message_bytes: int, budget: InflateBudget | None) -> bytearray | Problem:
    """The gzip records inflated a step at a time, stopping as soon as they pass their bound
    (so a bomb costs no more than the bound, in memory and in time)."""
    limit = min(16 * max_message_bytes, BATCH_INFLATE_CAP)
    if budget is not None and budget.left < limit:
        limit = max(budget.left, 0)
        too_much = f"The gzip records of this produce request decompress to more than {budget.limit} bytes in all"
    else:
        too_much = (f"The gzip records decompress to more than {limit} bytes (16 x max.message.bytes, at most "
                    f"{BATCH_INFLATE_CAP})")
    inflater = zlib.decompressobj(wbits=47)  # gzip or zlib header
    plain = bytearray()
    pos, data = 0, memoryview(b"")
    try:
        while not inflater.eof:
            if not data:  # fed in slices: zlib copies what a step leaves unconsumed
                data, pos = records[pos:pos + _INFLATE_INPUT], pos + _INFLATE_INPUT
            chunk = inflater.decompress(data, min(_INFLATE_CHUNK, limit + 1 - len(plain)))
            tail = memoryview(inflater.unconsumed_tail)
            if not chunk and len(tail) == len(data):
                break  # no progress: the stream is cut short (its records then fail to parse)
            plain += chunk
            if len(plain) > limit:
                return "invalid", too_much
            data = tail
    except zlib.error as e:
        return "corrupt", f"The gzip records do not decompress: {e}"
    finally:
        if budget is not None:
            budget.left -= len(plain)
    return plain


def _check_records(data: memoryview, count: int) -> Problem | None:
    """Exactly ``count`` records (Kafka's v2 record layout) and nothing after them."""
    pos, end = 0, len(data)
    try:
        for i in range(count):
            length, pos = read_varint(data, pos)
            if length < 0 or pos + length > end:
                return "corrupt", f"Record {i} claims {length} bytes, {end - pos} left in the batch"
            rec_end = pos + length
            pos += 1  # attributes
            _, pos = read_varint(data, pos)  # timestamp delta
            delta, pos = read_varint(data, pos)
            if delta != i:
                return "invalid", f"Inconsistent offset delta {delta} for record {i} of the batch"
            for _what in ("key", "value"):
                n, pos = read_varint(data, pos)
                if n < -1:
                    return "corrupt", f"Record {i} has a {_what} of length {n}"
                pos += max(n, 0)
            headers, pos = read_varint(data, pos)
            if headers < 0:
                return "corrupt", f"Record {i} has {headers} headers"
            for _ in range(headers):
                n, pos = read_varint(data, pos)
                if n < 0:
                    return "corrupt", f"Record {i} has a header key of length {n}"
                pos += n
                n, pos = read_varint(data, pos)
                if n < -1:
                    return "corrupt", f"Record {i} has a header value of length {n}"
                pos += max(n, 0)
            if pos != rec_end:
                return "corrupt", f"Record {i} does not fill its declared length"
    except ValueError as e:  # a truncated varint
        return "corrupt", f"Truncated record: {e}"
    if pos != end:
        return "corrupt", f"{end - pos} bytes after the batch's {count} records"
    return None
