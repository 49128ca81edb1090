"""The one sans-IO runtime under every coordinator: a context per partition this node leads,
ownership epochs, append coalescing and commit gating. (Kafka's group and share coordinators run
on one ``CoordinatorRuntime`` the same way.) A coordinator subclasses ``ShardRuntime`` and says
only what is its own: how its shard loads from records, what a request is answered while the
shard loads, the error response of a request, the error an append failure becomes, and effects
of its own (gated like responses, such as marker writes; or reported, such as group census).

Every call returns effects for the driver, which does the I/O:

- ``Append``: write these records to partition p at epoch e (one replicated entry, or several
  when they exceed the entry size). ``end_offset`` counts the records written to p up to the
  last of them; report it back with ``on_committed`` once the log holds them, or
  ``on_append_failed``.
- ``Respond``: send this response for this request token.
- ``Reload``: the shard was thrown away (a failed append); read the partition's committed log
  again and call ``complete_load``.

The rules, the same for every coordinator:

- **Gating.** A response (or a gated effect) leaves only when every record written before it
  was produced is committed: reads and no-op writes are ordered behind earlier writes, and no
  uncommitted state reaches a client or another partition.
- **Coalescing and order.** A partition has at most ``max_in_flight`` Appends outstanding;
  records produced meanwhile wait in its outbox and leave together, in order, as the next
  Append when one commits. Every interpreter (the drivers, the simulator, the test harnesses)
  therefore runs the same coalescing.
- **Epochs.** A leadership begins only at an epoch above the one held; an unload counts when
  its epoch is not below it; load, commit and failure notices count only at the epoch held.
- **Failure.** A failed append throws the shard away (its live state may be ahead of the log):
  every outstanding request is answered with the mapped error, gated effects are dropped (the
  next load resumes them from the log) and the partition reloads at the same epoch.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar

Token = Hashable


@dataclass(frozen=True, slots=True)
class Append:
    partition: int
    epoch: int
    records: tuple[Any, ...]
    end_offset: int


@dataclass(frozen=True, slots=True)
class Respond:
    token: Token
    response: Any


@dataclass(frozen=True, slots=True)
class Reload:
    partition: int
    epoch: int


class ContextState(Enum):
    LOADING = "loading"
    ACTIVE = "active"


class ShardResult(Protocol):
    """What a shard's step produced: records to write and responses to send (after them)."""

    records: list[Any]
    completions: list[tuple[Token, Any]]


ShardT = TypeVar("ShardT")
RequestT = TypeVar("RequestT")
ErrorT = TypeVar("ErrorT")


@dataclass(slots=True)
class Context(Generic[ShardT]):
    epoch: int
    shard: ShardT | None = None  # None while loading
    written: int = 0  # records produced by the shard (sent or still in the outbox)
    sent: int = 0  # end offset of the last Append emitted
    committed: int = 0
    outbox: list[Any] = field(default_factory=list)
    in_flight: deque[int] = field(default_factory=deque)  # end offsets of Appends not yet committed
    # (records written before it, then a request's token and response, or None and an effect of the
    # coordinator's own)
    gated: deque[tuple[int, Token | None, Any]] = field(default_factory=deque)
    outstanding: dict[Token, Any] = field(default_factory=dict)  # token -> request not yet answered

    @property
    def state(self) -> ContextState:
        return ContextState.LOADING if self.shard is None else ContextState.ACTIVE


