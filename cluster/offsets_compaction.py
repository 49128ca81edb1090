"""Compaction of a ``__consumer_offsets`` partition's replicated entries: latest record per key.

Replaying the compacted entries rebuilds the same durable state as replaying all of
them (tombstones delete their key and are then no longer needed), which is what Kafka's
log cleaner guarantees for the compacted topic. A transaction's offsets are resolved by its
marker (committed ones become plain records there, aborted ones go); offsets of transactions
still open are kept, after the plain records, with their producer id.

Records of a type this build does not know (a later release wrote them, in a cluster being
upgraded) are kept as they are, the latest per key: compacting them away would lose them for
the upgraded nodes that read them.
"""

from __future__ import annotations

from typing import Any

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
    unknown: dict[bytes, Any] = {}  # a record of an unknown type, as its entry held it, by its key's bytes
    unknown_txn: dict[int, list[Any]] = {}  # ... written in a producer's transaction, until its marker
    pending = PendingOffsets()

    def settle_unknown(item: Any) -> None:
        unknown.pop(bytes(item[0]), None)
        if item[1] is not None:  # a tombstone ends its key
            unknown[bytes(item[0])] = item[:2]

    for payload in payloads:
        raw: list[Any] = []
        records = decode_batch(payload, raw)
        for item in raw:
            if len(item) > 2 and int(item[2]) >= 0:
                unknown_txn.setdefault(int(item[2]), []).append(item)
            else:
                settle_unknown(item)
        for record in records:
            key = record.key
            if isinstance(key, TxnMarkerKey):
                assert isinstance(record.value, TxnMarkerValue)
                for item in unknown_txn.pop(key.producer_id, []):  # committed: kept; aborted: gone
                    if record.value.commit:
                        settle_unknown(item)
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
    kept = list(unknown.values()) + [item for items in unknown_txn.values() for item in items]
    out = [encode_batch(records[i : i + CHUNK]) for i in range(0, len(records), CHUNK)]
    out += [encode_batch([], kept[i : i + CHUNK]) for i in range(0, len(kept), CHUNK)]
    return out
