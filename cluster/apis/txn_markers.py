"""Transaction markers: WriteTxnMarkers (27) v1-2 (v2 names the transaction's protocol version), served by partition leaders, and the writer the
transaction coordinator uses to send them (to itself directly, to other leaders over the wire,
one request per leader, as Kafka's marker channel does).

A partition answers NONE once its COMMIT/ABORT control batch is committed; a retriable error
(not the leader, no leader yet, a timeout) leaves the partition for the next round; a partition
whose topic was deleted is dropped from the transaction; INVALID_PRODUCER_EPOCH (a newer epoch
of the producer already wrote there) stops the markers of that transaction, as in Kafka: the
next owner of the coordinator partition tries again from the decision in the log.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import mk, req_mod, resp_mod, version_of
from cluster.data_plane import Err
from cluster.dispatch import RequestContext
from cluster.metadata import OFFSETS_TOPIC
from cluster.metadata_log import TRANSACTION_V2
from cluster.peer_client import PeerClient, PeerRequestError
from cluster.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from cluster.security.tls import peer_context
from cluster.services import Catalog, Identity, Placement, Producers, Registers
from cluster.txn_driver import MarkersAbandoned
from transactions import commands as c


class Needs(Registers, Placement, Identity, Catalog, Producers, Protocol):
    """What this module uses of its node (``cluster.services``)."""


API_KEY = 27
log = logging.getLogger("kcoord.transactions")
TopicPartition = tuple[str, int]


async def write_marker(node: Needs, producer_id: int, producer_epoch: int, commit: bool,
                       coordinator_epoch: int, topic: str, partition: int, version: int = 1) -> ErrorCode:
    """``version``: the transaction's protocol version (2: the marker's epoch is the one its
    end bumped to, above its data's)."""
    if topic == OFFSETS_TOPIC:
        # The group coordinator writes its own marker (Kafka: completeTransaction); not owning
        # the partition, or loading it, is "not the leader" for the sender, which retries.
        code = ErrorCode(await node.end_group_transaction(partition, producer_id, producer_epoch, commit,
                                                          coordinator_epoch, version))
        if code in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                    ErrorCode.coordinator_load_in_progress):
            return ErrorCode.not_leader_or_follower
        return code
    part = node.topology.partition(topic, partition)
    if part is None:
        return ErrorCode.unknown_topic_or_partition
    res = await part.write_marker(producer_id, producer_epoch, commit, coordinator_epoch, version=version)
    if res.error is not Err.NONE:
        log.info("event=txn_marker_refused topic=%s partition=%d producer_id=%d error=%s detail=%r", topic,
                 partition, producer_id, res.error.name, res.message)
    return ErrorCode(int(res.error))


