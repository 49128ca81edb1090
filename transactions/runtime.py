"""The sans-IO transaction coordinator runtime: a shard per ``__transaction_state`` partition,
ownership epochs, and commit gating.

Every call returns effects for the driver, which does the I/O:

- ``Append``: write these records to partition p at epoch e (one replicated entry);
  ``end_offset`` counts the records written to p up to the last of them. Report it back with
  ``on_committed`` once the log holds them, or ``on_append_failed``.
- ``Respond``: send this response for this request token.
- ``SendMarkers``: write the markers of a decided transaction, then call ``markers_written``.
- ``Reload``: the shard was thrown away (a failed append); read the committed log again and
  call ``complete_load``.

A response or a marker write leaves only when every record written before it was produced is
committed: the decision is durable before the client hears of it or any partition sees a
marker. Ownership changes carry an epoch (the partition's leadership epoch, which markers
carry as the coordinator epoch); stale loads, unloads, commit notices and marker notices are
ignored.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from . import commands as c
from .config import TxnConfig
from .errors import TxnError
from .records import TxnRecord
from .shard import Result, TransactionShard

E = TxnError


@dataclass(frozen=True, slots=True)
class Append:
    partition: int
    epoch: int
    records: tuple[TxnRecord, ...]
    end_offset: int


@dataclass(frozen=True, slots=True)
class Respond:
    token: Hashable
    response: c.Response


@dataclass(frozen=True, slots=True)
class SendMarkers:
    partition: int
    epoch: int  # the coordinator epoch the markers carry
    markers: c.WriteMarkers


@dataclass(frozen=True, slots=True)
class Reload:
    partition: int
    epoch: int


Effect = Append | Respond | SendMarkers | Reload


@dataclass(slots=True)
class _Context:
    epoch: int
    shard: TransactionShard | None = None  # None while loading
    written: int = 0  # records handed out in Appends
    committed: int = 0
    waiting: deque[tuple[int, Respond | SendMarkers]] = field(default_factory=deque)


class TransactionRuntime:
    def __init__(self, config: TxnConfig | None = None) -> None:
        self.config = config or TxnConfig()
        self._contexts: dict[int, _Context] = {}

    # ---------------------------------------------------------------- reads

    def shard(self, partition: int) -> TransactionShard | None:
        ctx = self._contexts.get(partition)
        return ctx.shard if ctx is not None else None

    def epoch_of(self, partition: int) -> int | None:
        ctx = self._contexts.get(partition)
        return ctx.epoch if ctx is not None else None

    def active_partitions(self) -> list[int]:
        return sorted(p for p, ctx in self._contexts.items() if ctx.shard is not None)

    def open_transactions(self) -> int:
        return sum(ctx.shard.open for ctx in self._contexts.values() if ctx.shard is not None)

    def loading(self) -> bool:
        return any(ctx.shard is None for ctx in self._contexts.values())

    # ---------------------------------------------------------------- ownership

    def begin_load(self, partition: int, epoch: int) -> list[Effect]:
        old = self._contexts.get(partition)
        if old is not None and epoch < old.epoch:
            return []
        self._contexts[partition] = _Context(epoch)
        return _fail_all(old, E.NOT_COORDINATOR) if old is not None else []

    def complete_load(self, partition: int, epoch: int, records: Iterable[TxnRecord], now_ms: int) -> list[Effect]:
        ctx = self._contexts.get(partition)
        if ctx is None or ctx.epoch != epoch or ctx.shard is not None:
            return []
        ctx.shard, result = TransactionShard.load(records, now_ms, self.config)
        return self._apply(partition, ctx, result)

    def unload(self, partition: int, epoch: int) -> list[Effect]:
        ctx = self._contexts.get(partition)
        if ctx is None or epoch < ctx.epoch:
            return []
        del self._contexts[partition]
        return _fail_all(ctx, E.NOT_COORDINATOR)

    # ---------------------------------------------------------------- steps

    def submit(self, partition: int, request: c.Request, token: Hashable, now_ms: int) -> list[Effect]:
        ctx = self._contexts.get(partition)
        if ctx is None or ctx.shard is None:
            error = E.NOT_COORDINATOR if ctx is None else E.COORDINATOR_LOAD_IN_PROGRESS
            return [Respond(token, error_response(request, error))]
        return self._apply(partition, ctx, ctx.shard.handle(request, token, now_ms))

    def markers_written(self, partition: int, epoch: int, markers: c.WriteMarkers, now_ms: int) -> list[Effect]:
        ctx = self._contexts.get(partition)
        if ctx is None or ctx.epoch != epoch or ctx.shard is None:
            return []  # the next owner resumes the transaction from its decision
        result = ctx.shard.markers_written(markers.transactional_id, markers.producer_id, markers.producer_epoch,
                                           markers.commit, now_ms)
        return self._apply(partition, ctx, result)

    def on_committed(self, partition: int, epoch: int, end_offset: int) -> list[Effect]:
        ctx = self._contexts.get(partition)
        if ctx is None or ctx.epoch != epoch or ctx.shard is None:
            return []
        ctx.committed = max(ctx.committed, end_offset)
        out: list[Effect] = []
        while ctx.waiting and ctx.waiting[0][0] <= ctx.committed:
            out.append(ctx.waiting.popleft()[1])
        return out

    def on_append_failed(self, partition: int, epoch: int, error: TxnError) -> list[Effect]:
        """The shard's live state may now be ahead of the log: throw it away and reload."""
        ctx = self._contexts.get(partition)
        if ctx is None or ctx.epoch != epoch or ctx.shard is None:
            return []
        self._contexts[partition] = _Context(epoch)
        return [*_fail_all(ctx, error), Reload(partition, epoch)]

    def next_deadline(self) -> int | None:
        due = [d for ctx in self._contexts.values() if ctx.shard is not None
               for d in (ctx.shard.next_deadline(),) if d is not None]
        return min(due, default=None)

    def advance(self, now_ms: int) -> list[Effect]:
        out: list[Effect] = []
        for p, ctx in list(self._contexts.items()):
            if ctx.shard is not None and (d := ctx.shard.next_deadline()) is not None and d <= now_ms:
                out += self._apply(p, ctx, ctx.shard.fire_due(now_ms))
        return out

    # ---------------------------------------------------------------- plumbing

    def _apply(self, partition: int, ctx: _Context, result: Result) -> list[Effect]:
        out: list[Effect] = []
        if result.records:
            ctx.written += len(result.records)
            out.append(Append(partition, ctx.epoch, tuple(result.records), ctx.written))
        gated: list[Respond | SendMarkers] = [SendMarkers(partition, ctx.epoch, m) for m in result.markers]
        gated += [Respond(token, response) for token, response in result.completions]
        for effect in gated:
            if not ctx.waiting and ctx.written <= ctx.committed:
                out.append(effect)  # nothing of this partition is uncommitted: no need to wait
            else:
                ctx.waiting.append((ctx.written, effect))
        return out


def _fail_all(ctx: _Context, error: TxnError) -> list[Effect]:
    """Answer every waiting request with ``error``; marker writes not yet released are dropped
    (whoever loads the partition next resumes them from the decision in the log)."""
    return [Respond(e.token, error_response(e.response, error)) for _, e in ctx.waiting if isinstance(e, Respond)]


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
