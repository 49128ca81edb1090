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
    # Transaction version 2 (KIP-890 part 2), Kafka's tagged fields: the id before the last
    # rotation, the id a decided transaction rotates to when its epoch ran out, and the version
    # the transaction's client speaks (2: every end bumps the epoch)
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_version: int = 0


@dataclass(frozen=True, slots=True)
class TxnRecord:
    transactional_id: str
    value: TxnValue | None
