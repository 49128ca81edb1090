"""The sans-IO coordinator runtime: shards per partition, epochs, and commit gating.

The runtime owns one context per ``__consumer_offsets`` partition this node leads.
Every call returns effects for the driver (which does the I/O):

- ``Append``: write these records to partition p at epoch e as one replicated entry (or
  several, if they exceed the entry size). ``end_offset`` is the runtime's own count of
  records written up to the last of them; report it back through ``on_committed`` once the
  log holds them, or ``on_append_failed``.
- ``Respond``: send this response for this request token.
- ``Reload``: the shard was thrown away (failed append); read the partition's
  committed log again and call ``complete_load``.

Group commit is the runtime's too: a partition has at most ``max_in_flight`` Appends
outstanding; records produced meanwhile wait in its outbox and leave together as the next
Append when one commits. Every interpreter (the asyncio driver, the simulator, the test
harnesses) therefore runs the same coalescing.

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
from .group_census import GroupView
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


@dataclass(frozen=True, slots=True)
class GroupsObserved:
    """Groups of ``partition`` whose state or member count changed (``reset``: forget what was
    reported of the partition before; it was loaded, or unloaded when ``groups`` is empty)."""

    partition: int
    groups: tuple[GroupView, ...]
    reset: bool = False


Effect = Append | Respond | Reload | GroupsObserved


class ContextState(Enum):
    LOADING = "loading"
    ACTIVE = "active"


@dataclass(slots=True)
class _Context:
    epoch: int
    state: ContextState = ContextState.LOADING
    shard: GroupCoordinatorShard | None = None
    written: int = 0  # records produced by the shard (sent or still in the outbox)
    sent: int = 0  # end offset of the last Append emitted
    committed: int = 0
    outbox: list[Record] = field(default_factory=list)
    in_flight: deque[int] = field(default_factory=deque)  # end offsets of Appends not yet committed
    gated: deque[tuple[int, Token, c.Response]] = field(default_factory=deque)
    outstanding: dict[Token, c.Request] = field(default_factory=dict)


class CoordinatorRuntime:
    def __init__(self, config: GroupConfig | None = None, new_id: Callable[[], str] | None = None,
                 max_in_flight: int = 1) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self.config = config or GroupConfig()
        self.max_in_flight = max_in_flight
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

    def unsent(self, partition: int) -> tuple[Record, ...]:
        """Records in the outbox: produced, waiting for an outstanding Append to commit."""
        ctx = self._contexts.get(partition)
        return tuple(ctx.outbox) if ctx else ()

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
        ctx.written = ctx.sent = ctx.committed = 0
        effects = self._apply(partition, ctx, result)
        effects.append(GroupsObserved(partition, tuple(shard.census.everything(shard.groups, shard.consumer_groups)), reset=True))
        effects += self._fire_due(partition, ctx, now_ms)
        self._observe(partition, ctx, effects)
        return effects

    def unload(self, partition: int, epoch: int) -> list[Effect]:
        """Leadership lost (``epoch`` is the new leadership's): drop the shard, fail waiters."""
        ctx = self._contexts.get(partition)
        if ctx is None or epoch < ctx.epoch:
            return []
        if ctx.shard is not None:
            ctx.shard.unload()
        del self._contexts[partition]
        return [*self._fail_all(ctx, ErrorCode.NOT_COORDINATOR), GroupsObserved(partition, (), reset=True)]

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
        self._observe(partition, ctx, effects)
        return effects

    def on_committed(self, partition: int, epoch: int, end_offset: int) -> list[Effect]:
        ctx = self._contexts.get(partition)
        if ctx is None or ctx.epoch != epoch or ctx.state is not ContextState.ACTIVE:
            return []
        if end_offset > ctx.sent:
            end_offset = ctx.sent  # the outbox's records are not in the log yet
        if end_offset <= ctx.committed:
            return []
        ctx.committed = end_offset
        while ctx.in_flight and ctx.in_flight[0] <= end_offset:
            ctx.in_flight.popleft()
        effects: list[Effect] = []
        while ctx.gated and ctx.gated[0][0] <= ctx.committed:
            _, token, response = ctx.gated.popleft()
            if ctx.outstanding.pop(token, None) is not None:
                effects.append(Respond(token, response))
        effects += self._send(partition, ctx)
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
        effects.append(GroupsObserved(partition, (), reset=True))
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
                self._observe(partition, ctx, effects)
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

    @staticmethod
    def _observe(partition: int, ctx: _Context, effects: list[Effect]) -> None:
        if ctx.shard is not None and (views := ctx.shard.census.changes(ctx.shard.groups, ctx.shard.consumer_groups)):
            effects.append(GroupsObserved(partition, tuple(views)))

    def _apply(self, partition: int, ctx: _Context, result: Result) -> list[Effect]:
        effects = self._write(partition, ctx, result.records)
        for token, response in result.completions:
            if token not in ctx.outstanding:
                continue
            if ctx.committed >= ctx.written and not ctx.gated:
                del ctx.outstanding[token]
                effects.append(Respond(token, response))
            else:
                ctx.gated.append((ctx.written, token, response))
        return effects

    def _write(self, partition: int, ctx: _Context, records: list[Record]) -> list[Effect]:
        if records:
            ctx.written += len(records)
            ctx.outbox.extend(records)
        return self._send(partition, ctx)

    def _send(self, partition: int, ctx: _Context) -> list[Effect]:
        """Everything in the outbox as one Append, unless the partition already has
        ``max_in_flight`` outstanding (then it goes when one of them commits)."""
        if not ctx.outbox or len(ctx.in_flight) >= self.max_in_flight:
            return []
        records, ctx.outbox = tuple(ctx.outbox), []
        ctx.sent = ctx.written
        ctx.in_flight.append(ctx.sent)
        return [Append(partition, ctx.epoch, records, ctx.sent)]

    @staticmethod
    def _fail_all(ctx: _Context, error: ErrorCode) -> list[Effect]:
        effects: list[Effect] = [
            Respond(token, c.error_response(request, error)) for token, request in ctx.outstanding.items()
        ]
        ctx.outstanding.clear()
        ctx.gated.clear()
        return effects
