"""The durable records of a ``__transaction_state`` partition: one per transition, keyed by
transactional id; a ``None`` value is a tombstone (the id expired)."""

from __future__ import annotations

from dataclasses import dataclass

from .state import TxnState

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class TxnValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    last_update_ms: int
    start_ms: int  # -1 until the first partition of a transaction is added


@dataclass(frozen=True, slots=True)
class TxnRecord:
    transactional_id: str
    value: TxnValue | None
