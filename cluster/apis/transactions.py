"""The transaction coordinator's APIs: InitProducerId with a transactional id (22) v0-5,
AddPartitionsToTxn (24) v0-3 from clients and v4-5 from partition leaders, AddOffsetsToTxn (25)
v0-4, EndTxn (26) v0-5, DescribeTransactions (65) v0 and ListTransactions (66) v0-1.

Both transaction protocol versions: a request's version says which (EndTxn v5, Produce v12 and
TxnOffsetCommit v5 are version 2, KIP-890 part 2: every end bumps the epoch, and partitions join
the transaction when a batch or a commit reaches them, added by their leader). Partition leaders
verify a version 1 transactional batch that would open a transaction on their partition against
the coordinator (KIP-890 part 1, ``verify``), and add a version 2 one: directly when the
coordinator is on the same node, else with an AddPartitionsToTxn v4 batch (VerifyOnly for
version 1).
A transactional id lives in ``__transaction_state`` partition ``partition_for(id, m)``; a node
that does not lead it answers NOT_COORDINATOR and the client looks it up again.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from dataclasses import replace
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster import metrics
from cluster.apis import produce
from cluster.apis.common import ZERO, mk, req_mod, resp_mod, to_ms, version_of
from cluster.dispatch import RequestContext
from cluster.metadata import OFFSETS_TOPIC
from cluster.peer_client import PeerClient, PeerRequestError
from cluster.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from cluster.security.tls import peer_context
from cluster.services import Catalog, Guarded, Identity, Placement, Producers, Registers
from cluster.txn_driver import TxnDriver
from coordinator.partitioner import partition_for
from replication.api import ReplicationError
from transactions import commands as c
from transactions.errors import TxnError, for_version
from transactions.state import TxnState


class Needs(Registers, Placement, Identity, Catalog, Producers, Guarded, Protocol):
    """What this module uses of its node (``cluster.services``)."""


INIT_PID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, DESCRIBE_TXNS, LIST_TXNS = 22, 24, 25, 26, 65, 66
NETWORK_EXCEPTION = 13
# A partition leader's adds that find the producer's previous transaction still completing are
# tried again after these pauses (Kafka: add.partitions.to.txn.retry.backoff(.max).ms, 20-100 ms),
# about 5 s in all, then the producer is told to retry its batch.
ADD_RETRY_DELAYS_S = (0.02, 0.04, 0.08) + (0.1,) * 48
# The first version of each API that may carry PRODUCER_FENCED (older ones are told 47).
_FENCED_SINCE = {INIT_PID: 4, ADD_PARTITIONS: 2, ADD_OFFSETS: 2, END_TXN: 2}
log = logging.getLogger("kcoord.api.transactions")


def _code(error: TxnError, api_key: int, version: int) -> ErrorCode:
    return ErrorCode(int(for_version(error, version, _FENCED_SINCE.get(api_key, 0))))


def _ms_time(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


class TxnApi:
    """Registered on the node; owns the transaction coordinator's driver."""

    def __init__(self, node: Needs, driver: TxnDriver) -> None:
        self.node = node
        self.driver = driver
        self.peers = PeerClient(f"kcoord-{node.node_id}-txn-verify", ssl_context=peer_context(node.config))

    async def start(self) -> None:
        await self.driver.start()

    async def stop(self) -> None:
        self.peers.close()
        await self.driver.stop()

    def partition(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.driver.num_partitions)

    async def call(self, transactional_id: str, request: c.Request) -> c.Response:
        return await self.driver.call(self.partition(transactional_id), request)

    # ------------------------------------------------------------ InitProducerId

    async def init_producer_id(self, ctx: RequestContext, req: Any, respond: Any) -> Any:
        """InitProducerId with a transactional id (``respond(request, code, pid, epoch)`` builds
        the answer; the idempotent case stays with Produce's handler)."""
        v = version_of(req)
        fresh = -1
        try:  # an id the coordinator may need (a new transactional id, or an exhausted epoch)
            fresh = await self.node.allocate_producer_id()
        except (ReplicationError, TimeoutError) as e:
            log.info("event=producer_id_unavailable error=%r", str(e))
        r = await self.call(req.transactional_id, c.InitProducerId(
            req.transactional_id, to_ms(req.transaction_timeout),
            int(getattr(req, "producer_id", -1)), int(getattr(req, "producer_epoch", -1)), fresh))
        assert isinstance(r, c.InitProducerIdResponse)
        if r.error is TxnError.NONE:
            log.info("event=txn_producer_initialized transactional_id=%r producer_id=%d epoch=%d client_id=%r",
                     req.transactional_id, r.producer_id, r.producer_epoch, ctx.client_id)
        return respond(req, _code(r.error, INIT_PID, v), r.producer_id, r.producer_epoch)

    # ------------------------------------------------------------ AddPartitionsToTxn / AddOffsetsToTxn

    async def add_partitions(self, ctx: RequestContext, req: Any) -> Any:
        v = version_of(req)
        if v >= 4:
            return await self._add_partitions_batch(req)
        metrics.count_transaction_request("AddPartitionsToTxn", 1)
        tid = req.v3_and_below_transactional_id
        wanted = [(t.name, int(p)) for t in req.v3_and_below_topics for p in t.partitions]
        # Kafka adds nothing if any partition is refused or unknown: that one says why, the rest were
        # not tried. An internal topic is refused whatever the ACLs say.
        denied = {tp for tp in wanted if self.node.is_internal_topic(tp[0])
                  or not ctx.allowed(Operation.WRITE, ResourceType.TOPIC, tp[0])}
        unknown = {tp for tp in wanted if tp not in denied and not self.node.has_partition(*tp)}
        if denied or unknown:
            errors = {tp: (TxnError.TOPIC_AUTHORIZATION_FAILED if tp in denied else TxnError.UNKNOWN_TOPIC_OR_PARTITION
                           if tp in unknown else TxnError.OPERATION_NOT_ATTEMPTED) for tp in wanted}
        else:
            r = await self.call(tid, c.AddPartitions(tid, int(req.v3_and_below_producer_id),
                                                     int(req.v3_and_below_producer_epoch), tuple(wanted)))
            assert isinstance(r, c.AddPartitionsResponse)
            errors = r.errors
        return self._add_partitions_response(req, {tp: _code(e, ADD_PARTITIONS, v) for tp, e in errors.items()})

    async def _add_partitions_batch(self, req: Any) -> Any:
        """v4, sent by a partition leader: each transaction is verified (VerifyOnly) or added."""
        m = resp_mod(ADD_PARTITIONS, version_of(req))
        results = []
        for t in req.transactions:
            wanted = tuple((x.name, int(p)) for x in t.topics for p in x.partitions)
            # (a group's __consumer_offsets partition is added for a version 2 TxnOffsetCommit)
            unknown = {tp for tp in wanted if not (self.node.has_partition(*tp) or tp[0] == OFFSETS_TOPIC
                                                   and 0 <= tp[1] < self.node.offsets_partitions)}
            if unknown and not t.verify_only:  # as for v3: nothing is added
                errors = {tp: (TxnError.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else
                               TxnError.OPERATION_NOT_ATTEMPTED) for tp in wanted}
            else:
                ask: c.Request = (
                    c.VerifyPartitions(t.transactional_id, int(t.producer_id), int(t.producer_epoch), wanted)
                    if t.verify_only else  # a leader adding for a transaction version 2 client
                    c.AddPartitions(t.transactional_id, int(t.producer_id), int(t.producer_epoch), wanted, version=2))
                r = await self.call(t.transactional_id, ask)
                assert isinstance(r, c.AddPartitionsResponse)
                errors = r.errors
            results.append(mk(m.AddPartitionsToTxnResult, transactional_id=t.transactional_id,
                              topic_results=_topic_results(m, {tp: ErrorCode(int(e)) for tp, e in errors.items()},
                                                           t.topics)))
        return mk(m.AddPartitionsToTxnResponse, throttle_time=ZERO, error_code=ErrorCode.none,
                  results_by_transaction=tuple(results))

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                     partition: int, add: bool = False) -> int:
        """The coordinator's answer (a Kafka error code) to: is ``topic``-``partition`` in this
        producer's open transaction? With ``add`` (transaction version 2: the client sends no
        AddPartitionsToTxn), it is added; while the producer's previous transaction is still
        being completed the coordinator says CONCURRENT_TRANSACTIONS, and the add is tried again
        here, as Kafka's partition leaders do, for up to ``ADD_RETRY_S``."""
        if add:
            metrics.count_transaction_request("LeaderAdd", 2)
        delays = iter(ADD_RETRY_DELAYS_S)
        while True:
            code = await self._ask_coordinator(transactional_id, producer_id, producer_epoch, topic, partition, add)
            delay = next(delays, None) if add and code == int(TxnError.CONCURRENT_TRANSACTIONS) else None
            if delay is None:
                return code
            await asyncio.sleep(delay)

    async def _ask_coordinator(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                               partition: int, add: bool) -> int:
        tp = (topic, partition)
        leader = self.node.topology.txn_leader(self.partition(transactional_id))
        if leader is None:
            return int(TxnError.COORDINATOR_NOT_AVAILABLE)
        if leader.node_id == self.node.node_id:
            ask: c.Request = (c.AddPartitions(transactional_id, producer_id, producer_epoch, (tp,), version=2) if add
                              else c.VerifyPartitions(transactional_id, producer_id, producer_epoch, (tp,)))
            r = await self.call(transactional_id, ask)
            assert isinstance(r, c.AddPartitionsResponse)
            return int(r.errors.get(tp, TxnError.UNKNOWN_SERVER_ERROR))
        m = req_mod(ADD_PARTITIONS, 4)
        request = mk(m.AddPartitionsToTxnRequest, transactions=(mk(
            m.AddPartitionsToTxnTransaction, transactional_id=transactional_id, producer_id=producer_id,
            producer_epoch=producer_epoch, verify_only=not add,
            topics=(mk(m.AddPartitionsToTxnTopic, name=topic, partitions=(partition,)),)),))
        try:
            resp = await self.peers.request(leader.host, leader.port, ADD_PARTITIONS, 4, request)
        except PeerRequestError as e:
            log.info("event=txn_verify_unsent coordinator=%d error=%r", leader.node_id, str(e))
            return NETWORK_EXCEPTION
        if int(resp.error_code) != 0:
            return int(resp.error_code)
        return next((int(r.partition_error_code) for x in resp.results_by_transaction for t in x.topic_results
                     for r in t.results_by_partition if (t.name, int(r.partition_index)) == tp),
                    int(TxnError.UNKNOWN_SERVER_ERROR))

    @staticmethod
    def _add_partitions_response(req: Any, codes: dict[tuple[str, int], ErrorCode]) -> Any:
        m = resp_mod(ADD_PARTITIONS, version_of(req))
        return mk(m.AddPartitionsToTxnResponse, throttle_time=ZERO,
                  results_by_topic_v3_and_below=_topic_results(m, codes, req.v3_and_below_topics))

    async def add_offsets(self, ctx: RequestContext, req: Any) -> Any:
        v = version_of(req)
        metrics.count_transaction_request("AddOffsetsToTxn", 1)
        if not req.group_id:
            error = TxnError.INVALID_REQUEST  # Kafka: an invalid group id is refused before the coordinator
        else:
            # The group's __consumer_offsets partition joins the transaction, as in Kafka.
            offsets_partition = (OFFSETS_TOPIC, partition_for(req.group_id, self.node.offsets_partitions))
            r = await self.call(req.transactional_id, c.AddPartitions(
                req.transactional_id, int(req.producer_id), int(req.producer_epoch), (offsets_partition,)))
            assert isinstance(r, c.AddPartitionsResponse)
            error = r.error
        m = resp_mod(ADD_OFFSETS, v)
        return mk(m.AddOffsetsToTxnResponse, throttle_time=ZERO, error_code=_code(error, ADD_OFFSETS, v))

    # ------------------------------------------------------------ EndTxn

    async def end_txn(self, ctx: RequestContext, req: Any) -> Any:
        """EndTxn; v5 is transaction version 2: the end bumps the producer's epoch and the answer
        gives the id and epoch of its next transaction (a new id once the epoch ran out)."""
        v = version_of(req)
        metrics.count_transaction_request("EndTxn", 2 if v >= 5 else 1)
        ask = c.EndTxn(req.transactional_id, int(req.producer_id), int(req.producer_epoch), bool(req.committed),
                       version=2 if v >= 5 else 1)
        r = await self.call(req.transactional_id, ask)
        assert isinstance(r, c.EndTxnResponse)
        if r.wants_producer_id:  # this end exhausts the epoch: the coordinator rotates to a new id
            try:
                r = await self.call(req.transactional_id, replace(ask, fresh_producer_id=await
                                                                  self.node.allocate_producer_id()))
            except (ReplicationError, TimeoutError) as e:
                log.info("event=producer_id_unavailable error=%r", str(e))
            assert isinstance(r, c.EndTxnResponse)
        log.info("event=txn_end transactional_id=%r producer_id=%d epoch=%d commit=%s version=%d error=%s",
                 req.transactional_id, req.producer_id, req.producer_epoch, bool(req.committed),
                 2 if v >= 5 else 1, r.error.name)
        m = resp_mod(END_TXN, v)
        return mk(m.EndTxnResponse, throttle_time=ZERO, error_code=_code(r.error, END_TXN, v),
                  producer_id=r.producer_id, producer_epoch=r.producer_epoch)

    # ------------------------------------------------------------ admin reads

    async def describe(self, ctx: RequestContext, req: Any) -> Any:
        by_partition: dict[int, list[str]] = {}
        for tid in req.transactional_ids:
            by_partition.setdefault(self.partition(tid), []).append(tid)
        found: dict[str, c.DescribedTransaction] = {}
        for tid in req.transactional_ids:
            if not ctx.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
                by_partition[self.partition(tid)].remove(tid)
                found[tid] = c.DescribedTransaction(tid, TxnError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        for p, ids in by_partition.items():
            r = await self.driver.call(p, c.DescribeTransactions(tuple(ids)))
            assert isinstance(r, c.DescribeTransactionsResponse)
            found.update((t.transactional_id, t) for t in r.transactions)
        m = resp_mod(DESCRIBE_TXNS, 0)
        states = []
        for tid in req.transactional_ids:
            t = found[tid]
            topics: dict[str, list[int]] = {}
            for topic, p in t.partitions:  # only the topics the principal may describe
                if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic):
                    topics.setdefault(topic, []).append(p)
            states.append(mk(m.TransactionState, error_code=ErrorCode(int(t.error)), transactional_id=tid,
                             transaction_state=t.state, transaction_timeout=datetime.timedelta(milliseconds=t.timeout_ms),
                             transaction_start_time=_ms_time(t.start_ms), producer_id=t.producer_id,
                             producer_epoch=t.producer_epoch,
                             topics=tuple(mk(m.TopicData, topic=k, partitions=tuple(ps)) for k, ps in topics.items())))
        return mk(m.DescribeTransactionsResponse, throttle_time=ZERO, transaction_states=tuple(states))

    async def list_transactions(self, ctx: RequestContext, req: Any) -> Any:
        """This node's part of the list (the admin client asks every broker and merges)."""
        v = version_of(req)
        m = resp_mod(LIST_TXNS, v)
        request = c.ListTransactions(tuple(req.state_filters), tuple(int(p) for p in req.producer_id_filters),
                                     int(getattr(req, "duration_filter", -1)))
        if self.driver.runtime.loading():
            return mk(m.ListTransactionsResponse, throttle_time=ZERO, error_code=ErrorCode.coordinator_load_in_progress,
                      unknown_state_filters=(), transaction_states=())
        listed: list[c.ListedTransaction] = []
        unknown: tuple[str, ...] = ()
        for p in self.driver.runtime.active_partitions():
            r = await self.driver.call(p, request)
            if isinstance(r, c.ListTransactionsResponse) and r.error is TxnError.NONE:
                listed += r.transactions
                unknown = r.unknown_states
        listed = [t for t in listed if ctx.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id)]
        return mk(m.ListTransactionsResponse, throttle_time=ZERO, error_code=ErrorCode.none,
                  unknown_state_filters=unknown or tuple(s for s in request.states if TxnState.from_label(s) is None),
                  transaction_states=tuple(mk(m.TransactionState, transactional_id=t.transactional_id, producer_id=t.producer_id,
                                              transaction_state=t.state) for t in listed))


