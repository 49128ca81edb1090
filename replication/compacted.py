"""What a topic's ``cleanup.policy`` asks of the data plane, as Apache Kafka does it.

- Retention by time (``retention.ms``) and size (``retention.bytes``) deletes segments only
  when the policy includes ``delete``. A ``compact``-only topic (Kafka Streams changelogs, Kafka
  Connect's config, offset and status topics) relies on its old records being kept.
- Every record produced to a topic whose policy includes ``compact`` needs a key: a batch with a
  keyless record is refused (INVALID_RECORD), since compaction keeps the latest record per key.

Compaction itself is ``replication/log_cleaner.py`` (a pass over batches) and
``DataLog.compact`` (which segments, and their swap).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from replication import codecs
from replication.record_batch import HEADER_SIZE, BatchHeader, InvalidBatchError, read_varint

DEFAULT_POLICY = "delete"
# Records bytes walked on the event loop: a few ms at worst. Walking 1 MB of small records
# takes about 0.25 s, too long for the loop that also drives Raft.
INLINE_MAX = 16 * 1024
_executor: ThreadPoolExecutor | None = None


def cleanup_policies(value: str) -> frozenset[str]:
    """The policies of a ``cleanup.policy`` value: ``"compact,delete"`` -> {compact, delete}."""
    return frozenset(p.strip() for p in value.split(",") if p.strip())


def plain_records(hdr: BatchHeader, batch: bytes | memoryview, max_plain_bytes: int) -> bytes | memoryview | None:
    """A batch's records as they are written uncompressed: an uncompressed batch's own bytes, a
    compressed one's inflated (None past ``max_plain_bytes``, or if damaged)."""
    records: bytes | memoryview = memoryview(batch)[HEADER_SIZE:hdr.size]
    return codecs.inflate(hdr.compression, records, max_plain_bytes) if hdr.compression else records


def first_keyless_record(hdr: BatchHeader, batch: bytes, max_plain_bytes: int) -> int | None:
    """Index of the first record without a key in a batch ``validate_batch`` accepted, or ``None``.
    Compressed records are inflated up to ``max_plain_bytes``; a batch past it, or damaged, passes
    (the validator's to refuse, or too large to look into)."""
    records = plain_records(hdr, batch, max_plain_bytes)
    if records is None:
        return None
    try:
        pos = 0
        for i in range(hdr.records_count):
            length, pos = read_varint(records, pos)
            _ts_delta, at = read_varint(records, pos + 1)  # after the attributes byte
            _offset_delta, at = read_varint(records, at)
            key_length, _ = read_varint(records, at)
            if key_length < 0:
                return i
            pos += length
    except InvalidBatchError:
        return None  # malformed records are the validator's to refuse, not this check's
    return None


async def find_keyless_record(hdr: BatchHeader, batch: bytes, max_plain_bytes: int) -> int | None:
    """``first_keyless_record``, on a worker thread unless the records are few uncompressed bytes
    (one thread: the walk holds the GIL anyway, and one inflated batch at a time is in memory)."""
    if not hdr.compression and hdr.size - HEADER_SIZE <= INLINE_MAX:
        return first_keyless_record(hdr, batch, max_plain_bytes)
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="keyless-check")
    return await asyncio.get_running_loop().run_in_executor(_executor, first_keyless_record, hdr, batch,
                                                            max_plain_bytes)
