"""Topic partitions on this node: the produce → append path and fetch waiting.

Produce path (leader): validate the batch (on a topic whose cleanup.policy includes compact,
also that every record has a key) → idempotence check → assign offsets (rewrite
baseOffset / leader epoch, recompute CRC) → ``ReplicatedLog.append(batch, epoch)`` →
the committed entry is applied to the partition's ``DataLog`` → wake fetchers → ack.
On one node the ReplicatedLog is ``DataPassThroughLog`` (the DataLog is the durable
store; see that module for why), so the apply happens inside ``append``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from cluster.verification_guards import VerificationGuards
from replication.api import LeadershipChange, ReplicatedLog, ReplicationError
from replication.batch_validator import InflateBudget, validate_batch_async
from replication.compacted import DEFAULT_POLICY, find_keyless_record
from replication.data_log import (
    Compaction,
    DataLog,
    OffsetOutOfRangeError,
    ReadPlan,
    SeqResult,
    sweep_installs,
)
from replication.data_passthrough import DataPassThroughLog
from replication.data_state_machine import delete_records_entry
from replication.durable import remove_dir
from replication.leader_epochs import term_of
from replication.record_batch import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    BatchHeader,
    InvalidBatchError,
    assign_offsets,
    build_batch,
    parse_header,
    split_batches,
)
from replication.segment_swap import PassJob, PassResult, die_with_parent, run_pass
from replication.txn_index import marker_record

log = logging.getLogger("kcoord.data")


class Err(IntEnum):
    """Kafka error codes the data plane produces (handlers map them to the wire enum)."""

    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    NOT_LEADER_OR_FOLLOWER = 6
    NOT_ENOUGH_REPLICAS = 19
    MESSAGE_TOO_LARGE = 10
    REQUEST_TIMED_OUT = 7
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    POLICY_VIOLATION = 44
    INVALID_TXN_STATE = 48
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    KAFKA_STORAGE_ERROR = 56
    INVALID_RECORD = 87
    TRANSACTION_ABORTABLE = 120


@dataclass(frozen=True, slots=True)
class ProduceResult:
    error: Err
    base_offset: int = -1
    log_start_offset: int = -1
    message: str | None = None


# How a partition leader answers a transactional batch whose verification failed (Kafka's
# ReplicaManager for Produce <= v10): the partition is not in the transaction -> abort it; the
# producer is fenced -> fenced; the coordinator is busy or unreachable -> retry.
_VERIFY_RETRIABLE = frozenset({13, 14, 15, 16, 51})  # network, load in progress, not available, not coordinator, concurrent
Verifier = Callable[[int, int], Awaitable[int]]


def _verification_error(code: int, abortable: bool = False) -> ProduceResult | None:
    """``abortable``: the client reads TRANSACTION_ABORTABLE (Produce v11+), the error Kafka
    answers then for a partition outside the transaction (older clients: INVALID_TXN_STATE)."""
    if code == 0:
        return None
    if code in (47, 90):
        return ProduceResult(Err.INVALID_PRODUCER_EPOCH, message="The producer was fenced")
    if code in _VERIFY_RETRIABLE:
        return ProduceResult(Err.NOT_ENOUGH_REPLICAS, message=f"Transaction verification incomplete ({code})")
    return ProduceResult(Err.TRANSACTION_ABORTABLE if abortable and code == 120 else Err.INVALID_TXN_STATE,
                         message=f"The partition is not part of the producer's open transaction ({code})")


_PROBLEM_CODES = {"invalid": Err.INVALID_RECORD, "corrupt": Err.CORRUPT_MESSAGE, "too_large": Err.MESSAGE_TOO_LARGE}
DEFAULT_MAX_MESSAGE_BYTES = 1048588  # Kafka's message.max.bytes


class DataPartition:
    def __init__(self, topic: str, partition: int, directory: str, data_log: DataLog,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.topic = topic
        self.max_message_bytes = max_message_bytes
        self.partition = partition
        self.directory = directory
        self.data = data_log
        self.rlog: ReplicatedLog = DataPassThroughLog(f"{topic}-{partition}", data_log)
        self.next_offset = data_log.log_end_offset
        self.raft = False
        self._epochs_exact: Callable[[], bool] = lambda: True
        self._waiters: set[asyncio.Future[None]] = set()
        self._in_flight: dict[tuple[int, int, int], asyncio.Future[ProduceResult]] = {}
        self._verified: VerificationGuards[int] = VerificationGuards()  # by producer id

    def attach(self, rlog: ReplicatedLog, epochs_exact: Callable[[], bool] = lambda: True) -> None:
        """Cluster mode: replicate through Raft; the DataLog is written by the applied entries.
        ``epochs_exact``: whether every node stamps batches with terms (clients are told epochs)."""
        self.rlog = rlog
        self.raft = True
        self._epochs_exact = epochs_exact
        rlog.subscribe(self._on_leadership)

    def _on_leadership(self, change: LeadershipChange) -> None:
        self._verified.clear()
        if change.is_leader:
            # Everything before our announce is applied: continue from the log end.
            self.next_offset = self.data.log_end_offset
        self._wake()

    def applied(self) -> None:
        """A replicated batch was applied (event loop): wake long-polling fetchers."""
        self._wake()

    @property
    def is_leader(self) -> bool:
        return self.rlog.is_leader()

    @property
    def serves_reads(self) -> bool:
        """Leads under a valid lease: a leader cut off from its followers stops answering
        Fetch and ListOffsets (NOT_LEADER_OR_FOLLOWER) before another node can be elected."""
        return self.rlog.is_leader() and self.rlog.lease_valid()

    @property
    def leader_epoch(self) -> int:
        return self.rlog.leader_epoch()

    @property
    def reported_epoch(self) -> int:
        """The leader epoch clients see (Metadata, ListOffsets, Fetch's checks): the Raft term of
        this leadership, as stamped on the batches it writes; -1 (clients then skip KIP-320's
        validation) while a node of an earlier release is in the cluster, or when not leading."""
        return self.leader_term if self._epochs_exact() else -1

    @property
    def leader_term(self) -> int:
        """This leadership's epoch as stamped on its batches (-1: not leading)."""
        epoch = self.rlog.leader_epoch()
        return term_of(epoch) if epoch >= 0 else -1

    def epoch_at(self, offset: int) -> int:
        """The leader epoch of the batch holding ``offset`` (ListOffsets'), -1 when not told."""
        return self.data.epoch_at(offset) if self.reported_epoch >= 0 else -1

    async def produce(self, records: bytes | None, timeout_s: float = 30.0, *,
                      transactional: bool = False, verify: Verifier | None = None,
                      budget: InflateBudget | None = None, version2: bool = False,
                      abortable: bool = False) -> ProduceResult:
        """Append one producer batch; answered once a majority holds it, or with
        REQUEST_TIMED_OUT after ``timeout_s`` (the request's timeout: the batch may still be
        committed, as with Kafka). ``transactional``: the request names a transactional id.
        ``verify(producer_id, epoch)`` asks the transaction coordinator whether this partition is
        in the producer's open transaction; it is asked before a transactional batch opens one.
        ``version2``: transaction version 2 (Produce v12+), where ``verify`` adds the partition to
        the transaction, and a transaction open here at an older epoch is the producer's previous
        one, whose marker is still to come. ``abortable``: the client reads TRANSACTION_ABORTABLE."""
        if not records:
            return ProduceResult(Err.INVALID_RECORD)  # no message, as Kafka answers it (tests/diff)
        try:
            batches = split_batches(records)
        except InvalidBatchError as e:
            code = Err.CORRUPT_MESSAGE if e.corrupt else Err.INVALID_RECORD
            return ProduceResult(code, message=str(e))
        if len(batches) != 1:
            return ProduceResult(Err.INVALID_RECORD,
                                 message="Produce requests are only allowed to contain exactly one record batch "
                                         "per partition")
        hdr, batch = batches[0]
        # ``budget``: what the request's gzip batches may inflate to together (see InflateBudget)
        problem = await validate_batch_async(hdr, batch, self.max_message_bytes, budget)
        if problem is not None:
            return ProduceResult(_PROBLEM_CODES[problem[0]], message=problem[1])
        if not self.is_leader:
            return ProduceResult(Err.NOT_LEADER_OR_FOLLOWER, message="This node is not the partition's leader")
        if hdr.is_control:
            return ProduceResult(Err.INVALID_RECORD, message="Control records cannot be produced by clients")
        if "compact" in self.data.cleanup_policy:
            # Compaction keeps the latest record per key: Kafka refuses a record without one.
            # (Gzip inflates up to the validator's bound: 16 x max.message.bytes.)
            if await find_keyless_record(hdr, batch, self.max_message_bytes * 16) is not None:
                return ProduceResult(Err.INVALID_RECORD, message="Compacted topic cannot accept message without "
                                                                 f"key in topic partition {self.topic}-{self.partition}.")
        if hdr.is_transactional and (not transactional or hdr.producer_id < 0):
            return ProduceResult(Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                 message="A transactional batch needs the producer's transactional id")
        if not hdr.is_transactional and hdr.producer_id >= 0 and self.data.txns.is_open(hdr.producer_id):
            return ProduceResult(Err.INVALID_TXN_STATE,
                                 message=f"Producer {hdr.producer_id} has a transaction open on this partition")
        if hdr.is_transactional and verify is not None and not self._open_for(hdr, version2):
            refused = await self._verify(hdr, verify, version2, abortable)
            if refused is not None:
                return refused
        if hdr.producer_id < 0:
            return await self._append(hdr, batch, timeout_s)
        # The producer's state only knows applied batches: the same batch sent again (a retry on a
        # new connection) while the first is still replicating would pass the check and be
        # written twice. The retry waits for the first one's outcome instead.
        key = (hdr.producer_id, hdr.producer_epoch, hdr.base_sequence)
        first = self._in_flight.get(key)
        if first is not None:
            return await asyncio.shield(first)
        fut: asyncio.Future[ProduceResult] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = fut
        try:
            result = await self._append(hdr, batch, timeout_s)
        except BaseException:
            fut.cancel()
            raise
        finally:
            self._in_flight.pop(key, None)
        fut.set_result(result)
        return result

    def _open_for(self, hdr: BatchHeader, version2: bool) -> bool:
        """Whether the batch's transaction is open here already (nothing to ask the coordinator)."""
        if version2:
            return self.data.txn_open_at(hdr.producer_id, hdr.producer_epoch)
        return self.data.txns.is_open(hdr.producer_id)

    async def _verify(self, hdr: BatchHeader, verify: Verifier, version2: bool = False,
                      abortable: bool = False) -> ProduceResult | None:
        """Verify with the coordinator; then refuse the batch if a marker for its producer came in
        meanwhile (the transaction the answer was about is over: Kafka's verification guard). The
        check and the append that follows run without a pause, so no marker can slip between."""
        pid, epoch = hdr.producer_id, hdr.producer_epoch
        token = self._verified.begin(pid, epoch, version2)
        refused = _verification_error(await verify(pid, epoch), abortable)
        if refused is not None:
            return refused
        if not self._verified.holds(pid, token) and not self._open_for(hdr, version2):
            return ProduceResult(Err.TRANSACTION_ABORTABLE if abortable else Err.INVALID_TXN_STATE,
                                 message=f"Producer {pid}'s transaction ended while the batch was verified")
        return None

    async def _append(self, hdr: BatchHeader, batch: bytes, timeout_s: float) -> ProduceResult:
        if hdr.producer_id >= 0:
            check = self.data.check_sequence(hdr.producer_id, hdr.producer_epoch, hdr.base_sequence,
                                             hdr.last_sequence)
            if check.result is SeqResult.DUPLICATE:
                return ProduceResult(Err.NONE, check.base_offset, self.data.log_start_offset)
            if check.result is SeqResult.FENCED:
                return ProduceResult(Err.INVALID_PRODUCER_EPOCH,
                                     message=f"Producer epoch {hdr.producer_epoch} is older than the current one")
            if check.result is SeqResult.OUT_OF_ORDER:
                return ProduceResult(Err.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                     message=f"Out of order sequence number {hdr.base_sequence} for producer "
                                             f"{hdr.producer_id}")
            if check.result is SeqResult.DUPLICATE_SEQUENCE:
                return ProduceResult(Err.DUPLICATE_SEQUENCE_NUMBER,
                                     message=f"Duplicate sequence number {hdr.base_sequence} for producer "
                                             f"{hdr.producer_id}")
        return await self._replicate(hdr, batch, timeout_s)

    async def write_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                           timeout_s: float = 30.0, version: int = 1) -> ProduceResult:
        """Close ``producer_id``'s transaction here with a COMMIT or ABORT control batch (the
        transaction coordinator's WriteTxnMarkers). A marker for a producer with nothing open is
        written too (Kafka's "empty transaction"), so a retry is harmless. ``version`` 2: the
        marker's epoch is the one its transaction's end bumped to, above the transaction's data."""
        if not self.is_leader:
            return ProduceResult(Err.NOT_LEADER_OR_FOLLOWER, message="This node is not the partition's leader")
        if self.data.check_sequence(producer_id, producer_epoch, 0, 0).result is SeqResult.FENCED:
            return ProduceResult(Err.INVALID_PRODUCER_EPOCH,
                                 message=f"Marker epoch {producer_epoch} is older than the producer's")
        if version >= 2 and self.data.txn_open_at(producer_id, producer_epoch):
            # (KIP-1228) the data open here at the marker's epoch is the producer's next
            # transaction's: this marker, a late copy, must not close it
            return ProduceResult(Err.INVALID_PRODUCER_EPOCH,
                                 message=f"Marker epoch {producer_epoch} is not above the open transaction's")
        if self.data.txns.fenced_coordinator(producer_id, coordinator_epoch):
            return ProduceResult(Err.TRANSACTION_COORDINATOR_FENCED,
                                 message=f"Coordinator epoch {coordinator_epoch} is older than the last marker's")
        # Only a marker that is written voids a verification (a deposed coordinator's is not).
        self._verified.marker(producer_id, producer_epoch, version)
        batch = build_batch([marker_record(commit, coordinator_epoch)], timestamp=int(time.time() * 1000),
                            producer_id=producer_id, producer_epoch=producer_epoch,
                            attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL)
        return await self._replicate(parse_header(batch), batch, timeout_s)

    async def delete_records(self, offset: int, timeout_s: float = 30.0) -> tuple[Err, int, str | None]:
        """DeleteRecords on the leader: the log starts at ``offset`` (-1: the high watermark) on
        every replica, through the Raft log; (error, low watermark, message) as Kafka answers."""
        if not self.is_leader:
            return Err.NOT_LEADER_OR_FOLLOWER, -1, "This node is not the partition's leader"
        if "delete" not in self.data.cleanup_policy:
            return Err.POLICY_VIOLATION, -1, (f"Records of partition {self.topic}-{self.partition} can not be deleted "
                                              "while the partition is compacted (cleanup.policy without delete)")
        high = self.data.high_watermark
        offset = high if offset == -1 else offset
        if offset < 0 or offset > high:
            return Err.OFFSET_OUT_OF_RANGE, -1, f"The offset {offset} is not in [0, {high}]"
        if offset <= self.data.log_start_offset:
            return Err.NONE, self.data.log_start_offset, None
        if not self.raft:
            return Err.NONE, self.data.delete_records(offset), None
        try:
            try:
                await asyncio.wait_for(self.rlog.append(delete_records_entry(offset), self.leader_epoch), timeout_s)
            except TimeoutError:
                return Err.REQUEST_TIMED_OUT, -1, f"Not replicated within {timeout_s:.1f}s"
        except ReplicationError as e:
            return Err.NOT_LEADER_OR_FOLLOWER, -1, str(e)
        except OSError as e:
            log.error("event=delete_records_failed topic=%s partition=%d error=%r", self.topic, self.partition, str(e))
            return Err.KAFKA_STORAGE_ERROR, -1, str(e)
        self._wake()
        return Err.NONE, self.data.log_start_offset, None

    def last_stable_offset(self) -> int:
        """Where read_committed consumers stop: the first offset of the oldest open transaction."""
        return self.data.txns.last_stable_offset(self.data.high_watermark, self.data.log_start_offset)

    async def _replicate(self, hdr: BatchHeader, batch: bytes, timeout_s: float) -> ProduceResult:
        epoch = self.leader_epoch
        base = self.next_offset
        assigned = assign_offsets(batch, base, term_of(epoch))  # Kafka's leader epoch: the Raft term
        self.next_offset = base + hdr.last_offset_delta + 1
        try:
            try:
                result = await asyncio.wait_for(self.rlog.append(assigned, epoch), timeout_s)
            except TimeoutError:
                return ProduceResult(Err.REQUEST_TIMED_OUT, message=f"Not replicated within {timeout_s:.1f}s")
            if result < 0:
                raise ReplicationError(f"batch refused by the replicated log ({result})")
        except ReplicationError as e:
            self.next_offset = self.data.log_end_offset
            return ProduceResult(Err.NOT_LEADER_OR_FOLLOWER, message=str(e))
        except OSError as e:
            self.next_offset = self.data.log_end_offset
            log.error("event=append_failed topic=%s partition=%d error=%r", self.topic, self.partition, str(e))
            return ProduceResult(Err.KAFKA_STORAGE_ERROR, message=str(e))
        self._wake()
        return ProduceResult(Err.NONE, base, self.data.log_start_offset)

    def plan_read(self, offset: int, max_bytes: int, *, min_one: bool, upper: int | None = None) -> ReadPlan:
        return self.data.plan_read(offset, max_bytes, min_one=min_one, upper=upper)

    def add_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.add(fut)

    def remove_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(fut)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def close(self) -> None:
        self._wake()
        self.data.close()


