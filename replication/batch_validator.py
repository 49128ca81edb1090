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
"""

from __future__ import annotations

import zlib

from replication.record_batch import HEADER_SIZE, BatchHeader, read_varint

MAX_CODEC = 4  # none, gzip, snappy, lz4, zstd
GZIP = 1

Problem = tuple[str, str]


def validate_batch(hdr: BatchHeader, batch: bytes, max_message_bytes: int) -> Problem | None:
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
        try:
            inflater = zlib.decompressobj(wbits=47)  # gzip or zlib header
            plain = inflater.decompress(records, max_message_bytes * 16 + 1)
        except zlib.error as e:
            return "corrupt", f"The gzip records do not decompress: {e}"
        if len(plain) > max_message_bytes * 16 or inflater.unconsumed_tail:
            return "invalid", "The gzip records decompress to more than 16 x max.message.bytes"
        return _check_records(memoryview(plain), hdr.records_count)
    if codec == 0:
        return _check_records(records, hdr.records_count)
    return None  # snappy, lz4, zstd: no codec here to look inside; the header checks above still hold


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
