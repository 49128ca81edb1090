"""The asyncio driver of the transaction coordinator runtime (``transactions.runtime``).

It interprets the runtime's effects: ``Respond`` resolves the caller's future; ``Append`` is
encoded and appended to the ``__transaction_state`` partition's replicated log, in order per
partition, its outcome reported back; ``SendMarkers`` hands a decided transaction to the
marker writer and reports back once every partition has its marker (retrying while this node
still owns the partition at that epoch); ``Reload`` re-reads the partition. Leadership changes
of the logs load and unload shards, and one timer serves every shard's deadlines.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from cluster import metrics
from cluster.deadline_timer import DeadlineTimer
from cluster.txn_entries import decode_entry, encode_entry
from cluster.waiters import Waiters
from replication.api import (
    CoordinatorLog,
    LeadershipChange,
    NotLeaderError,
    ReplicationError,
    StaleEpochError,
)
from replication.raft.settings import EPOCH_STRIDE
from transactions import commands as c
from transactions.codec import TxnRecordDecodeError
from transactions.config import TxnConfig
from transactions.errors import TxnError
from transactions.records import TxnRecord
from transactions.runtime import (
    Append,
    Effect,
    Reload,
    Respond,
    SendMarkers,
    TransactionRuntime,
    error_response,
)

log = logging.getLogger("kcoord.transactions")

# Writes the markers of one decided transaction (the coordinator epoch they carry is the second
# argument); returns the partitions still without theirs (retried), raises MarkersAbandoned to stop.
MarkerWriter = Callable[[c.WriteMarkers, int], Awaitable[tuple[tuple[str, int], ...]]]
MARKER_RETRY_S = (0.05, 0.1, 0.2, 0.5, 1.0)


def marker_epoch(epoch: int) -> int:
    """The coordinator epoch a marker carries (Kafka's int32): the Raft term of the partition's
    leadership (the epoch is term * EPOCH_STRIDE + re-fences), which only grows with it."""
    return min(epoch // EPOCH_STRIDE, (1 << 31) - 1)


class MarkersAbandoned(Exception):
    """A partition refused the markers for good (a newer epoch of the producer wrote there): the
    transaction stays decided until the partition's next owner tries again, as in Kafka."""


class TxnDriver:
    def __init__(self, config: TxnConfig, logs: Callable[[int], CoordinatorLog], num_partitions: int,
                 now_ms: Callable[[], int], write_markers: MarkerWriter, commit_timeout_ms: int = 5000) -> None:
        self.runtime = TransactionRuntime(config)
        self._logs = logs
        self.num_partitions = num_partitions
        self._now_ms = now_ms
        self._write_markers = write_markers
        self._commit_timeout_s = commit_timeout_ms / 1000
        self._waiters: Waiters[c.Response] = Waiters()
        self._append_locks: dict[int, asyncio.Lock] = {}
        self._timer = DeadlineTimer(now_ms, self._on_timer)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for p in range(self.num_partitions):
            lg = self._logs(p)
            lg.subscribe(self._listener(p))
            lg.set_busy(self._busy_check(p))
            if lg.is_leader():
                self._on_leadership(p, LeadershipChange(lg.name, True, lg.leader_epoch()))

    async def stop(self) -> None:
        self._timer.cancel()
        for p in self.runtime.active_partitions():
            epoch = self.runtime.epoch_of(p)
            if epoch is not None:
                self._run(self.runtime.unload(p, epoch))
        for t in list(self._tasks):
            t.cancel()

    def _busy_check(self, partition: int) -> Callable[[], bool]:
        """For the Raft driver: leadership balancing leaves this partition here while it loads or
        holds open transactions (a move would stall them behind the new owner's load)."""

        def busy() -> bool:
            if self.runtime.epoch_of(partition) is None:
                return False
            shard = self.runtime.shard(partition)
            return shard is None or shard.open > 0

        return busy

    def _listener(self, partition: int) -> Callable[[LeadershipChange], None]:
        return lambda change: self._on_leadership(partition, change)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_leadership(self, partition: int, change: LeadershipChange) -> None:
        current = self.runtime.epoch_of(partition)
        if change.is_leader:
            if current is not None and current >= change.epoch:
                return
            self._run(self.runtime.begin_load(partition, change.epoch))
            if self.runtime.epoch_of(partition) == change.epoch:
                self._spawn(self._load(partition, change.epoch))
        elif current is not None:
            self._run(self.runtime.unload(partition, max(change.epoch, current)))
            log.info("event=txn_shard_unloaded partition=%d epoch=%d", partition, change.epoch)

    async def _load(self, partition: int, epoch: int) -> None:
        started = self._now_ms()
        records: list[TxnRecord] = []
        for i, entry in enumerate(self._logs(partition).read_committed(0)):
            try:
                records += decode_entry(entry.payload)
            except TxnRecordDecodeError as exc:
                log.error("event=txn_load_skipped_entry partition=%d offset=%d error=%r", partition, entry.offset,
                          str(exc))
            if i % 1000 == 999:
                await asyncio.sleep(0)
        self._run(self.runtime.complete_load(partition, epoch, records, self._now_ms()))
        log.info("event=txn_shard_loaded partition=%d epoch=%d records=%d took_ms=%d", partition, epoch,
                 len(records), self._now_ms() - started)

    # ---------------------------------------------------------------- requests

    async def call(self, partition: int, request: c.Request) -> c.Response:
        assert self._loop is not None, "driver not started"
        lg = self._logs(partition)
        if self.runtime.epoch_of(partition) is not None and not lg.lease_valid():
            # Leading by our own account but without a lease: the others may have elected
            # another coordinator, which is where this producer must go.
            return error_response(request, TxnError.NOT_COORDINATOR)
        return await self._waiters.wait(
            lambda token: self._run(self.runtime.submit(partition, request, token, self._now_ms())))

    # ---------------------------------------------------------------- effects

    def _run(self, effects: list[Effect]) -> None:
        for e in effects:
            if isinstance(e, Respond):
                self._waiters.resolve(e.token, e.response)
            elif isinstance(e, Append):
                self._spawn(self._append(e))
            elif isinstance(e, SendMarkers):
                self._spawn(self._send_markers(e))
            elif isinstance(e, Reload):
                log.warning("event=txn_shard_reload partition=%d epoch=%d", e.partition, e.epoch)
                if not self._logs(e.partition).refence():
                    self._spawn(self._load(e.partition, e.epoch))
        metrics.set_open_transactions(self.runtime.open_transactions())
        self._arm_timer()

    async def _append(self, append: Append) -> None:
        p, epoch = append.partition, append.epoch
        lock = self._append_locks.setdefault(p, asyncio.Lock())
        async with lock:  # entries of a partition reach the log in the order they were made
            if self.runtime.epoch_of(p) != epoch:
                return
            try:
                await asyncio.wait_for(self._logs(p).append(encode_entry(append.records), epoch),
                                       self._commit_timeout_s)
            except (NotLeaderError, StaleEpochError):
                self._run(self.runtime.on_append_failed(p, epoch, TxnError.NOT_COORDINATOR))
                return
            except (ReplicationError, TimeoutError) as exc:
                log.warning("event=txn_append_failed partition=%d epoch=%d error=%r", p, epoch, str(exc))
                self._run(self.runtime.on_append_failed(p, epoch, TxnError.COORDINATOR_NOT_AVAILABLE))
                return
            self._run(self.runtime.on_committed(p, epoch, append.end_offset))

    async def _send_markers(self, send: SendMarkers) -> None:
        m = send.markers
        todo = m
        attempt = 0
        while self.runtime.epoch_of(send.partition) == send.epoch:
            try:
                left = await self._write_markers(todo, marker_epoch(send.epoch))
            except MarkersAbandoned as exc:
                log.warning("event=txn_markers_abandoned transactional_id=%r producer_id=%d error=%r",
                            m.transactional_id, m.producer_id, str(exc))
                return
            except Exception as exc:  # noqa: BLE001 - every other failure is retried while we own the partition
                log.info("event=txn_markers_retry transactional_id=%r attempt=%d error=%r", m.transactional_id,
                         attempt, str(exc))
                left = todo.partitions
            if not left:
                log.info("event=txn_markers_written transactional_id=%r producer_id=%d epoch=%d commit=%s "
                         "partitions=%d", m.transactional_id, m.producer_id, m.producer_epoch, m.commit,
                         len(m.partitions))
                metrics.count_transaction_end(m.commit)
                self._run(self.runtime.markers_written(send.partition, send.epoch, m, self._now_ms()))
                return
            todo = replace(m, partitions=tuple(left))
            await asyncio.sleep(MARKER_RETRY_S[min(attempt, len(MARKER_RETRY_S) - 1)])
            attempt += 1

    # ---------------------------------------------------------------- timers

    def _arm_timer(self) -> None:
        if self._loop is not None:
            self._timer.arm(self._loop, self.runtime.next_deadline())

    def _on_timer(self) -> None:
        self._run(self.runtime.advance(self._now_ms()))