def _topic_results(m: Any, codes: dict[tuple[str, int], ErrorCode], asked: Any = ()) -> tuple[Any, ...]:
    """Per topic, its partitions' codes; a topic ``asked`` for with no partitions is answered
    with none (as Kafka does)."""
    topics: dict[str, list[Any]] = {t.name: [] for t in asked}
    for (topic, p), code in codes.items():
        topics.setdefault(topic, []).append(mk(m.AddPartitionsToTxnPartitionResult, partition_index=p,
                                               partition_error_code=code))
    return tuple(mk(m.AddPartitionsToTxnTopicResult, name=t, results_by_partition=tuple(ps)) for t, ps in topics.items())


def _errors(api_key: int) -> Any:
    def respond(req: Any, code: ErrorCode) -> Any:
        v = version_of(req)
        m = resp_mod(api_key, v)
        if api_key == ADD_PARTITIONS and v >= 4:
            return mk(m.AddPartitionsToTxnResponse, throttle_time=ZERO, error_code=code, results_by_transaction=())
        if api_key == ADD_PARTITIONS:
            return TxnApi._add_partitions_response(
                req, {(t.name, int(p)): code for t in req.v3_and_below_topics for p in t.partitions})
        if api_key == DESCRIBE_TXNS:
            return mk(m.DescribeTransactionsResponse, throttle_time=ZERO, transaction_states=tuple(
                mk(m.TransactionState, error_code=code, transactional_id=t, transaction_state="",
                   transaction_timeout=ZERO, transaction_start_time=_ms_time(-1), producer_id=-1, producer_epoch=-1,
                   topics=()) for t in req.transactional_ids))
        if api_key == LIST_TXNS:
            return mk(m.ListTransactionsResponse, throttle_time=ZERO, error_code=code, unknown_state_filters=(),
                      transaction_states=())
        cls = {ADD_OFFSETS: "AddOffsetsToTxnResponse", END_TXN: "EndTxnResponse"}[api_key]
        return mk(getattr(m, cls), throttle_time=ZERO, error_code=code)
    return respond