KEY_MAP_BYTES_PER_KEY = 128  # a compaction map's cost per key here (a 16-byte digest in a dict)


class PartitionStore:
    """All data partitions of this node, opened on demand from ``<data_dir>/topics``."""

    def __init__(self, data_dir: str, config: Any) -> None:
        self.root = os.path.join(data_dir, "topics")
        os.makedirs(self.root, exist_ok=True)
        sweep_installs(self.root)
        self.config = config
        self._parts: dict[tuple[str, int], DataPartition] = {}
        self._cleaner: Any = None  # the compaction process pool, once a pass needs it

    def directory(self, topic: str, partition: int) -> str:
        return os.path.join(self.root, f"{topic}-{partition}")

    def open(self, topic: str, partition: int, topic_configs: dict[str, str]) -> DataPartition:
        key = (topic, partition)
        part = self._parts.get(key)
        if part is None:
            d = self.directory(topic, partition)
            settings = self._settings(topic_configs)
            data = DataLog(d, **settings)
            part = DataPartition(topic, partition, d, data, max_message_bytes=self._max_message(topic_configs))
            self._parts[key] = part
        return part

    def _settings(self, topic_configs: dict[str, str]) -> dict[str, Any]:
        """A data log's settings from its topic's overrides, else the node's."""
        c, t = self.config, topic_configs
        compaction = Compaction(
            delete_retention_ms=int(t.get("delete.retention.ms", c.log_cleaner_delete_retention_ms)),
            min_lag_ms=int(t.get("min.compaction.lag.ms", c.log_cleaner_min_compaction_lag_ms)),
            max_lag_ms=int(t.get("max.compaction.lag.ms", c.log_cleaner_max_compaction_lag_ms)),
            min_dirty_ratio=float(t.get("min.cleanable.dirty.ratio", c.log_cleaner_min_cleanable_ratio)),
            segment_ms=int(t.get("segment.ms", c.log_roll_ms)))
        return {"segment_bytes": int(t.get("segment.bytes", c.log_segment_bytes)),
                "retention_ms": int(t.get("retention.ms", c.log_retention_ms)),
                "retention_bytes": int(t.get("retention.bytes", c.log_retention_bytes)),
                "cleanup_policy": t.get("cleanup.policy", DEFAULT_POLICY), "compaction": compaction}

    def _max_message(self, topic_configs: dict[str, str]) -> int:
        return int(topic_configs.get("max.message.bytes", self.config.message_max_bytes))

    def reconfigure_defaults(self, config: Any, topic_configs: dict[str, dict[str, str]]) -> None:
        """The node's dynamic settings changed (``cluster/broker_configs.py``): every open partition
        takes its topic's settings again, over the new defaults."""
        self.config = config
        for (name, _), part in self._parts.items():
            configs = topic_configs.get(name, {})
            part.data.reconfigure(**self._settings(configs))
            part.max_message_bytes = self._max_message(configs)
        log.info("event=log_defaults_reconfigured retention_ms=%d retention_bytes=%d segment_bytes=%d",
                 config.log_retention_ms, config.log_retention_bytes, config.log_segment_bytes)

    def reconfigure(self, topic: str, topic_configs: dict[str, str]) -> None:
        """A topic's configs altered: its open partitions follow from their next append, fetch or
        retention run on."""
        settings = self._settings(topic_configs)
        for (name, _), part in self._parts.items():
            if name == topic:
                part.data.reconfigure(**settings)
                part.max_message_bytes = self._max_message(topic_configs)
        log.info("event=topic_reconfigured topic=%s configs=%s", topic, sorted(topic_configs.items()))

    def get(self, topic: str, partition: int) -> DataPartition | None:
        return self._parts.get((topic, partition))

    def all(self) -> list[DataPartition]:
        return list(self._parts.values())

    def drop_partition(self, topic: str, partition: int) -> None:
        part = self._parts.pop((topic, partition), None)
        if part is not None:
            part.close()
        remove_dir(self.directory(topic, partition))

    def drop_topic(self, topic: str, partitions: int) -> None:
        for p in range(partitions):
            self.drop_partition(topic, p)

    def enforce_retention(self) -> int:
        deleted = 0
        for part in self.all():
            try:
                deleted += part.data.enforce_retention()
            except OSError as e:
                log.error("event=retention_failed topic=%s partition=%d error=%r", part.topic, part.partition, str(e))
        return deleted

    def compact(self) -> int:
        """A compaction pass over every partition whose policy has compact (the node's cleaner
        thread); the partitions compacted. A partition whose copy could not be written is left as
        it was (logged); one whose swap failed half way stops the node (its next start completes it)."""
        capacity = max(self.config.log_cleaner_dedupe_buffer_size // KEY_MAP_BYTES_PER_KEY, 1)
        done = 0
        for part in self.all():
            try:
                done += part.data.compact(capacity, run=self._run_pass) is not None
            except Exception as e:  # noqa: BLE001 - one partition's failure leaves it as it was, and the others go on
                log.error("event=compaction_failed topic=%s partition=%d error=%r", part.topic, part.partition, str(e))
        return done

    def _run_pass(self, job: PassJob) -> PassResult:
        """A compaction pass in the cleaner's own process: its CPU time in this one would hold the
        GIL against the loop and the Raft ticker, each of whose socket calls would then wait out
        a switch interval (produce p99 rose from 12 ms to 0.94 s while a pass ran in a thread)."""
        if self._cleaner is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._cleaner = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                                initializer=die_with_parent)
        result: PassResult = self._cleaner.submit(run_pass, job).result()
        return result

    def expire_producers(self, expiration_ms: int) -> int:
        return sum(part.data.expire_producers(expiration_ms) for part in self.all())

    def close(self) -> None:
        for part in self._parts.values():
            part.close()
        self._parts.clear()
        if self._cleaner is not None:
            self._cleaner.shutdown(wait=False, cancel_futures=True)


__all__ = ["DataPartition", "Err", "OffsetOutOfRangeError", "PartitionStore", "ProduceResult"]
