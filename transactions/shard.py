"""One ``__transaction_state`` partition's transaction coordinator: handles, replays, expires.

Built like the group coordinator's shard: a step (a request, a timer, a markers-written
notice) takes ``now_ms`` and returns a ``Result`` of records to append, responses and marker
writes. The caller releases responses and marker writes only once every record written
before them is committed, so a decision (PrepareCommit/PrepareAbort) is durable before the
client hears of it and before any marker is written. A step's records are applied to the
live state at once (``replay``), so the next request sees the transition in flight, and a
request that finds a decided transaction waits with CONCURRENT_TRANSACTIONS, as Kafka's
pending state makes it do. A failed append throws the shard away; load is replay.

Timers are data: a heap of (deadline, transactional id) for the transaction timeout of an
open transaction and the expiration of an idle id, each re-checked against the current
state when due (a later write makes an earlier deadline stale).
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field, replace

from . import commands as c
from .config import TxnConfig
from .errors import TxnError
from .records import TxnRecord, TxnValue
from .state import IDLE, MAX_EPOCH, PREPARING, TxnState, epoch_exhausted

E = TxnError
S = TxnState
Token = Hashable


@dataclass(slots=True)
class TxnMetadata:
    """The live state of one transactional id: the last durable value plus what Kafka keeps only
    in memory (the epoch before the last bump and the id before the last rotation, used to
    recognise a retried InitProducerId; lost on reload, as in Kafka)."""

    value: TxnValue
    last_epoch: int = -1
    previous_producer_id: int = -1


@dataclass(slots=True)
class Result:
    records: list[TxnRecord] = field(default_factory=list)
    completions: list[tuple[Token, c.Response]] = field(default_factory=list)
    markers: list[c.WriteMarkers] = field(default_factory=list)


class TransactionShard:
    def __init__(self, config: TxnConfig | None = None) -> None:
        self.config = config or TxnConfig()
        self.txns: dict[str, TxnMetadata] = {}
        self.open = 0  # transactions Ongoing or decided and not yet complete
        self._deadlines: list[tuple[int, str]] = []
        self._out = Result()
        self._now = 0

    # ================================================================ durable state

    def replay(self, record: TxnRecord) -> None:
        """Apply one record; what Kafka keeps only in memory starts out unknown."""
        tid, value = record.transactional_id, record.value
        md = self.txns.get(tid)
        self.open += _is_open(value) - (md is not None and _is_open(md.value))
        if value is None:
            self.txns.pop(tid, None)
            return
        if md is None:
            md = self.txns[tid] = TxnMetadata(value)
        else:
            md.value = value
        if value.previous_producer_id >= 0:
            md.previous_producer_id = value.previous_producer_id
        self._arm(tid, value)

    def durable_view(self) -> dict[str, TxnValue]:
        return {tid: md.value for tid, md in self.txns.items()}

    @classmethod
    def load(cls, records: Iterable[TxnRecord], now_ms: int,
             config: TxnConfig | None = None) -> tuple[TransactionShard, Result]:
        """Replay a partition; every transaction found decided has its markers written again
        (markers are idempotent at the partitions), so the new leader completes it."""
        shard = cls(config)
        for record in records:
            shard.replay(record)
        shard._begin(now_ms)
        for tid, md in shard.txns.items():
            if md.value.state in PREPARING:
                shard._out.markers.append(_markers(tid, md.value))
        return shard, shard._take()

    # ================================================================ steps

    def handle(self, request: c.Request, token: Token, now_ms: int) -> Result:
        self._begin(now_ms)
        response: c.Response
        if isinstance(request, c.InitProducerId):
            response = self._init_producer_id(request)
        elif isinstance(request, c.AddPartitions):
            response = self._add_partitions(request)
        elif isinstance(request, c.VerifyPartitions):
            response = self._verify(request)
        elif isinstance(request, c.EndTxn):
            response = self._end_txn_v2(request) if request.version >= 2 else c.EndTxnResponse(self._end_txn(request))
        elif isinstance(request, c.DescribeTransactions):
            response = self._describe(request)
        else:
            response = self._list(request)
        self._out.completions.append((token, response))
        return self._take()

    def markers_written(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        commit: bool, now_ms: int) -> Result:
        """Every partition of the transaction has its marker: write CompleteCommit/CompleteAbort.
        A notice for a transaction that has moved on (a reload completed it, the id expired) is
        ignored."""
        self._begin(now_ms)
        md = self.txns.get(transactional_id)
        want = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if (md is not None and md.value.state is want and md.value.producer_id == producer_id
                and md.value.producer_epoch == producer_epoch):
            done = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
            v = md.value
            if v.client_version >= 2 and v.next_producer_id >= 0:
                # the epoch ran out: the producer goes on as the new id, from epoch 0
                v = replace(v, producer_id=v.next_producer_id, producer_epoch=0, previous_producer_id=v.producer_id)
            self._write(transactional_id, replace(v, state=done, partitions=frozenset(), next_producer_id=-1,
                                                last_update_ms=self._now))
        return self._take()

    def next_deadline(self) -> int | None:
        return self._deadlines[0][0] if self._deadlines else None

    def fire_due(self, now_ms: int) -> Result:
        """Abort transactions open past their timeout; drop ids idle past their expiration."""
        self._begin(now_ms)
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            _, tid = heapq.heappop(self._deadlines)
            md = self.txns.get(tid)
            if md is None:
                continue
            v = md.value
            if v.state is S.ONGOING and v.start_ms + v.timeout_ms < now_ms:
                self._fence_and_abort(tid, md)
            elif v.state in IDLE and v.last_update_ms + self.config.id_expiration_ms <= now_ms:
                self._out.records.append(TxnRecord(tid, None))
                self.replay(TxnRecord(tid, None))
        return self._take()

    # ================================================================ handlers

    def _init_producer_id(self, r: c.InitProducerId) -> c.InitProducerIdResponse:
        tid = r.transactional_id
        if not tid or (r.producer_id == -1) != (r.producer_epoch == -1):
            return c.InitProducerIdResponse(E.INVALID_REQUEST)
        if not 0 < r.timeout_ms <= self.config.max_timeout_ms:
            return c.InitProducerIdResponse(E.INVALID_TRANSACTION_TIMEOUT)
        expected = None if r.producer_id == -1 else (r.producer_id, r.producer_epoch)
        md = self.txns.get(tid)
        if md is None:
            if r.fresh_producer_id < 0:
                return c.InitProducerIdResponse(E.COORDINATOR_LOAD_IN_PROGRESS)
            md = TxnMetadata(TxnValue(r.fresh_producer_id, -1, r.timeout_ms, S.EMPTY, frozenset(), self._now, -1))
        v = md.value
        if v.state in PREPARING:
            return c.InitProducerIdResponse(E.CONCURRENT_TRANSACTIONS)
        if expected is not None and not (
                v.producer_epoch == -1 or expected[0] == v.producer_id
                or (expected[0] == md.previous_producer_id and epoch_exhausted(expected[1]))):
            return c.InitProducerIdResponse(E.PRODUCER_FENCED)
        if v.state is S.ONGOING:
            # Fence the open transaction: abort it at a higher epoch; the producer retries and
            # is given the next epoch once the abort is complete.
            self._fence_and_abort(tid, md)
            return c.InitProducerIdResponse(E.CONCURRENT_TRANSACTIONS)
        pid, previous = v.producer_id, md.previous_producer_id
        if epoch_exhausted(v.producer_epoch) and (expected is None or expected[1] == v.producer_epoch):
            if r.fresh_producer_id < 0:
                return c.InitProducerIdResponse(E.COORDINATOR_LOAD_IN_PROGRESS)
            pid, previous = r.fresh_producer_id, v.producer_id
            epoch, last = 0, (v.producer_epoch if expected is not None else -1)
        elif expected is None:
            epoch, last = v.producer_epoch + 1, -1
        elif v.producer_epoch == -1 or expected[1] == v.producer_epoch:
            epoch, last = v.producer_epoch + 1, v.producer_epoch
        elif expected[1] == md.last_epoch:  # a retry of a bump that succeeded: answer it again
            epoch, last = v.producer_epoch, md.last_epoch
        else:
            return c.InitProducerIdResponse(E.PRODUCER_FENCED)
        value = TxnValue(pid, epoch, r.timeout_ms, S.EMPTY, frozenset(), self._now, -1)
        self._write(tid, value, last_epoch=last, previous_producer_id=previous)
        return c.InitProducerIdResponse(E.NONE, pid, epoch)

    def _add_partitions(self, r: c.AddPartitions) -> c.AddPartitionsResponse:
        error = self._try_add(r)
        return c.AddPartitionsResponse({tp: error for tp in r.partitions})

    def _try_add(self, r: c.AddPartitions) -> TxnError:
        md = self.txns.get(r.transactional_id)
        if r.version >= 2 and md is not None and md.value.state in PREPARING:
            # the producer's last end is still being completed (its markers written): its next
            # transaction waits, whatever id and epoch it holds (a rotated id is not stored yet)
            return E.CONCURRENT_TRANSACTIONS
        v, error = self._producer(r.transactional_id, r.producer_id, r.producer_epoch)
        if v is None:
            return error
        if v.state in PREPARING:
            return E.CONCURRENT_TRANSACTIONS
        added = frozenset(r.partitions)
        if v.state is S.ONGOING and added <= v.partitions:
            return E.NONE
        start = v.start_ms if v.state is S.ONGOING else self._now
        self._write(r.transactional_id, replace(v, state=S.ONGOING, partitions=v.partitions | added,
                                              start_ms=start, last_update_ms=self._now,
                                              client_version=_added_version(v, r.version)))
        return E.NONE

    def _verify(self, r: c.VerifyPartitions) -> c.AddPartitionsResponse:
        """Kafka's verify-only AddPartitionsToTxn: the producer checks first, then per partition
        NONE if it is in the open transaction, else TRANSACTION_ABORTABLE."""
        v, error = self._producer(r.transactional_id, r.producer_id, r.producer_epoch)
        if v is not None and v.state in PREPARING:
            error = E.CONCURRENT_TRANSACTIONS
        if v is None or error is not E.NONE:
            return c.AddPartitionsResponse({tp: error for tp in r.partitions})
        inside = v.partitions if v.state is S.ONGOING else frozenset()
        return c.AddPartitionsResponse({tp: E.NONE if tp in inside else E.TRANSACTION_ABORTABLE for tp in r.partitions})

    def _end_txn(self, r: c.EndTxn) -> TxnError:
        v, error = self._producer(r.transactional_id, r.producer_id, r.producer_epoch)
        if v is None:
            return error
        if v.state is S.ONGOING:
            self._decide(r.transactional_id, v, r.commit)
            return E.NONE
        same = S.COMPLETE_COMMIT if r.commit else S.COMPLETE_ABORT  # a retry of a finished end
        deciding = S.PREPARE_COMMIT if r.commit else S.PREPARE_ABORT
        if v.state is same:
            return E.NONE
        if v.state is deciding:
            return E.CONCURRENT_TRANSACTIONS
        return E.INVALID_TXN_STATE

    def _end_txn_v2(self, r: c.EndTxn) -> c.EndTxnResponse:
        """EndTxn of transaction version 2 (Kafka's table): every end bumps the epoch, so the
        request's epoch tells a new end (the stored epoch) from a retry of the last one (one
        below it, or the last epoch of the id before a rotation). An abort with nothing open is
        an end too: it bumps the epoch."""
        tid = r.transactional_id
        if not tid:
            return c.EndTxnResponse(E.INVALID_REQUEST)
        md = self.txns.get(tid)
        if md is None:
            return c.EndTxnResponse(E.INVALID_PRODUCER_ID_MAPPING)
        v = md.value
        if v.state in PREPARING:
            # Kafka's pending transition, checked first: the last end is being completed, and the
            # producer may already hold the id and epoch it was told for its next transaction
            return c.EndTxnResponse(E.CONCURRENT_TRANSACTIONS)
        # A retry is of an end that bumped the epoch itself: not of a fence (a version 1
        # transaction's is one bump, and the fenced producer's epoch must not pass for a retry),
        # nor at the reserved last epoch, which only a fence reaches
        bumped_by_end = v.client_version >= 2 and v.producer_epoch < MAX_EPOCH
        retry_on_overflow = (md.previous_producer_id == r.producer_id and r.producer_epoch == MAX_EPOCH - 1
                             and v.producer_epoch == 0 and v.client_version >= 2)
        retry_on_bump = bumped_by_end and v.producer_epoch == r.producer_epoch + 1
        if v.producer_epoch >= MAX_EPOCH:
            valid = False  # fenced at the last epoch: nothing can end at it
        elif v.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            valid = retry_on_bump or retry_on_overflow or r.producer_epoch == v.producer_epoch
        else:
            valid = r.producer_epoch == v.producer_epoch
        retry = retry_on_bump or retry_on_overflow
        if v.producer_id != r.producer_id and not retry_on_overflow:
            return c.EndTxnResponse(E.INVALID_PRODUCER_ID_MAPPING)
        if not valid:
            return c.EndTxnResponse(E.PRODUCER_FENCED)
        done = S.COMPLETE_COMMIT if r.commit else S.COMPLETE_ABORT
        if v.state is S.ONGOING or (not r.commit and not retry and v.state in IDLE):
            next_pid = -1
            if epoch_exhausted(v.producer_epoch):
                if r.fresh_producer_id < 0:  # asked again with a new id at hand
                    return c.EndTxnResponse(E.COORDINATOR_LOAD_IN_PROGRESS, wants_producer_id=True)
                next_pid = r.fresh_producer_id
            start = v.start_ms if v.state is S.ONGOING else self._now  # an abort of nothing starts now
            decided = self._decide(tid, replace(v, producer_epoch=v.producer_epoch + 1, next_producer_id=next_pid,
                                                client_version=2, start_ms=start), r.commit)
            if next_pid >= 0:
                return c.EndTxnResponse(E.NONE, next_pid, 0)
            return c.EndTxnResponse(E.NONE, decided.producer_id, decided.producer_epoch)
        if v.state is done and retry:
            return c.EndTxnResponse(E.NONE, v.producer_id, v.producer_epoch)
        return c.EndTxnResponse(E.INVALID_TXN_STATE)

    def _producer(self, tid: str, producer_id: int, producer_epoch: int) -> tuple[TxnValue | None, TxnError]:
        """The id's state if the request comes from its current producer, else why not (Kafka's
        order: the id, the producer id, then the epoch)."""
        if not tid:
            return None, E.INVALID_REQUEST
        md = self.txns.get(tid)
        if md is None or md.value.producer_id != producer_id:
            return None, E.INVALID_PRODUCER_ID_MAPPING
        if md.value.producer_epoch != producer_epoch:
            return None, E.PRODUCER_FENCED
        return md.value, E.NONE

    def _fence_and_abort(self, tid: str, md: TxnMetadata) -> None:
        """Abort the open transaction at the next epoch, so its producer is fenced (Kafka's
        PrepareEpochFence path, taken by InitProducerId and by the transaction timeout)."""
        v = md.value
        # Version 2: the fence and the end's own bump, so the fenced producer's epoch is not one
        # below the stored one (which would read as a retry of this end, and be let through).
        bumps = 2 if v.client_version >= 2 else 1
        epoch = min(v.producer_epoch + bumps, MAX_EPOCH)
        self._decide(tid, replace(v, producer_epoch=epoch), commit=False)
        md.last_epoch = -1

    def _decide(self, tid: str, v: TxnValue, commit: bool) -> TxnValue:
        state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        value = replace(v, state=state, last_update_ms=self._now)
        self._write(tid, value)
        self._out.markers.append(_markers(tid, value))
        return value

    # ================================================================ reads

    def _describe(self, r: c.DescribeTransactions) -> c.DescribeTransactionsResponse:
        out = []
        for tid in r.transactional_ids:
            md = self.txns.get(tid)
            if not tid:
                out.append(c.DescribedTransaction(tid, E.INVALID_REQUEST))
            elif md is None:
                out.append(c.DescribedTransaction(tid, E.TRANSACTIONAL_ID_NOT_FOUND))
            else:
                v = md.value
                out.append(c.DescribedTransaction(tid, E.NONE, v.state.label, v.timeout_ms, v.start_ms,
                                                  v.producer_id, v.producer_epoch, tuple(sorted(v.partitions))))
        return c.DescribeTransactionsResponse(tuple(out))

    def _list(self, r: c.ListTransactions) -> c.ListTransactionsResponse:
        states = {s for s in (TxnState.from_label(x) for x in r.states) if s is not None}
        unknown = tuple(x for x in r.states if TxnState.from_label(x) is None)
        pids = set(r.producer_ids)
        out = []
        for tid, md in sorted(self.txns.items()):
            v = md.value
            if r.states and v.state not in states:  # only unknown names asked: nothing matches
                continue
            if pids and v.producer_id not in pids:
                continue
            if r.duration_ms >= 0 and self._now - v.start_ms <= r.duration_ms:
                continue
            out.append(c.ListedTransaction(tid, v.producer_id, v.state.label))
        return c.ListTransactionsResponse(tuple(out), unknown)

    # ================================================================ plumbing

    def _begin(self, now_ms: int) -> None:
        self._out = Result()
        self._now = now_ms

    def _take(self) -> Result:
        out, self._out = self._out, Result()
        return out

    def _write(self, tid: str, value: TxnValue, *, last_epoch: int | None = None,
               previous_producer_id: int | None = None) -> None:
        record = TxnRecord(tid, value)
        self._out.records.append(record)
        self.replay(record)
        md = self.txns[tid]
        if last_epoch is not None:
            md.last_epoch = last_epoch
        if previous_producer_id is not None:
            md.previous_producer_id = previous_producer_id

    def _arm(self, tid: str, v: TxnValue) -> None:
        if v.state is S.ONGOING:
            heapq.heappush(self._deadlines, (v.start_ms + v.timeout_ms + 1, tid))  # Kafka: past, not at
        elif v.state in IDLE:
            heapq.heappush(self._deadlines, (v.last_update_ms + self.config.id_expiration_ms, tid))


def _added_version(v: TxnValue, version: int) -> int:
    """The client version of a transaction a partition is added to: a new one takes the adding
    request's (2, or 0 for version 1, written as before); an open one keeps the highest seen."""
    asked = 2 if version >= 2 else 0
    return max(v.client_version, asked) if v.state is S.ONGOING else asked


def _is_open(v: TxnValue | None) -> bool:
    return v is not None and (v.state is S.ONGOING or v.state in PREPARING)


def _markers(tid: str, v: TxnValue) -> c.WriteMarkers:
    return c.WriteMarkers(tid, v.producer_id, v.producer_epoch, v.state is S.PREPARE_COMMIT,
                          tuple(sorted(v.partitions)), 2 if v.client_version >= 2 else 1)
