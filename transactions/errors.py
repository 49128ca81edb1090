"""Kafka error codes the transaction coordinator produces (Kafka's numbering)."""

from __future__ import annotations

from enum import IntEnum


class TxnError(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    TOPIC_AUTHORIZATION_FAILED = 29
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_REQUEST = 42
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    OPERATION_NOT_ATTEMPTED = 55
    PRODUCER_FENCED = 90
    TRANSACTIONAL_ID_NOT_FOUND = 105
    TRANSACTION_ABORTABLE = 120


def for_version(error: TxnError, version: int, fenced_since: int) -> TxnError:
    """PRODUCER_FENCED exists from ``fenced_since`` (KIP-588); older clients are told
    INVALID_PRODUCER_EPOCH, which they treat as fatal in the same way (Kafka's KafkaApis)."""
    if error is TxnError.PRODUCER_FENCED and version < fenced_since:
        return TxnError.INVALID_PRODUCER_EPOCH
    return error
