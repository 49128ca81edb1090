"""The asyncio driver of the pure coordinator runtime: I/O, real timers, group commit.

It interprets runtime effects: ``Respond`` resolves the caller's future; ``Append`` is
encoded and appended to the partition's replicated log, its outcome reported back (the
runtime decides what goes into each Append: group commit is its policy, not the driver's);
``Reload`` re-reads the partition. Leadership changes of the ``__consumer_offsets`` logs load
and unload shards.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from cluster import metrics
from cluster.deadline_timer import DeadlineTimer
from cluster.waiters import Waiters
from coordinator import commands as c
from coordinator.codec import EntryTooLarge, RecordDecodeError, decode_batch, encode_batches
from coordinator.config import GroupConfig
from coordinator.errors import ErrorCode
from coordinator.image import DurableImage
from coordinator.records import Record
from coordinator.runtime import Append, CoordinatorRuntime, Effect, GroupsObserved, Reload, Respond
from replication.api import (
    MAX_ENTRY_BYTES,
    CoordinatorLog,
    LeadershipChange,
    NotLeaderError,
    ReplicationError,
    StaleEpochError,
)

log = logging.getLogger("kcoord.coordinator")
READY_LAG_ENTRIES = 500  # a follower this close to the log's end may be handed leadership
YIELD_EVERY_RECORDS = 5000  # decode this many records, then let requests and other partitions run


class CoordinatorDriver:
    def __init__(self, config: GroupConfig, logs: Callable[[int], CoordinatorLog], num_partitions: int,
                 now_ms: Callable[[], int], commit_timeout_ms: int = 5000, prereplay_interval_ms: int = 500) -> None:
        self.runtime = CoordinatorRuntime(config, new_id=lambda: str(uuid.uuid4()))
        self._logs = logs
        self.num_partitions = num_partitions
        self._now_ms = now_ms
        self._commit_timeout_s = commit_timeout_ms / 1000
        self.max_entry_bytes = MAX_ENTRY_BYTES  # replicated entries are split below this
        self._waiters: Waiters[c.Response] = Waiters()
        self._timer = DeadlineTimer(now_ms, self._on_timer)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.load_times_ms: dict[int, int] = {}
        self._images: dict[int, DurableImage] = {}
        self._prereplay_interval_s = prereplay_interval_ms / 1000
        self.counts = metrics.group_counts()  # fed with the runtime's GroupsObserved effects

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for p in range(self.num_partitions):
            lg = self._logs(p)
            lg.subscribe(self._listener(p))
            if self._prereplay_interval_s > 0:
                lg.set_ready_to_lead(self._ready_check(p))
            lg.set_busy(self._busy_check(p))
            if lg.is_leader():
                self._on_leadership(p, LeadershipChange(lg.name, True, lg.leader_epoch()))
        if self._prereplay_interval_s > 0:
            self._spawn(self._prereplay_loop())

    async def stop(self) -> None:
        self._timer.cancel()
        for p in self.runtime.partitions():
            epoch = self.runtime.epoch_of(p)
            if epoch is not None:
                self._run(self.runtime.unload(p, epoch))
                self._note_shard(p)
        for t in list(self._tasks):
            t.cancel()

    def _listener(self, partition: int) -> Callable[[LeadershipChange], None]:
        return lambda change: self._on_leadership(partition, change)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _note_shard(self, partition: int) -> None:
        state = self.runtime.state_of(partition)
        self.counts.shard_state(partition, state.name.lower() if state is not None else None)

    def _on_leadership(self, partition: int, change: LeadershipChange) -> None:
        """Called on the event loop (replication implementations hop threads first)."""
        try:
            self._change_leadership(partition, change)
        finally:
            self._note_shard(partition)

    def _change_leadership(self, partition: int, change: LeadershipChange) -> None:
        if change.is_leader:
            current = self.runtime.epoch_of(partition)
            if current is not None and current >= change.epoch:
                return  # already loading or serving this leadership
            effects = self.runtime.begin_load(partition, change.epoch)
            self._run(effects)
            if self.runtime.epoch_of(partition) == change.epoch:
                self._spawn(self._load(partition, change.epoch))
        else:
            current = self.runtime.epoch_of(partition)
            if current is not None:
                self._run(self.runtime.unload(partition, max(change.epoch, current)))
                log.info("event=shard_unloaded partition=%d epoch=%d", partition, change.epoch)

    async def _load(self, partition: int, epoch: int) -> None:
        started = self._now_ms()
        lg = self._logs(partition)
        image = self._images.pop(partition, None)
        got = lg.read_since(image.next_offset) if image is not None else None
        if got is None:
            image = None
            source: Any = lg.read_committed(0)
        else:
            source = got[0]
        records: list[Record] = []
        entries = 0
        async for batch in self._decoded(partition, source):
            records.extend(batch)
            entries += 1
        self._run(self.runtime.complete_load(partition, epoch, records, self._now_ms(), image))
        self._note_shard(partition)
        took = self._now_ms() - started
        self.load_times_ms[partition] = took
        metrics.observe_shard_load(partition, took / 1000)  # metrics: shard load time
        log.info("event=shard_loaded partition=%d epoch=%d entries=%d records=%d took_ms=%d prereplayed_entries=%d",
                 partition, epoch, entries, len(records), took, image.next_offset if image is not None else 0)

    @staticmethod
    async def _decoded(partition: int, entries: Iterable[Any]) -> AsyncIterator[list[Record]]:
        """Each entry's records (an undecodable entry: logged, no records), letting requests and
        other partitions run every ``YIELD_EVERY_RECORDS`` records."""
        since_yield = 0
        for entry in entries:
            try:
                batch = decode_batch(entry.payload)
            except RecordDecodeError as exc:
                log.error("event=load_skipped_entry partition=%d offset=%d error=%r", partition, entry.offset,
                          str(exc))
                batch = []
            yield batch
            since_yield += len(batch) + 1
            if since_yield >= YIELD_EVERY_RECORDS:
                since_yield = 0
                await asyncio.sleep(0)

    # ---------------------------------------------------------------- follower pre-replay

    def _ready_check(self, partition: int) -> Callable[[], bool]:
        """For the Raft driver: take this partition over by transfer only with a current
        image (a few hundred entries behind at most), so that the load is short."""
        lg = self._logs(partition)

        def ready() -> bool:
            image = self._images.get(partition)
            return image is not None and lg.committed_offset() - image.next_offset <= READY_LAG_ENTRIES

        return ready

    def _busy_check(self, partition: int) -> Callable[[], bool]:
        """For the Raft driver: leadership balancing leaves this partition here while it loads or
        while one of its groups rebalances (a move would start that rebalance over)."""

        def busy() -> bool:
            if self.runtime.epoch_of(partition) is None:
                return False  # not serving it: a move costs nothing here
            shard = self.runtime.shard(partition)
            if shard is None:
                return True  # loading
            try:
                return shard.rebalancing()
            except RuntimeError:  # the thread driver asked while the loop changed the groups
                return True

        return busy

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

    # ---------------------------------------------------------------- requests

    def is_active(self, partition: int) -> bool:
        return self.runtime.state_of(partition) is not None and partition in self.runtime.active_partitions()

    async def call(self, partition: int, request: c.Request) -> c.Response:
        lease = self._logs(partition).lease_valid
        if self.runtime.epoch_of(partition) is not None and not lease():
            # Leading by our own account but without a lease: a partition may have cut this node
            # off while the others elected a new coordinator. Answering from our state could hand
            # out stale offsets or keep members that the new coordinator is replacing.
            return c.error_response(request, ErrorCode.NOT_COORDINATOR)
        if c.kind_of(request).reads:  # answered from state, not made durable by the answer itself
            response = await self._call(partition, request)
            # A read may have waited (an OffsetFetch behind a pending commit, a SyncGroup for its
            # leader): what it says must still be current when it leaves.
            return response if lease() else c.error_response(request, ErrorCode.NOT_COORDINATOR)
        return await self._call(partition, request)

    async def _call(self, partition: int, request: c.Request) -> c.Response:
        assert self._loop is not None, "driver not started"
        return await self._waiters.wait(
            lambda token: self._run(self.runtime.submit(partition, request, token, self._now_ms())))

    # ---------------------------------------------------------------- effects

    def _run(self, effects: list[Effect]) -> None:
        # Re-arming scans every shard's timers; skip it when only plain answers were released
        # (a heartbeat or commit only pushes a deadline later, so an early wake-up is harmless).
        timers_may_change = not effects
        for e in effects:
            if isinstance(e, Respond):
                # (a ConsumerGroupHeartbeat that changed nothing only pushes its session later; one
                # that changed the group wrote records: the Append below re-arms)
                if isinstance(e.response, (c.JoinGroupResponse, c.SyncGroupResponse, c.LeaveGroupResponse)):
                    timers_may_change = True
                self._waiters.resolve(e.token, e.response)
            elif isinstance(e, Append):
                timers_may_change = True
                self._spawn(self._append(e))
            elif isinstance(e, GroupsObserved):
                timers_may_change = True  # a group changed state: its timers did too
                self.counts.observe(e.partition, e.groups, e.reset)
            elif isinstance(e, Reload):
                timers_may_change = True
                self._note_shard(e.partition)
                log.warning("event=shard_reload partition=%d epoch=%d", e.partition, e.epoch)
                if self._logs(e.partition).refence():
                    # A new epoch fences whatever the failed append left in flight; its
                    # LeadershipChange then loads the shard at that epoch.
                    continue
                self._spawn(self._load(e.partition, e.epoch))
        if timers_may_change or not self._timer.armed:
            self._arm_timer()

    async def _append(self, append: Append) -> None:
        """Append one Append's records: usually one entry; records coalesced past the entry limit
        go as several, each reported as it commits (a request waits for its last record)."""
        partition, epoch = append.partition, append.epoch
        lg = self._logs(partition)
        try:
            entries = encode_batches(list(append.records), self.max_entry_bytes)
        except EntryTooLarge as exc:  # the coordinator's size limits keep records smaller
            log.error("event=append_refused partition=%d epoch=%d error=%r", partition, epoch, str(exc))
            self._run(self.runtime.on_append_failed(partition, epoch, ErrorCode.UNKNOWN_SERVER_ERROR))
            return
        done = append.end_offset - len(append.records)
        for payload, count in entries:
            started = time.perf_counter()  # metrics: commit latency of this entry
            try:
                await asyncio.wait_for(lg.append(payload, epoch), self._commit_timeout_s)
            except (NotLeaderError, StaleEpochError):
                metrics.observe_commit(time.perf_counter() - started, ok=False)
                self._run(self.runtime.on_append_failed(partition, epoch, ErrorCode.NOT_LEADER_OR_FOLLOWER))
                return
            except (ReplicationError, TimeoutError) as exc:
                metrics.observe_commit(time.perf_counter() - started, ok=False)
                log.warning("event=append_failed partition=%d epoch=%d error=%r", partition, epoch, str(exc))
                self._run(self.runtime.on_append_failed(partition, epoch, ErrorCode.REQUEST_TIMED_OUT))
                return
            metrics.observe_commit(time.perf_counter() - started, ok=True)
            done += count
            self._run(self.runtime.on_committed(partition, epoch, done))

    # ---------------------------------------------------------------- timers

    def _arm_timer(self) -> None:
        if self._loop is not None:
            self._timer.arm(self._loop, self.runtime.next_deadline())

    def _on_timer(self) -> None:
        self._run(self.runtime.advance(self._now_ms()))
