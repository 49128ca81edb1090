"""The transaction coordinator on the one runtime (``coordinator_common.runtime``): shards per
``__transaction_state`` partition, epochs, append coalescing and commit gating are the common
runtime's; what is the transaction coordinator's own is said here: how a shard loads, Kafka's
error responses, and ``SendMarkers``, the marker writes of a decided transaction, gated like
responses (the decision is durable before any partition sees a marker) and reported back
through ``markers_written``. Ownership epochs are the partitions' leadership epochs, which
markers carry as the coordinator epoch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from coordinator_common.runtime import Append, Reload, Respond, ShardResult, ShardRuntime

from . import commands as c
from .config import TxnConfig
from .errors import TxnError
from .shard import Token, TransactionShard

__all__ = ["Append", "Effect", "Reload", "Respond", "SendMarkers", "TransactionRuntime", "error_response"]


@dataclass(frozen=True, slots=True)
class SendMarkers:
    partition: int
    epoch: int  # the coordinator epoch the markers carry
    markers: c.WriteMarkers


Effect = Append | Respond | SendMarkers | Reload


class TransactionRuntime(ShardRuntime[TransactionShard, c.Request, TxnError]):
    not_coordinator = TxnError.NOT_COORDINATOR
    load_in_progress = TxnError.COORDINATOR_LOAD_IN_PROGRESS

    def __init__(self, config: TxnConfig | None = None) -> None:
        super().__init__()
        self.config = config or TxnConfig()

    def open_transactions(self) -> int:
        return sum(ctx.shard.open for ctx in self._contexts.values() if ctx.shard is not None)

    def markers_written(self, partition: int, epoch: int, markers: c.WriteMarkers, now_ms: int) -> list[Any]:
        ctx = self._contexts.get(partition)
        if ctx is None or ctx.epoch != epoch or ctx.shard is None:
            return []  # the next owner resumes the transaction from its decision
        result = ctx.shard.markers_written(markers.transactional_id, markers.producer_id, markers.producer_epoch,
                                           markers.commit, now_ms)
        return self._apply(partition, ctx, result)

    def _load_shard(self, records: Iterable[Any], now_ms: int, image: Any) -> tuple[TransactionShard, ShardResult]:
        return TransactionShard.load(records, now_ms, self.config)

    def _handle(self, shard: TransactionShard, request: c.Request, token: Token, now_ms: int) -> ShardResult:
        return shard.handle(request, token, now_ms)

    def _fire_once(self, shard: TransactionShard, now_ms: int) -> ShardResult | None:
        due = shard.next_deadline()
        return shard.fire_due(now_ms) if due is not None and due <= now_ms else None

    def _next_deadline(self, shard: TransactionShard) -> int | None:
        return shard.next_deadline()

    def _error_response(self, request: c.Request, error: TxnError) -> c.Response:
        return error_response(request, error)

    def _gated_effects(self, partition: int, epoch: int, result: ShardResult) -> list[Any]:
        return [SendMarkers(partition, epoch, m) for m in getattr(result, "markers", ())]


def error_response(request: c.Request | c.Response, error: TxnError) -> c.Response:
    """The answer to ``request`` (or the response a request was about to get) that carries
    only ``error``."""
    if isinstance(request, c.InitProducerId | c.InitProducerIdResponse):
        return c.InitProducerIdResponse(error)
    if isinstance(request, c.AddPartitions | c.VerifyPartitions):
        return c.AddPartitionsResponse({tp: error for tp in request.partitions})
    if isinstance(request, c.AddPartitionsResponse):
        return c.AddPartitionsResponse({tp: error for tp in request.errors})
    if isinstance(request, c.EndTxn | c.EndTxnResponse):
        return c.EndTxnResponse(error)
    if isinstance(request, c.DescribeTransactions):
        return c.DescribeTransactionsResponse(tuple(c.DescribedTransaction(t, error) for t in request.transactional_ids))
    if isinstance(request, c.DescribeTransactionsResponse):
        return c.DescribeTransactionsResponse(tuple(c.DescribedTransaction(t.transactional_id, error)
                                                    for t in request.transactions))
    return c.ListTransactionsResponse((), error=error)
