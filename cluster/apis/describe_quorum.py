"""DescribeQuorum (55) v0–2: the cluster metadata's Raft group, as ``kafka-metadata-quorum``
describes it: its leader, epoch (the Raft term), high watermark (commit index), the voters, and
as observers the learners (a node back on an empty disk, catching up before it may vote:
``replication/raft/voters.py``), each with its directory id (v2), log end and last fetch.

Only the metadata leader knows the others' progress: another node forwards the request to it
(as a Kafka broker forwards to the active controller). DESCRIBE on the cluster is needed, as in
Kafka; a topic other than ``__cluster_metadata`` or a partition other than 0 is
UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import mk, req_mod, resp_mod, version_of
from cluster.broker_info import BrokerInfo
from cluster.dispatch import RequestContext
from cluster.peer_client import PeerClient, PeerRequestError
from cluster.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from cluster.security.tls import peer_context
from cluster.services import Identity, Placement, Registers
from cluster.topology import QuorumView, ReplicaView

API_KEY = 55
TOPIC = "__cluster_metadata"
FORWARDED = "kcoord-describe-quorum"  # the client id of a request one node forwards to the leader
NO_DIRECTORY = uuid.UUID(int=0)


class Needs(Registers, Placement, Identity, Protocol):
    """What this module uses of its node (``cluster.services``)."""


def _directory(value: str | None) -> uuid.UUID:
    try:
        return uuid.UUID(hex=value) if value else NO_DIRECTORY
    except ValueError:  # not an id this build wrote: named as unknown, the answer still goes out
        return NO_DIRECTORY


def _replica(m: Any, r: ReplicaView) -> Any:
    return mk(m.ReplicaState, replica_id=r.node_id, replica_directory_id=_directory(r.directory),
              log_end_offset=r.log_end, last_fetch_timestamp=r.last_fetch_ms,
              last_caught_up_timestamp=r.last_caught_up_ms)


def _partition(m: Any, q: QuorumView | None, code: ErrorCode, message: str | None = None, index: int = 0) -> Any:
    if q is None:  # as Kafka answers a partition it does not lead: its schema's zeros, and a message
        if message is None and code is ErrorCode.unknown_topic_or_partition:
            message = "This server does not host this topic-partition."
        return mk(m.PartitionData, partition_index=index, error_code=code, error_message=message, leader_id=0,
                  leader_epoch=0, high_watermark=0, current_voters=(), observers=())
    return mk(m.PartitionData, partition_index=0, error_code=code, error_message=message, leader_id=q.leader_id,
              leader_epoch=q.epoch, high_watermark=q.high_watermark,
              current_voters=tuple(_replica(m, r) for r in q.voters),
              observers=tuple(_replica(m, r) for r in q.observers))


def _response(m: Any, request: Any, partition: Any, nodes: tuple[Any, ...] = (),
              code: ErrorCode = ErrorCode.none) -> Any:
    """``partition`` for the metadata partition; a partition error (its code) echoed for each asked."""
    topics = tuple(mk(m.TopicData, topic_name=t.topic_name, partitions=(partition,) if not isinstance(partition, ErrorCode)
                      else tuple(_partition(m, None, partition, index=int(p.partition_index)) for p in t.partitions))
                   for t in request.topics)
    fields: dict[str, Any] = {"error_code": code, "topics": topics}
    if hasattr(m, "Node"):  # v2
        fields.update(error_message=None, nodes=nodes)
    return mk(m.DescribeQuorumResponse, **fields)


def _nodes(node: Needs, m: Any, q: QuorumView, listener: str) -> tuple[Any, ...]:
    if not hasattr(m, "Node"):
        return ()
    brokers = {b.node_id: node.through(b, listener) for b in node.topology.brokers()}
    out = []
    for r in q.voters:  # Kafka lists the voters' endpoints
        b = brokers.get(r.node_id)
        endpoints = () if b is None else (mk(m.Listener, name=listener or "PLAINTEXT", host=b.host, port=b.port),)
        out.append(mk(m.Node, node_id=r.node_id, listeners=endpoints))
    return tuple(out)


async def _forward(node: Needs, leader: BrokerInfo, version: int, request: Any) -> Any | None:
    client = PeerClient(FORWARDED, 10.0, ssl_context=peer_context(node.config))
    try:
        return await client.request(leader.host, leader.port, API_KEY, version, request)
    except PeerRequestError:
        return None
    finally:
        client.close()


async def handle(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    m = resp_mod(API_KEY, ctx.api_version)
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return _response(m, request, ErrorCode.cluster_authorization_failed, code=ErrorCode.cluster_authorization_failed)
    asked = [(t.topic_name, int(p.partition_index)) for t in request.topics for p in t.partitions]
    if asked != [(TOPIC, 0)]:  # each partition asked echoed with the error, as Kafka answers
        return _response(m, request, ErrorCode.unknown_topic_or_partition)
    q = node.topology.quorum()
    if not q.leading:
        # by the nodes of the cluster now (a node added since this one started too)
        leader = next((b for b in node.topology.brokers() if b.node_id == q.leader_id), None)
        if leader is not None and ctx.client_id != FORWARDED:
            forwarded = await _forward(node, leader, ctx.api_version, request)
            if forwarded is not None:
                return forwarded
        return _response(m, request, ErrorCode.not_leader_or_follower)
    return _response(m, request, _partition(m, q, ErrorCode.none), _nodes(node, m, q, ctx.listener))


def build_error(request: Any, code: ErrorCode) -> Any:
    m = resp_mod(API_KEY, version_of(request))
    return _response(m, request, code, code=code)


def request_for(version: int) -> Any:
    """A DescribeQuorum of the metadata partition (for tools and tests)."""
    m = req_mod(API_KEY, version)
    return m.DescribeQuorumRequest(topics=(m.TopicData(topic_name=TOPIC, partitions=(m.PartitionData(partition_index=0),)),))


def register(node: Needs) -> None:
    node.registry.register(API_KEY, 0, 2, handle, error_response=build_error)
