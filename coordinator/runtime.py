"""The sans-IO coordinator runtime: shards per partition, epochs, and commit gating.

The runtime owns one context per ``__consumer_offsets`` partition this node leads.
Every call returns effects for the driver (which does the I/O):

- ``Append``: write these records to partition p at epoch e. ``end_offset`` is the
  runtime's own count of records written so far; report it back through
  ``on_committed`` once the log holds them (many Appends may go into one entry).
- ``Respond``: send this response for this request token.
- ``Reload``: the shard was thrown away (failed append); read the partition's
  committed log again and call ``complete_load``.

Rule: a response leaves only when every record written before it was produced is
committed. Reads and no-op writes are therefore ordered behind earlier writes, and no
uncommitted state reaches a client. Ownership changes carry an epoch; stale loads,
unloads and commit notices are ignored.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum

from . import commands as c
from .config import GroupConfig
from .errors import ErrorCode, map_append_error
from .group import Token
from .image import DurableImage
from .records import Record
from .shard import GroupCoordinatorShard, Result


@dataclass(frozen=True, slots=True)
class Append:
    partition: int
    epoch: int
    records: tuple[Record, ...]
    end_offset: int


@dataclass(frozen=True, slots=True)
class Respond:
    token: Token
    response: c.Response


@dataclass(frozen=True, slots=True)
class Reload:
    partition: int
    epoch: int


Effect = Append | Respond | Reload


class ContextState(Enum):
    LOADING = "loading"
    ACTIVE = "active"


@dataclass(slots=True)
class _Context:
    epoch: int
    state: ContextState = ContextState.LOADING
    shard: GroupCoordinatorShard | None = None
    written: int = 0
    committed: int = 0
    gated: deque[tuple[int, Token, c.Response]] = field(default_factory=deque)
    outstanding: dict[Token, c.Request] = field(default_factory=dict)


class CoordinatorRuntime:
    def __init__(self, config: GroupConfig | None = None, new_id: Callable[[], str] | None = None) -> None:
        self.config = config or GroupConfig()
        self._new_id = new_id
        self._contexts: dict[int, _Context] = {}

    # ---------------------------------------------------------------- inspection

    def state_of(self, partition: int) -> ContextState | None:
        ctx = self._contexts.get(partition)
        return ctx.state if ctx else None

    def epoch_of(self, partition: int) -> int | None:
        ctx = self._contexts.get(partition)
        return ctx.epoch if ctx else None

    def shard(self, partition: int) -> GroupCoordinatorShard | None:
        ctx = self._contexts.get(partition)
        return ctx.shard if ctx else None

    def partitions(self) -> list[int]:
        return sorted(self._contexts)

    def active_partitions(self) -> list[int]:
        return sorted(p for p, ctx in self._contexts.items() if ctx.state is ContextState.ACTIVE)

    def pending(self, partition: int) -> int:
        ctx = self._contexts.get(partition)
        return len(ctx.outstanding) if ctx else 0

    def uncommitted(self, partition: int) -> int:
        ctx = self._contexts.get(partition)
        return ctx.written - ctx.committed if ctx else 0

    # ---------------------------------------------------------------- ownership

    def begin_load(self, partition: int, epoch: int) -> list[Effect]:
        """This node became leader at ``epoch``: requests now get LOAD_IN_PROGRESS."""
        ctx = self._contexts.get(partition)
        if ctx is not None and epoch <= ctx.epoch:
            return []
        effects = self._fail_all(ctx, ErrorCode.NOT_COORDINATOR) if ctx else []
        self._contexts[partition] = _Context(epoch)
        return effects

    def complete_load(self, partition: int, epoch: int, records: Iterable[Record], now_ms: int,
                      image: DurableImage | None = None) -> list[Effect]:
        """Replay the partition's committed records (those after ``image``, when given) into a
        fresh shard and start serving."""
        ctx = self._contexts.get(partition)
        if ctx is None or ctx.epoch != epoch or ctx.state is not ContextState.LOADING:
            return []
        shard, result = GroupCoordinatorShard.load(records, now_ms, self.config, self._new_id, image)
        ctx.shard = shard
        ctx.state = ContextState.ACTIVE
        ctx.written = ctx.committed = 0
        effects = self._apply(partition, ctx, result)
        effects += self._fire_due(partition, ctx, now_ms)
        return effects

    def unload(self, partition: int, epoch: int) -> list[Effect]:
        """Leadership lost (``epoch`` is the new leadership's): drop the shard, fail waiters."""
        ctx = self._contexts.get(partition)
        if ctx is None or epoch < ctx.epoch:
            return []
        if ctx.shard is not None:
            ctx.shard.unload()
        del self._contexts[partition]
        return self._fail_all(ctx, ErrorCode.NOT_COORDINATOR)

    # ---------------------------------------------------------------- requests

    def submit(self, partition: int, request: c.Request, token: Token, now_ms: int) -> list[Effect]:
        ctx = self._contexts.get(partition)
        if ctx is None:
            return [Respond(token, c.error_response(request, ErrorCode.NOT_COORDINATOR))]
        if ctx.state is ContextState.LOADING or ctx.shard is None:
            if isinstance(request, c.HeartbeatRequest):
                # Kafka answers heartbeats blindly while loading.
                return [Respond(token, c.HeartbeatResponse(ErrorCode.NONE))]
            return [Respond(token, c.error_response(request, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))]
        ctx.outstanding[token] = request
        effects = self._apply(partition, ctx, ctx.shard.handle(request, token, now_ms))
        effects += self._fire_due(partition, ctx, now_ms)
        return effects

    def on_committed(self, partition: int, epoch: int, end_offset: int) -> list[Effect]:
        ctx = self._contexts.get(partition)
        if ctx is None or ctx.epoch != epoch or ctx.state is not ContextState.ACTIVE:
            return []
        if end_offset > ctx.written:
            end_offset = ctx.written
        if end_offset <= ctx.committed:
            return []
        ctx.committed = end_offset
        effects: list[Effect] = []
        while ctx.gated and ctx.gated[0][0] <= ctx.committed:
            _, token, response = ctx.gated.popleft()
            if ctx.outstanding.pop(token, None) is not None:
                effects.append(Respond(token, response))
        return effects

    def on_append_failed(self, partition: int, epoch: int, error: ErrorCode) -> list[Effect]:
        """An append failed or its outcome is unknown: throw the shard away and reload it."""
        ctx = self._contexts.get(partition)
        if ctx is None or ctx.epoch != epoch or ctx.state is not ContextState.ACTIVE:
            return []
        if ctx.shard is not None:
            ctx.shard.unload()
        effects = self._fail_all(ctx, map_append_error(error))
        self._contexts[partition] = _Context(epoch)
        effects.append(Reload(partition, epoch))
        return effects

    # ---------------------------------------------------------------- timers

    def next_deadline(self) -> int | None:
        deadlines = [
            d for ctx in self._contexts.values()
            if ctx.shard is not None and ctx.state is ContextState.ACTIVE
            and (d := ctx.shard.next_deadline()) is not None
        ]
        return min(deadlines) if deadlines else None

    def advance(self, now_ms: int) -> list[Effect]:
        effects: list[Effect] = []
        for partition, ctx in list(self._contexts.items()):
            if ctx.state is ContextState.ACTIVE:
                effects += self._fire_due(partition, ctx, now_ms)
        return effects

    # ---------------------------------------------------------------- internals

    def _fire_due(self, partition: int, ctx: _Context, now_ms: int) -> list[Effect]:
        effects: list[Effect] = []
        while ctx.shard is not None and self._contexts.get(partition) is ctx:
            result = ctx.shard.fire_due(now_ms)
            if result is None:
                break
            effects += self._apply(partition, ctx, result)
        return effects

    def _apply(self, partition: int, ctx: _Context, result: Result) -> list[Effect]:
        effects: list[Effect] = []
        if result.records:
            ctx.written += len(result.records)
            effects.append(Append(partition, ctx.epoch, tuple(result.records), ctx.written))
        for token, response in result.completions:
            if token not in ctx.outstanding:
                continue
            if ctx.committed >= ctx.written and not ctx.gated:
                del ctx.outstanding[token]
                effects.append(Respond(token, response))
            else:
                ctx.gated.append((ctx.written, token, response))
        return effects

    @staticmethod
    def _fail_all(ctx: _Context, error: ErrorCode) -> list[Effect]:
        effects: list[Effect] = [
            Respond(token, c.error_response(request, error)) for token, request in ctx.outstanding.items()
        ]
        ctx.outstanding.clear()
        ctx.gated.clear()
        return effects
