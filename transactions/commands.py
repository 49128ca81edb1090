"""What the transaction coordinator is asked and answers, free of the wire format.

The wire layer turns AddOffsetsToTxn into ``AddPartitions`` of the group's
``__consumer_offsets`` partition, as Kafka does, and maps PRODUCER_FENCED down for old
request versions (``errors.for_version``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import TxnError
from .records import TopicPartition


@dataclass(frozen=True, slots=True)
class InitProducerId:
    transactional_id: str
    timeout_ms: int
    producer_id: int = -1  # KIP-360: the producer's current id and epoch, or -1/-1
    producer_epoch: int = -1
    fresh_producer_id: int = -1  # an unused id the node drew for this request; -1 = none at hand


@dataclass(frozen=True, slots=True)
class InitProducerIdResponse:
    error: TxnError
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class AddPartitions:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    version: int = 1  # 2: added by a partition leader for a client that sent no AddPartitionsToTxn


@dataclass(frozen=True, slots=True)
class VerifyPartitions:
    """Is each partition part of the producer's open transaction? A partition leader asks before
    it lets a transactional batch open a transaction on the partition (KIP-890 part 1), so a
    late batch of a finished transaction cannot open one that no marker will ever close.
    Answered with ``AddPartitionsResponse``; nothing is written."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class AddPartitionsResponse:
    errors: dict[TopicPartition, TxnError]

    @property
    def error(self) -> TxnError:
        """The one error of the request (all partitions share it), for AddOffsetsToTxn."""
        return next(iter(self.errors.values()), TxnError.NONE)


@dataclass(frozen=True, slots=True)
class EndTxn:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    version: int = 1  # the client's transaction version: 2 (EndTxn v5+) bumps the epoch at every end
    fresh_producer_id: int = -1  # an unused id, for an end whose bump exhausts the epoch (-1: none at hand)


@dataclass(frozen=True, slots=True)
class EndTxnResponse:
    error: TxnError
    producer_id: int = -1  # version 2: the producer's id and epoch for its next transaction
    producer_epoch: int = -1
    wants_producer_id: bool = False  # the end exhausts the epoch: ask again with a new id at hand


@dataclass(frozen=True, slots=True)
class DescribeTransactions:
    transactional_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DescribedTransaction:
    transactional_id: str
    error: TxnError
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeTransactionsResponse:
    transactions: tuple[DescribedTransaction, ...]


@dataclass(frozen=True, slots=True)
class ListTransactions:
    states: tuple[str, ...] = ()  # empty = every state
    producer_ids: tuple[int, ...] = ()  # empty = every producer
    duration_ms: int = -1  # only transactions open longer than this (v1); -1 = no filter


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class ListTransactionsResponse:
    transactions: tuple[ListedTransaction, ...]
    unknown_states: tuple[str, ...] = ()
    error: TxnError = TxnError.NONE


@dataclass(frozen=True, slots=True)
class WriteMarkers:
    """Write a COMMIT or ABORT marker to every partition of a decided transaction, then tell the
    coordinator (``markers_written``). Released only once the decision is committed."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]
    version: int = 1  # 2: the epoch is the transaction's bumped one (above its data's)


Request = InitProducerId | AddPartitions | VerifyPartitions | EndTxn | DescribeTransactions | ListTransactions
Response = (InitProducerIdResponse | AddPartitionsResponse | EndTxnResponse
            | DescribeTransactionsResponse | ListTransactionsResponse)