class ShardRuntime(Generic[ShardT, RequestT, ErrorT]):
    """Shards per partition, epochs, coalescing and gating; see the module's rules."""

    not_coordinator: ErrorT  # what an unowned partition, an unload or a new leadership answer
    load_in_progress: ErrorT  # what a request to a loading shard is answered

    def __init__(self, max_in_flight: int = 1) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self.max_in_flight = max_in_flight
        self._contexts: dict[int, Context[ShardT]] = {}

    # ---------------------------------------------------------------- what a coordinator says

    def _load_shard(self, records: Iterable[Any], now_ms: int, image: Any) -> tuple[ShardT, ShardResult]:
        raise NotImplementedError

    def _handle(self, shard: ShardT, request: RequestT, token: Token, now_ms: int) -> ShardResult:
        raise NotImplementedError

    def _fire_once(self, shard: ShardT, now_ms: int) -> ShardResult | None:
        """The shard's earliest due timer fired, or None when nothing is due."""
        raise NotImplementedError

    def _next_deadline(self, shard: ShardT) -> int | None:
        raise NotImplementedError

    def _error_response(self, request: RequestT, error: ErrorT) -> Any:
        raise NotImplementedError

    def _loading_response(self, request: RequestT) -> Any:
        return self._error_response(request, self.load_in_progress)

    def _append_error(self, error: ErrorT) -> ErrorT:
        """What the waiters of a failed append are answered."""
        return error

    def _gated_effects(self, partition: int, epoch: int, result: ShardResult) -> list[Any]:
        """A coordinator's own effects of a step, released in order with its responses."""
        return []

    def _observed(self, partition: int, shard: ShardT, loaded: bool) -> list[Any]:
        """A coordinator's reports after a step (``loaded``: the shard was just loaded)."""
        return []

    def _dropped(self, partition: int, shard: ShardT | None) -> list[Any]:
        """The shard was thrown away (unloaded, or to be reloaded): a coordinator's effects."""
        return []

    # ---------------------------------------------------------------- inspection

    def state_of(self, partition: int) -> ContextState | None:
        ctx = self._contexts.get(partition)
        return ctx.state if ctx is not None else None

    def epoch_of(self, partition: int) -> int | None:
        ctx = self._contexts.get(partition)
        return ctx.epoch if ctx is not None else None

    def shard(self, partition: int) -> ShardT | None:
        ctx = self._contexts.get(partition)
        return ctx.shard if ctx is not None else None

    def partitions(self) -> list[int]:
        return sorted(self._contexts)

    def active_partitions(self) -> list[int]:
        return sorted(p for p, ctx in self._contexts.items() if ctx.shard is not None)

    def loading(self) -> bool:
        return any(ctx.shard is None for ctx in self._contexts.values())

    def pending(self, partition: int) -> int:
        ctx = self._contexts.get(partition)
        return len(ctx.outstanding) if ctx is not None else 0

    def uncommitted(self, partition: int) -> int:
        ctx = self._contexts.get(partition)
        return ctx.written - ctx.committed if ctx is not None else 0

    def unsent(self, partition: int) -> tuple[Any, ...]:
        """Records in the outbox: produced, waiting for an outstanding Append to commit."""
        ctx = self._contexts.get(partition)
        return tuple(ctx.outbox) if ctx is not None else ()

    # ---------------------------------------------------------------- ownership

    def begin_load(self, partition: int, epoch: int) -> list[Any]:
        """This node leads ``partition`` at ``epoch``: requests are answered load-in-progress."""
        ctx = self._contexts.get(partition)
        if ctx is not None and epoch <= ctx.epoch:
            return []
        effects = self._drop(partition, ctx, self.not_coordinator) if ctx is not None else []
        self._contexts[partition] = Context(epoch)
        return effects

    def complete_load(self, partition: int, epoch: int, records: Iterable[Any], now_ms: int,
                      image: Any = None) -> list[Any]:
        """Replay the partition's committed records (those after ``image``, when given) into a
        fresh shard and start serving."""
        ctx = self._contexts.get(partition)
        if ctx is None or ctx.epoch != epoch or ctx.shard is not None:
            return []
        shard, result = self._load_shard(records, now_ms, image)
        ctx.shard = shard
        effects = self._apply(partition, ctx, result)
        effects += self._observed(partition, shard, True)
        effects += self._fire_due(partition, ctx, now_ms)
        effects += self._observed(partition, shard, False)
        return effects

    def unload(self, partition: int, epoch: int) -> list[Any]:
        """Leadership lost (``epoch`` is the new leadership's): drop the shard, fail waiters."""
        ctx = self._contexts.get(partition)
        if ctx is None or epoch < ctx.epoch:
            return []
        del self._contexts[partition]
        return self._drop(partition, ctx, self.not_coordinator)

    # ---------------------------------------------------------------- steps

    def submit(self, partition: int, request: RequestT, token: Token, now_ms: int) -> list[Any]:
        ctx = self._contexts.get(partition)
        if ctx is None:
            return [Respond(token, self._error_response(request, self.not_coordinator))]
        if ctx.shard is None:
            return [Respond(token, self._loading_response(request))]
        ctx.outstanding[token] = request
        effects = self._apply(partition, ctx, self._handle(ctx.shard, request, token, now_ms))
        effects += self._fire_due(partition, ctx, now_ms)
        effects += self._observed(partition, ctx.shard, False)
        return effects

    def on_committed(self, partition: int, epoch: int, end_offset: int) -> list[Any]:
        ctx = self._contexts.get(partition)
        if ctx is None or ctx.epoch != epoch or ctx.shard is None:
            return []
        end_offset = min(end_offset, ctx.sent)  # the outbox's records are not in the log yet
        if end_offset <= ctx.committed:
            return []
        ctx.committed = end_offset
        while ctx.in_flight and ctx.in_flight[0] <= end_offset:
            ctx.in_flight.popleft()
        effects: list[Any] = []
        while ctx.gated and ctx.gated[0][0] <= ctx.committed:
            _, token, item = ctx.gated.popleft()
            if token is None:
                effects.append(item)
            elif ctx.outstanding.pop(token, None) is not None:
                effects.append(Respond(token, item))
        effects += self._send(partition, ctx)
        return effects

    def on_append_failed(self, partition: int, epoch: int, error: ErrorT) -> list[Any]:
        """An append failed or its outcome is unknown: throw the shard away and reload it."""
        ctx = self._contexts.get(partition)
        if ctx is None or ctx.epoch != epoch or ctx.shard is None:
            return []
        self._contexts[partition] = Context(epoch)
        return [*self._drop(partition, ctx, self._append_error(error)), Reload(partition, epoch)]

    # ---------------------------------------------------------------- timers

    def next_deadline(self) -> int | None:
        due = [d for ctx in self._contexts.values() if ctx.shard is not None
               for d in (self._next_deadline(ctx.shard),) if d is not None]
        return min(due, default=None)

    def advance(self, now_ms: int) -> list[Any]:
        effects: list[Any] = []
        for partition, ctx in list(self._contexts.items()):
            if ctx.shard is not None:
                effects += self._fire_due(partition, ctx, now_ms)
                effects += self._observed(partition, ctx.shard, False)
        return effects

    # ---------------------------------------------------------------- internals

    def _fire_due(self, partition: int, ctx: Context[ShardT], now_ms: int) -> list[Any]:
        effects: list[Any] = []
        while ctx.shard is not None and self._contexts.get(partition) is ctx:
            result = self._fire_once(ctx.shard, now_ms)
            if result is None:
                break
            effects += self._apply(partition, ctx, result)
        return effects

    def _apply(self, partition: int, ctx: Context[ShardT], result: ShardResult) -> list[Any]:
        effects = self._write(partition, ctx, result.records)
        items: list[tuple[Token | None, Any]] = [(None, e) for e in self._gated_effects(partition, ctx.epoch, result)]
        items += [(token, response) for token, response in result.completions if token in ctx.outstanding]
        for token, item in items:
            if ctx.gated or ctx.committed < ctx.written:
                ctx.gated.append((ctx.written, token, item))
            elif token is None:
                effects.append(item)  # nothing of this partition is uncommitted: no need to wait
            else:
                del ctx.outstanding[token]
                effects.append(Respond(token, item))
        return effects

    def _write(self, partition: int, ctx: Context[ShardT], records: list[Any]) -> list[Any]:
        if records:
            ctx.written += len(records)
            ctx.outbox.extend(records)
        return self._send(partition, ctx)

    def _send(self, partition: int, ctx: Context[ShardT]) -> list[Any]:
        """Everything in the outbox as one Append, unless the partition already has
        ``max_in_flight`` outstanding (then it goes when one of them commits)."""
        if not ctx.outbox or len(ctx.in_flight) >= self.max_in_flight:
            return []
        records, ctx.outbox = tuple(ctx.outbox), []
        ctx.sent = ctx.written
        ctx.in_flight.append(ctx.sent)
        return [Append(partition, ctx.epoch, records, ctx.sent)]

    def _drop(self, partition: int, ctx: Context[ShardT], error: ErrorT) -> list[Any]:
        """Answer every outstanding request with ``error``; gated effects of the coordinator's
        own are dropped (whoever loads the partition next resumes them from the log)."""
        effects: list[Any] = [Respond(token, self._error_response(request, error))
                              for token, request in ctx.outstanding.items()]
        ctx.outstanding.clear()
        ctx.gated.clear()
        return effects + self._dropped(partition, ctx.shard)