def _writes_txn(ctx: RequestContext, tid: str | None) -> bool:
    return tid is not None and ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid)


def _init_pid_gate(ctx: RequestContext, req: Any) -> ErrorCode | None:
    """A transactional producer needs WRITE on its id; an idempotent one IDEMPOTENT_WRITE on the
    cluster or WRITE on some topic (KIP-679)."""
    node: Needs = ctx.node
    if req.transactional_id is not None:
        return None if _writes_txn(ctx, req.transactional_id) else ErrorCode.transactional_id_authorization_failed
    if ctx.allowed(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME) or \
            node.access.allowed_on_some(ctx.principal, ctx.ip, Operation.WRITE, ResourceType.TOPIC):
        return None
    return ErrorCode.cluster_authorization_failed


def _add_partitions_gate(ctx: RequestContext, req: Any) -> ErrorCode | None:
    if version_of(req) >= 4:  # the other nodes' verification batches
        return None if ctx.allowed(Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME) \
            else ErrorCode.cluster_authorization_failed
    return None if _writes_txn(ctx, req.v3_and_below_transactional_id) \
        else ErrorCode.transactional_id_authorization_failed


def _add_offsets_gate(ctx: RequestContext, req: Any) -> ErrorCode | None:
    if not _writes_txn(ctx, req.transactional_id):
        return ErrorCode.transactional_id_authorization_failed
    return None if ctx.allowed(Operation.READ, ResourceType.GROUP, req.group_id) \
        else ErrorCode.group_authorization_failed


