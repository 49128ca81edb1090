"""The group coordinator on the one runtime (``coordinator_common.runtime``): shards per
``__consumer_offsets`` partition, epochs, append coalescing and commit gating are the common
runtime's; what is the group coordinator's own is said here: how a shard loads (from records,
after a durable image), that a heartbeat is answered blindly while a shard loads (as Kafka
does), Kafka's mapping of append errors, and the census of groups it reports (``GroupsObserved``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from coordinator_common.runtime import Append, ContextState, Reload, Respond, ShardResult, ShardRuntime

from . import commands as c
from .config import GroupConfig
from .errors import ErrorCode, map_append_error
from .group import Token
from .group_census import GroupView
from .image import DurableImage
from .shard import GroupCoordinatorShard

__all__ = ["Append", "ContextState", "CoordinatorRuntime", "Effect", "GroupEvents", "GroupsObserved", "Reload",
           "Respond"]


@dataclass(frozen=True, slots=True)
class GroupsObserved:
    """Groups of ``partition`` whose state or member count changed (``reset``: forget what was
    reported of the partition before; it was loaded, or unloaded when ``groups`` is empty)."""

    partition: int
    groups: tuple[GroupView, ...]
    reset: bool = False


@dataclass(frozen=True, slots=True)
class GroupEvents:
    """What happened to groups of ``partition`` that an operator reads in the log: each an event
    name and its fields (a rebalance and its reason, a member removed)."""

    partition: int
    events: tuple[tuple[str, tuple[tuple[str, object], ...]], ...]


Effect = Append | Respond | Reload | GroupsObserved | GroupEvents


class CoordinatorRuntime(ShardRuntime[GroupCoordinatorShard, c.Request, ErrorCode]):
    not_coordinator = ErrorCode.NOT_COORDINATOR
    load_in_progress = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    def __init__(self, config: GroupConfig | None = None, new_id: Callable[[], str] | None = None,
                 max_in_flight: int = 1) -> None:
        super().__init__(max_in_flight)
        self.config = config or GroupConfig()
        self._new_id = new_id

    def _load_shard(self, records: Iterable[Any], now_ms: int, image: Any) -> tuple[GroupCoordinatorShard, ShardResult]:
        image = image if isinstance(image, DurableImage) else None
        return GroupCoordinatorShard.load(records, now_ms, self.config, self._new_id, image)

    def _handle(self, shard: GroupCoordinatorShard, request: c.Request, token: Token, now_ms: int) -> ShardResult:
        return shard.handle(request, token, now_ms)

    def _fire_once(self, shard: GroupCoordinatorShard, now_ms: int) -> ShardResult | None:
        return shard.fire_due(now_ms)

    def _next_deadline(self, shard: GroupCoordinatorShard) -> int | None:
        return shard.next_deadline()

    def _error_response(self, request: c.Request, error: ErrorCode) -> c.Response:
        return c.error_response(request, error)

    def _loading_response(self, request: c.Request) -> c.Response:
        if isinstance(request, c.HeartbeatRequest):
            return c.HeartbeatResponse(ErrorCode.NONE)  # Kafka answers heartbeats blindly while loading
        return c.error_response(request, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)

    def _append_error(self, error: ErrorCode) -> ErrorCode:
        return map_append_error(error)

    def _observed(self, partition: int, shard: GroupCoordinatorShard, loaded: bool) -> list[Any]:
        notes = shard.w.take_notes()
        effects: list[Any] = [GroupEvents(partition, tuple(notes))] if notes else []
        if loaded:
            return [*effects, GroupsObserved(partition, tuple(shard.census.everything(shard.groups,
                                                                                      shard.consumer_groups)),
                                             reset=True)]
        views = shard.census.changes(shard.groups, shard.consumer_groups)
        return [*effects, GroupsObserved(partition, tuple(views))] if views else effects

    def _dropped(self, partition: int, shard: GroupCoordinatorShard | None) -> list[Any]:
        if shard is not None:
            shard.unload()  # Kafka's onUnloaded: every group goes Dead
        return [GroupsObserved(partition, (), reset=True)]
