"""Replicated entries of a ``__transaction_state`` partition: a msgpack list of Kafka-encoded
(key, value) records (``transactions.codec``), and their compaction (latest record per
transactional id; a tombstone, once applied, is no longer needed)."""

from __future__ import annotations

from collections.abc import Sequence

import msgpack

from transactions.codec import TxnRecordDecodeError, decode, encode
from transactions.records import TxnRecord

CHUNK = 5000


def encode_entry(records: Sequence[TxnRecord]) -> bytes:
    return bytes(msgpack.packb([list(encode(r)) for r in records], use_bin_type=True))


def decode_entry(payload: bytes) -> list[TxnRecord]:
    try:
        items = msgpack.unpackb(payload, raw=False)
        return [decode(bytes(k), None if v is None else bytes(v)) for k, v in items]
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise TxnRecordDecodeError(str(e)) from e


def compact_txn(payloads: list[bytes]) -> list[bytes]:
    latest: dict[str, TxnRecord] = {}
    for payload in payloads:
        for record in decode_entry(payload):
            latest.pop(record.transactional_id, None)  # re-insert: keep the order of last writes
            if record.value is not None:
                latest[record.transactional_id] = record
    records = list(latest.values())
    return [encode_entry(records[i:i + CHUNK]) for i in range(0, len(records), CHUNK)]


def encode_entries(records: Sequence[TxnRecord], max_bytes: int) -> list[tuple[bytes, int]]:
    """The records as entries of at most ``max_bytes`` each, in order: ``(payload, records in
    it)``; one entry unless they do not fit (ValueError for a record that fits in none)."""
    whole = encode_entry(records)
    if len(whole) <= max_bytes:
        return [(whole, len(records))]
    out: list[tuple[bytes, int]] = []
    start = 0
    while start < len(records):
        n = len(records) - start
        while n > 1 and len(payload := encode_entry(records[start:start + n])) > max_bytes:
            n //= 2  # (a rare case: a burst of records coalesced while an append was in flight)
        payload = encode_entry(records[start:start + n])
        if len(payload) > max_bytes:
            raise ValueError(f"a transaction record of {len(payload)} bytes cannot fit in an entry of {max_bytes}")
        out.append((payload, n))
        start += n
    return out
