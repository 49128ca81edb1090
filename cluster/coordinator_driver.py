"""The group coordinator's driver: the one driver (``cluster.shard_driver``) with what is the
group coordinator's own. Its records are encoded by ``coordinator.codec``; its shards load after
a durable image that followers keep current (pre-replay: a new leader replays only what its
image has not seen, and leadership is handed to this node by transfer only while that image is
close to the log's end); balancing leaves a partition here while one of its groups rebalances;
reads re-check the lease before they leave; the group census feeds the metrics.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cluster import metrics
from cluster.logfmt import fmt_fields
from cluster.shard_driver import AppendErrors, EntryRefused, ShardDriver
from coordinator import commands as c
from coordinator.codec import EntryTooLarge, decode_batch, encode_batches
from coordinator.config import GroupConfig
from coordinator.errors import ErrorCode
from coordinator.image import DurableImage
from coordinator.runtime import CoordinatorRuntime, GroupEvents, GroupsObserved
from replication.api import CoordinatorLog

log = logging.getLogger("kcoord.coordinator")
READY_LAG_ENTRIES = 500  # a follower this close to the log's end may be handed leadership


class CoordinatorDriver(ShardDriver[CoordinatorRuntime, c.Request, c.Response]):
    log = log
    name = "shard"
    errors = AppendErrors(ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_SERVER_ERROR)

    def __init__(self, config: GroupConfig, logs: Callable[[int], CoordinatorLog], num_partitions: int,
                 now_ms: Callable[[], int], commit_timeout_ms: int = 5000, prereplay_interval_ms: int = 500) -> None:
        super().__init__(CoordinatorRuntime(config, new_id=lambda: str(uuid.uuid4())), logs, num_partitions, now_ms,
                         commit_timeout_ms)
        self.load_times_ms: dict[int, int] = {}
        self._images: dict[int, DurableImage] = {}
        self._prereplay_interval_s = prereplay_interval_ms / 1000
        self.counts = metrics.group_counts()  # fed with the runtime's GroupsObserved effects

    # ---------------------------------------------------------------- the group coordinator's own

    def _encode(self, records: Sequence[Any]) -> list[tuple[bytes, int]]:
        try:
            return encode_batches(list(records), self.max_entry_bytes)
        except EntryTooLarge as exc:
            raise EntryRefused(str(exc)) from exc

    def _decode(self, payload: bytes) -> list[Any]:
        return decode_batch(payload)

    def _error_response(self, request: c.Request, error: Any) -> c.Response:
        return c.error_response(request, error)

    def _reads(self, request: c.Request) -> bool:
        return c.kind_of(request).reads  # answered from state, not made durable by the answer itself

    def _answer_moves_timers(self, response: Any) -> bool:
        # (a ConsumerGroupHeartbeat that changed nothing only pushes its session later; one that
        # changed the group wrote records: its Append re-arms)
        return isinstance(response, (c.JoinGroupResponse, c.SyncGroupResponse, c.LeaveGroupResponse))

    def _on_effect(self, effect: Any) -> bool:
        if isinstance(effect, GroupEvents):
            for event, fields in effect.events:
                self.log.info("event=%s partition=%d %s", event, effect.partition, fmt_fields(fields))
            return False
        if not isinstance(effect, GroupsObserved):
            raise TypeError(f"no driver step for {type(effect).__name__}")
        self.counts.observe(effect.partition, effect.groups, effect.reset)
        return True  # a group changed state: its timers did too

    def _on_state(self, partition: int) -> None:
        state = self.runtime.state_of(partition)
        self.counts.shard_state(partition, state.name.lower() if state is not None else None)

    def _busy(self, partition: int) -> bool:
        """Leadership balancing leaves this partition here while it loads or while one of its
        groups rebalances (a move would start that rebalance over)."""
        if self.runtime.epoch_of(partition) is None:
            return False  # not serving it: a move costs nothing here
        shard = self.runtime.shard(partition)
        if shard is None:
            return True  # loading
        return shard.rebalancing()

    def _image_for_load(self, partition: int) -> tuple[Any, Iterable[Any]]:
        lg = self._logs(partition)
        image = self._images.pop(partition, None)
        got = lg.read_since(image.next_offset) if image is not None else None
        if got is None:
            return None, lg.read_committed(0)
        return image, got[0]

    def _loaded(self, partition: int, took_ms: int) -> None:
        self.load_times_ms[partition] = took_ms
        metrics.observe_shard_load(partition, took_ms / 1000)  # metrics: shard load time

    def _load_detail(self, image: Any) -> str:
        return f" prereplayed_entries={image.next_offset if image is not None else 0}"

    def _observe_commit(self, seconds: float, ok: bool) -> None:
        metrics.observe_commit(seconds, ok=ok)  # metrics: commit latency of an entry

    def is_active(self, partition: int) -> bool:
        return self.runtime.state_of(partition) is not None and partition in self.runtime.active_partitions()

    # ---------------------------------------------------------------- follower pre-replay

    async def _started(self) -> None:
        if self._prereplay_interval_s > 0:
            for p in range(self.num_partitions):
                self._logs(p).set_ready_to_lead(self._ready_check(p))
            self._spawn(self._prereplay_loop())

    def _ready_check(self, partition: int) -> Callable[[], bool]:
        """For the Raft driver: take this partition over by transfer only with a current
        image (a few hundred entries behind at most), so that the load is short."""
        lg = self._logs(partition)

        def ready() -> bool:
            image = self._images.get(partition)
            return image is not None and lg.committed_offset() - image.next_offset <= READY_LAG_ENTRIES

        return ready

    async def _prereplay_loop(self) -> None:
        """Keep every followed partition's durable image current, so that a new leader replays
        only what its image has not seen (load = replay, done ahead of time)."""
        while True:
            await asyncio.sleep(self._prereplay_interval_s)
            for p in range(self.num_partitions):
                image = self._images.get(p)
                if image is not None and image.next_offset == self._logs(p).committed_offset():
                    continue  # nothing new (the common case when idle)
                if self.runtime.epoch_of(p) is None:
                    await self._prereplay(p)

    async def _prereplay(self, partition: int) -> None:
        since = self._logs(partition).read_since
        # Taken out while it is brought up to date: a load that starts meanwhile must not get an
        # image whose dicts are still changing (it then reads the whole log instead).
        image = self._images.pop(partition, None)
        got = since(image.next_offset) if image is not None else None
        if image is None or got is None:
            image, got = DurableImage(), since(0)
            if got is None:
                return
        entries, next_offset = got
        async for batch in self._decoded(partition, entries):
            if self.runtime.epoch_of(partition) is not None:
                return  # became leader meanwhile: the load reads the log itself
            image.replay(batch)
        image.next_offset = next_offset
        if self.runtime.epoch_of(partition) is None:
            self._images[partition] = image
