"""Compaction of a ``__consumer_offsets`` partition's replicated entries: latest record per key.

Replaying the compacted entries rebuilds the same durable state as replaying all of
them (tombstones delete their key and are then no longer needed), which is what Kafka's
log cleaner guarantees for the compacted topic.
"""

from __future__ import annotations

from coordinator.codec import decode_batch, encode_batch
from coordinator.records import Record, RecordKey

CHUNK = 5000


def compact_offsets(payloads: list[bytes]) -> list[bytes]:
    latest: dict[RecordKey, Record] = {}
    for payload in payloads:
        for record in decode_batch(payload):
            if record.value is None:
                latest.pop(record.key, None)
            else:
                latest.pop(record.key, None)  # re-insert: keep the order of last writes
                latest[record.key] = record
    records = list(latest.values())
    return [encode_batch(records[i : i + CHUNK]) for i in range(0, len(records), CHUNK)]