def _end_txn_gate(ctx: RequestContext, req: Any) -> ErrorCode | None:
    return None if _writes_txn(ctx, req.transactional_id) else ErrorCode.transactional_id_authorization_failed


def register(node: Needs, driver: TxnDriver) -> TxnApi:
    api = TxnApi(node, driver)

    async def init_producer_id(ctx: RequestContext, req: Any) -> Any:
        if req.transactional_id is None:
            return await produce.handle_init_pid(ctx, req)  # an idempotent producer: no coordinator
        return await api.init_producer_id(ctx, req, produce.build_init_pid)

    node.registry.register(INIT_PID, 0, 5, init_producer_id, error_response=produce.build_init_pid,
                           authorize=_init_pid_gate)
    for key, lo, hi, handler, gate in ((ADD_PARTITIONS, 0, 5, api.add_partitions, _add_partitions_gate),
                                       (ADD_OFFSETS, 0, 4, api.add_offsets, _add_offsets_gate),
                                       (END_TXN, 0, 5, api.end_txn, _end_txn_gate),
                                       (DESCRIBE_TXNS, 0, 0, api.describe, None),
                                       (LIST_TXNS, 0, 1, api.list_transactions, None)):
        node.registry.register(key, lo, hi, handler, error_response=_errors(key), authorize=gate)
    return api
