"""The one asyncio driver of the coordinator runtime (``coordinator_common.runtime``), under every
coordinator: leadership changes of its logs load and unload shards, requests are answered only
under the leader's lease, ``Append`` effects are encoded and appended to the partition's
replicated log (several entries when they exceed the entry size, each reported as it commits),
append failures are mapped to the coordinator's errors, ``Reload`` re-reads the partition and
one timer serves every shard's deadlines. A coordinator's driver subclasses it and says what is
its own: how its records are encoded and decoded, its error codes, and its own effects.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from cluster.deadline_timer import DeadlineTimer
from cluster.waiters import Waiters
from coordinator_common.runtime import Append, Reload, Respond, ShardRuntime
from replication.api import (
    MAX_ENTRY_BYTES,
    CoordinatorLog,
    LeadershipChange,
    NotLeaderError,
    ReplicationError,
    StaleEpochError,
)
from replication.failstop import fail_stop

YIELD_EVERY_RECORDS = 5000  # decode this many records, then let requests and other partitions run
LOAD_RETRY_S = 1.0  # a failed load is tried again after this, then twice as long each time
LOAD_RETRY_MAX_S = 60.0

RuntimeT = TypeVar("RuntimeT", bound=ShardRuntime[Any, Any, Any])
RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")


class EntryRefused(Exception):
    """Records that cannot be encoded into entries (larger than an entry can be)."""


@dataclass(frozen=True)
class AppendErrors:
    """A coordinator's errors for an append: one its node may no longer make (``not_leader``),
    one that failed or timed out (outcome unknown), records that cannot be encoded."""

    not_leader: Any
    failed: Any
    refused: Any


class ShardDriver(Generic[RuntimeT, RequestT, ResponseT]):
    log: logging.Logger
    name: str  # in log lines: "shard" or "txn_shard"
    errors: AppendErrors

    def __init__(self, runtime: RuntimeT, logs: Callable[[int], CoordinatorLog], num_partitions: int,
                 now_ms: Callable[[], int], commit_timeout_ms: int = 5000) -> None:
        self.runtime = runtime
        self._logs = logs
        self.num_partitions = num_partitions
        self._now_ms = now_ms
        self._commit_timeout_s = commit_timeout_ms / 1000
        self.max_entry_bytes = MAX_ENTRY_BYTES  # replicated entries are split below this
        self._waiters: Waiters[ResponseT] = Waiters()
        self._timer = DeadlineTimer(now_ms, self._on_timer)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # ---------------------------------------------------------------- what a coordinator says

    def _encode(self, records: Sequence[Any]) -> list[tuple[bytes, int]]:
        """The records as entries of at most ``max_entry_bytes``: (payload, records in it)."""
        raise NotImplementedError

    def _decode(self, payload: bytes) -> list[Any]:
        """An entry's records; raises ValueError for an entry that cannot be read."""
        raise NotImplementedError

    def _error_response(self, request: RequestT, error: Any) -> ResponseT:
        raise NotImplementedError

    def _busy(self, partition: int) -> bool:
        """Whether leadership balancing must leave ``partition`` here now."""
        return self.runtime.epoch_of(partition) is not None and self.runtime.shard(partition) is None

    def _reads(self, request: RequestT) -> bool:
        """Whether ``request`` is answered from state (its answer re-checks the lease)."""
        return False

    def _on_effect(self, effect: Any) -> bool:
        """A coordinator's own effect; returns whether timers may have changed."""
        raise NotImplementedError(f"no driver step for {type(effect).__name__}")

    def _on_step(self) -> None:
        """After each batch of effects (e.g. a gauge)."""

    def _on_state(self, partition: int) -> None:
        """The partition's shard was loaded, unloaded or thrown away."""

    def _image_for_load(self, partition: int) -> tuple[Any, Iterable[Any]]:
        """(image, entries) to load from: no image and the whole log unless a coordinator keeps one."""
        return None, self._logs(partition).read_committed(0)

    async def _started(self) -> None:
        """After the logs are subscribed (e.g. background work of the coordinator's)."""

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for p in range(self.num_partitions):
            lg = self._logs(p)
            lg.subscribe(self._listener(p))
            lg.set_busy(self._busy_check(p))
            if lg.is_leader():
                self._on_leadership(p, LeadershipChange(lg.name, True, lg.leader_epoch()))
        await self._started()

    async def stop(self) -> None:
        self._timer.cancel()
        for p in self.runtime.partitions():
            epoch = self.runtime.epoch_of(p)
            if epoch is not None:
                self._run(self.runtime.unload(p, epoch))
                self._on_state(p)
        for t in list(self._tasks):
            t.cancel()

    def _listener(self, partition: int) -> Callable[[LeadershipChange], None]:
        return lambda change: self._on_leadership(partition, change)

    def _busy_check(self, partition: int) -> Callable[[], bool]:
        return lambda: self._busy(partition)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_leadership(self, partition: int, change: LeadershipChange) -> None:
        """Called on the event loop (replication implementations hop threads first)."""
        try:
            current = self.runtime.epoch_of(partition)
            if change.is_leader:
                if current is not None and current >= change.epoch:
                    return  # already loading or serving this leadership
                self._run(self.runtime.begin_load(partition, change.epoch))
                if self.runtime.epoch_of(partition) == change.epoch:
                    self._spawn(self._load(partition, change.epoch))
            elif current is not None:
                self._run(self.runtime.unload(partition, max(change.epoch, current)))
                self.log.info("event=%s_unloaded partition=%d epoch=%d", self.name, partition, change.epoch)
        finally:
            self._on_state(partition)

    async def _load(self, partition: int, epoch: int, attempt: int = 0) -> None:
        """Load a shard; a load that fails is tried again while this leadership lasts, each time
        later (it used to leave the shard loading for good: its clients told
        COORDINATOR_LOAD_IN_PROGRESS until the next leadership change), and a disk that fails
        stops the node."""
        if self.runtime.epoch_of(partition) != epoch:
            return  # this leadership ended before its (next) try
        try:
            await self._load_once(partition, epoch)
        except OSError as e:
            fail_stop(self.name, f"loading partition {partition}: {type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - logged, and tried again below
            delay = min(LOAD_RETRY_S * 2 ** attempt, LOAD_RETRY_MAX_S)
            self.log.error("event=%s_load_failed partition=%d epoch=%d attempt=%d retry_in_s=%g error=%r", self.name,
                           partition, epoch, attempt + 1, delay, str(e))
            await asyncio.sleep(delay)
            if self.runtime.epoch_of(partition) == epoch and self.runtime.shard(partition) is None:
                self._spawn(self._load(partition, epoch, attempt + 1))

    async def _load_once(self, partition: int, epoch: int) -> None:
        started = self._now_ms()
        image, source = self._image_for_load(partition)
        records: list[Any] = []
        entries = 0
        async for batch in self._decoded(partition, source):
            records.extend(batch)
            entries += 1
        if self.runtime.epoch_of(partition) != epoch or self.runtime.shard(partition) is not None:
            self.log.info("event=%s_load_dropped partition=%d epoch=%d reason=leadership_moved_on", self.name,
                          partition, epoch)
            return  # the leadership ended (or began again) while the log was read: complete_load would ignore it
        self._run(self.runtime.complete_load(partition, epoch, records, self._now_ms(), image))
        self._on_state(partition)
        took = self._now_ms() - started
        self._loaded(partition, took)
        self.log.info("event=%s_loaded partition=%d epoch=%d entries=%d records=%d took_ms=%d%s", self.name,
                      partition, epoch, entries, len(records), took, self._load_detail(image))

    def _loaded(self, partition: int, took_ms: int) -> None:
        """A shard was loaded in ``took_ms``."""

    def _load_detail(self, image: Any) -> str:
        """More of a load's log line (`` key=value`` pairs)."""
        return ""

    def _observe_commit(self, seconds: float, ok: bool) -> None:
        """An entry was appended (``ok``) or not, in ``seconds``."""

    async def _decoded(self, partition: int, entries: Iterable[Any]) -> AsyncIterator[list[Any]]:
        """Each entry's records (an undecodable entry: logged, no records), letting requests and
        other partitions run every ``YIELD_EVERY_RECORDS`` records."""
        since_yield = 0
        for entry in entries:
            try:
                batch = self._decode(entry.payload)
            except ValueError as exc:
                self.log.error("event=%s_load_skipped_entry partition=%d offset=%d error=%r", self.name, partition,
                               entry.offset, str(exc))
                batch = []
            yield batch
            since_yield += len(batch) + 1
            if since_yield >= YIELD_EVERY_RECORDS:
                since_yield = 0
                await asyncio.sleep(0)

    # ---------------------------------------------------------------- requests

    async def call(self, partition: int, request: RequestT) -> ResponseT:
        lease = self._logs(partition).lease_valid
        if self.runtime.epoch_of(partition) is not None and not lease():
            # Leading by our own account but without a lease: a partition may have cut this node
            # off while the others elected a new coordinator. Answering from our state could hand
            # out stale state or keep what the new coordinator is replacing.
            return self._error_response(request, self.runtime.not_coordinator)
        assert self._loop is not None, "driver not started"
        response = await self._waiters.wait(
            lambda token: self._run(self.runtime.submit(partition, request, token, self._now_ms())))
        if self._reads(request) and not lease():
            # A read may have waited (behind a pending write): what it says must still be current
            # when it leaves.
            return self._error_response(request, self.runtime.not_coordinator)
        return response

    # ---------------------------------------------------------------- effects

    def _run(self, effects: list[Any]) -> None:
        # Re-arming scans every shard's timers; skip it when only plain answers were released
        # (an answer only pushes a deadline later, so an early wake-up is harmless).
        timers_may_change = not effects
        for e in effects:
            if isinstance(e, Respond):
                timers_may_change |= self._answer_moves_timers(e.response)
                self._waiters.resolve(e.token, e.response)
            elif isinstance(e, Append):
                timers_may_change = True
                self._spawn(self._append(e))
            elif isinstance(e, Reload):
                timers_may_change = True
                self._on_state(e.partition)
                self.log.warning("event=%s_reload partition=%d epoch=%d", self.name, e.partition, e.epoch)
                if self._logs(e.partition).refence():
                    # A new epoch fences whatever the failed append left in flight; its
                    # LeadershipChange then loads the shard at that epoch.
                    continue
                self._spawn(self._load(e.partition, e.epoch))
            else:
                timers_may_change |= self._on_effect(e)
        self._on_step()
        if timers_may_change or not self._timer.armed:
            self._arm_timer()

    def _answer_moves_timers(self, response: Any) -> bool:
        """Whether sending ``response`` may have changed a timer (then they are re-armed)."""
        return True

    async def _append(self, append: Append) -> None:
        """Append one Append's records: usually one entry; records coalesced past the entry limit
        go as several, each reported as it commits (a request waits for its last record)."""
        partition, epoch = append.partition, append.epoch
        done = append.end_offset - len(append.records)
        try:
            entries = self._encode(append.records)
        except EntryRefused as exc:  # the coordinator's size limits keep records smaller
            self.log.error("event=append_refused partition=%d epoch=%d error=%r", partition, epoch, str(exc))
            self._report(partition, epoch, done, self.errors.refused)
            return
        for payload, count in entries:
            error = await self._append_entry(partition, epoch, payload)
            done += count
            self._report(partition, epoch, done, error)
            if error is not None:
                return

    async def _append_entry(self, partition: int, epoch: int, payload: bytes) -> Any:
        """Append one entry and wait for its commit: None, or the coordinator's error."""
        started = time.perf_counter()
        error: Any = None
        try:
            await asyncio.wait_for(self._logs(partition).append(payload, epoch), self._commit_timeout_s)
        except (NotLeaderError, StaleEpochError):
            error = self.errors.not_leader
        except (ReplicationError, TimeoutError) as exc:
            self.log.warning("event=%s_append_failed partition=%d epoch=%d error=%r", self.name, partition, epoch,
                             str(exc))
            error = self.errors.failed
        self._observe_commit(time.perf_counter() - started, error is None)
        return error

    def _report(self, partition: int, epoch: int, done: int, error: Any) -> None:
        """Tell the runtime how an append went: committed up to ``done`` records, or failed."""
        if error is None:
            self._run(self.runtime.on_committed(partition, epoch, done))
        else:
            self._run(self.runtime.on_append_failed(partition, epoch, error))

    # ---------------------------------------------------------------- timers

    def _arm_timer(self) -> None:
        if self._loop is not None:
            self._timer.arm(self._loop, self.runtime.next_deadline())

    def _on_timer(self) -> None:
        self._run(self.runtime.advance(self._now_ms()))