async def handle(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    m = resp_mod(API_KEY, ctx.api_version)
    results = []
    for marker in request.markers:
        wanted = [(t.name, int(p)) for t in marker.topics for p in t.partition_indexes]
        version = max(int(getattr(marker, "transaction_version", 1) or 1), 1)  # v2 says; v1: version 1
        codes = await asyncio.gather(*(write_marker(node, int(marker.producer_id), int(marker.producer_epoch),
                                                    bool(marker.transaction_result), int(marker.coordinator_epoch),
                                                    topic, p, version) for topic, p in wanted))
        results.append(_result(m, int(marker.producer_id), dict(zip(wanted, codes, strict=True))))
    return mk(m.WriteTxnMarkersResponse, markers=tuple(results))


def _result(m: Any, producer_id: int, codes: dict[TopicPartition, ErrorCode]) -> Any:
    topics: dict[str, list[Any]] = {}
    for (topic, p), code in codes.items():
        topics.setdefault(topic, []).append(mk(m.WritableTxnMarkerPartitionResult, partition_index=p, error_code=code))
    return mk(m.WritableTxnMarkerResult, producer_id=producer_id, topics=tuple(
        mk(m.WritableTxnMarkerTopicResult, name=t, partitions=tuple(ps)) for t, ps in topics.items()))


def build_error(request: Any, code: ErrorCode) -> Any:
    m = resp_mod(API_KEY, version_of(request))
    return mk(m.WriteTxnMarkersResponse, markers=tuple(
        _result(m, int(x.producer_id), {(t.name, int(p)): code for t in x.topics for p in t.partition_indexes})
        for x in request.markers))


class MarkerWriter:
    """Writes one decided transaction's markers; returns the partitions still to be done."""

    def __init__(self, node: Needs) -> None:
        self.node = node
        self.client = PeerClient(f"kcoord-{node.node_id}-txn-markers", ssl_context=peer_context(node.config))

    async def __call__(self, markers: c.WriteMarkers, coordinator_epoch: int) -> tuple[TopicPartition, ...]:
        by_leader: dict[int, list[TopicPartition]] = {}
        pending: list[TopicPartition] = []
        topology = self.node.topology
        for topic, p in markers.partitions:
            if topic == OFFSETS_TOPIC:
                b = topology.offsets_leader(p)
                leader = b.node_id if b is not None else -1
            elif self.node.topic(topic) is None:
                log.info("event=txn_marker_dropped topic=%s partition=%d reason=topic_deleted", topic, p)
                continue  # Kafka drops a partition without a leader for good
            else:
                leader = topology.partition_leader(topic, p)[0]
            if leader < 0:
                pending.append((topic, p))
            else:
                by_leader.setdefault(leader, []).append((topic, p))
        done = await asyncio.gather(*(self._send(leader, parts, markers, coordinator_epoch)
                                      for leader, parts in by_leader.items()))
        for parts, codes in zip(by_leader.values(), done, strict=True):
            for tp, code in zip(parts, codes, strict=True):
                if code in (ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced):
                    raise MarkersAbandoned(f"{tp[0]}-{tp[1]}: {code.name}")
                if code != ErrorCode.none:
                    pending.append(tp)
        return tuple(pending)

    async def _send(self, leader: int, parts: list[TopicPartition], markers: c.WriteMarkers,
                    coordinator_epoch: int) -> list[ErrorCode]:
        if leader == self.node.node_id:
            return list(await asyncio.gather(*(write_marker(self.node, markers.producer_id, markers.producer_epoch,
                                                            markers.commit, coordinator_epoch, t, p, markers.version)
                                               for t, p in parts)))
        broker = next((b for b in self.node.topology.brokers() if b.node_id == leader), None)
        if broker is None:
            return [ErrorCode.not_leader_or_follower] * len(parts)
        topics: dict[str, list[int]] = {}
        for t, p in parts:
            topics.setdefault(t, []).append(p)
        # v2 names the transaction's version (KIP-1228); a node of an older release reads v1 only,
        # and there are no version 2 transactions before every node serves them
        wire = 2 if markers.version >= 2 and self.node.topology.lowest_metadata_version() >= TRANSACTION_V2 else 1
        m = req_mod(API_KEY, wire)
        request = mk(m.WriteTxnMarkersRequest, markers=(mk(
            m.WritableTxnMarker, producer_id=markers.producer_id, producer_epoch=markers.producer_epoch,
            transaction_result=markers.commit, coordinator_epoch=coordinator_epoch, transaction_version=markers.version,
            topics=tuple(mk(m.WritableTxnMarkerTopic, name=t, partition_indexes=tuple(ps)) for t, ps in topics.items())),))
        try:
            resp = await self.client.request(broker.host, broker.port, API_KEY, wire, request)
        except PeerRequestError as e:
            log.info("event=txn_markers_unsent leader=%d error=%r", leader, str(e))
            return [ErrorCode.not_leader_or_follower] * len(parts)
        got = {(t.name, int(r.partition_index)): r.error_code for x in resp.markers for t in x.topics
               for r in t.partitions}
        return [got.get(tp, ErrorCode.unknown_server_error) for tp in parts]


def _gate(ctx: RequestContext, req: Any) -> ErrorCode | None:
    """The other nodes' requests: ALTER or CLUSTER_ACTION on the cluster."""
    if ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME) or \
            ctx.allowed(Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return None
    return ErrorCode.cluster_authorization_failed


def register(node: Needs) -> None:
    node.registry.register(API_KEY, 1, 2, handle, error_response=build_error, authorize=_gate)
