"""Compaction of a ``__consumer_offsets`` partition's replicated entries: latest record per key.

Replaying the compacted entries rebuilds the same durable state as replaying all of
them (tombstones delete their key and are then no longer needed), which is what Kafka's
log cleaner guarantees for the compacted topic. A transaction's offsets are resolved by its
marker (committed ones become plain records there, aborted ones go); offsets of transactions
still open are kept, after the plain records, with their producer id.
"""

from __future__ import annotations

from coordinator.codec import decode_batch, encode_batch
from coordinator.records import (
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    RecordKey,
    TxnMarkerKey,
    TxnMarkerValue,
)
from coordinator.txn_offsets import PendingOffsets

CHUNK = 5000


def compact_offsets(payloads: list[bytes]) -> list[bytes]:
    latest: dict[RecordKey, Record] = {}
    pending = PendingOffsets()
    for payload in payloads:
        for record in decode_batch(payload):
            key = record.key
            if isinstance(key, TxnMarkerKey):
                assert isinstance(record.value, TxnMarkerValue)
                for k, v in pending.end(key.producer_id, record.value.commit, record.value.producer_epoch):
                    latest.pop(k, None)
                    latest[k] = Record(k, v)
                continue
            if isinstance(key, OffsetCommitKey):
                if record.value is None:
                    pending.tombstone(key)
                elif record.producer_id >= 0:
                    assert isinstance(record.value, OffsetCommitValue)
                    pending.add(record.producer_id, key, record.value, record.producer_epoch)
                    continue
                else:
                    pending.plain_commit(key)
            latest.pop(key, None)  # re-insert: keep the order of last writes
            if record.value is not None:
                latest[key] = record
    records = list(latest.values()) + [Record(k, v, pid, epoch) for pid, epoch, k, v in pending.items()]
    return [encode_batch(records[i : i + CHUNK]) for i in range(0, len(records), CHUNK)]
