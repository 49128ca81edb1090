"""Produce (0): advertised v0–12 (librdkafka needs v0 in the range, KAFKA-18659), served
v3–12 (v11: TRANSACTION_ABORTABLE for a partition outside the transaction; v12: transaction
version 2, the leader adds the partition to the transaction); v0–2 are rejected (no kio schema → the connection is closed, as Kafka 4 rejects
them). acks=0 sends no response at all; acks=1 and acks=-1 are the same on one node.

InitProducerId (22) for an idempotent producer is answered here; ``cluster.apis.transactions``
registers the API and hands a transactional id to the transaction coordinator. A transactional
batch that would open its producer's transaction on the partition (``replication.txn_index``) is
first verified with the transaction coordinator (KIP-890 part 1, ``DataPartition.produce``): a
late batch of a finished transaction would otherwise open one that no marker ever closes.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, resp_mod, to_ms, version_of
from cluster.dispatch import CloseConnection, RequestContext
from cluster.security.authorizer import Operation, ResourceType
from cluster.services import Catalog, Placement, Producers, Registers
from replication.api import ReplicationError
from replication.batch_validator import InflateBudget


class Needs(Registers, Placement, Catalog, Producers, Protocol):
    """What this module uses of its node (``cluster.services``)."""


PRODUCE_KEY = 0
INIT_PID_KEY = 22
log = logging.getLogger("kcoord.api.produce")


def _part(m: Any, index: int, code: ErrorCode, *, base_offset: int = -1, log_start: int = -1,
          message: str | None = None) -> Any:
    return mk(m.PartitionProduceResponse, index=index, error_code=code, base_offset=base_offset,
              log_append_time=None, log_start_offset=log_start, record_errors=(), error_message=message)


def build_error(request: Any, code: ErrorCode) -> Any:
    m = resp_mod(PRODUCE_KEY, version_of(request))
    return mk(m.ProduceResponse, throttle_time=ZERO, responses=tuple(
        mk(m.TopicProduceResponse, name=t.name,
           partition_responses=tuple(_part(m, p.index, code) for p in t.partition_data))
        for t in request.topic_data))


async def handle(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    m = resp_mod(PRODUCE_KEY, ctx.api_version)
    acks = int(request.acks)
    # how long the producer waits for replication (its request.timeout.ms), within sane bounds
    timeout_s = min(max(to_ms(request.timeout), 100), 300_000) / 1000
    tid = request.transactional_id
    if tid is not None and not ctx.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        return _refused(ctx, request, ErrorCode.transactional_id_authorization_failed)
    topics = []
    refused = False  # a topic the principal may not write to (acks=0: the connection closes after)
    budget = InflateBudget()  # the request's gzip batches inflate to at most this together
    for t in request.topic_data:
        parts = []
        writable = ctx.allowed(Operation.WRITE, ResourceType.TOPIC, t.name)
        refused = refused or not writable
        for p in t.partition_data:
            if not writable:
                parts.append(_part(m, p.index, ErrorCode.topic_authorization_failed))
                continue
            if acks not in (0, 1, -1):
                parts.append(_part(m, p.index, ErrorCode.invalid_required_acks))
                continue
            if node.is_internal_topic(t.name):
                parts.append(_part(m, p.index, ErrorCode.invalid_topic_exception,
                                   message=f"Cannot append to internal topic {t.name}"))
                continue
            part = node.topology.partition(t.name, p.index)
            if part is None:
                parts.append(_part(m, p.index, ErrorCode.unknown_topic_or_partition))  # no message, as Kafka
                continue
            version2 = ctx.api_version >= 12  # transaction version 2: the leader adds the partition
            verify = None if tid is None else _verifier(node, tid, t.name, p.index, version2)
            res = await part.produce(bytes(p.records) if p.records is not None else None, timeout_s,
                                     transactional=tid is not None, verify=verify, budget=budget,
                                     version2=version2, abortable=ctx.api_version >= 11)
            if res.error:
                log.info("event=produce_rejected topic=%s partition=%d error=%s detail=%r client_id=%r",
                         t.name, p.index, res.error.name, res.message, ctx.client_id)
            parts.append(_part(m, p.index, ErrorCode(int(res.error)), base_offset=res.base_offset, log_start=res.log_start_offset,
                               message=res.message))
        topics.append(mk(m.TopicProduceResponse, name=t.name, partition_responses=tuple(parts)))
    if acks == 0:
        if refused:  # the writable partitions were written; the refusal is told by closing
            _refused(ctx, request, ErrorCode.topic_authorization_failed)
        return None
    return mk(m.ProduceResponse, throttle_time=ZERO, responses=tuple(topics))


def _refused(ctx: RequestContext, request: Any, code: ErrorCode) -> Any:
    """A refused produce: the error on every partition; with acks=0, which has no answer to carry
    it, the connection is closed (Kafka's way of telling such a producer)."""
    log.info("event=produce_refused error=%s principal=%s client_id=%r", code.name, ctx.principal, ctx.client_id)
    if int(request.acks) == 0:
        raise CloseConnection
    return build_error(request, code)


def _verifier(node: Needs, transactional_id: str, topic: str, partition: int, add: bool) -> Any:
    async def verify(producer_id: int, producer_epoch: int) -> int:
        return await node.verify_txn_partition(transactional_id, producer_id, producer_epoch, topic, partition, add)
    return verify


def build_init_pid(request: Any, code: ErrorCode, pid: int = -1, epoch: int = -1) -> Any:
    m = resp_mod(INIT_PID_KEY, version_of(request))
    return mk(m.InitProducerIdResponse, throttle_time=ZERO, error_code=code, producer_id=pid, producer_epoch=epoch)


async def handle_init_pid(ctx: RequestContext, request: Any) -> Any:
    """An idempotent producer's id: a fresh one at epoch 0, no coordinator involved."""
    node: Needs = ctx.node
    try:
        pid = await node.allocate_producer_id()
    except (ReplicationError, TimeoutError) as e:  # no metadata leader right now: the client retries
        log.info("event=producer_id_unavailable error=%r", str(e))
        return build_init_pid(request, ErrorCode.coordinator_not_available)
    log.info("event=producer_id_allocated producer_id=%d client_id=%r", pid, ctx.client_id)
    return build_init_pid(request, ErrorCode.none, pid, 0)


def register(node: Needs) -> None:
    node.registry.register(PRODUCE_KEY, 3, 12, handle, advertised_min=0, error_response=build_error)
