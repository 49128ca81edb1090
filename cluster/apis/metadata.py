"""Metadata (3) v0–13: brokers, cluster id, controller, topics/partitions/leaders; and
DescribeCluster (60) v0–2, the same view of the brokers without the topics."""

from __future__ import annotations

import logging
import uuid
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, resp_mod, version_of
from cluster.apis.topics import partition_limit_error
from cluster.dispatch import RequestContext, warn
from cluster.metadata import OFFSETS_TOPIC, PartitionLimitError, validate_topic_name
from cluster.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from cluster.services import Catalog, Guarded, Identity, Placement, Registers, TopicAdmin


class Needs(Registers, Placement, Identity, Catalog, TopicAdmin, Guarded, Protocol):
    """What this module uses of its node (``cluster.services``)."""


API_KEY = 3
log = logging.getLogger("kcoord.api.metadata")
ZERO_UUID = uuid.UUID(int=0)
NO_OPERATIONS = -2147483648  # authorized operations not asked for


def partition_entry(cls: type, node: Placement, name: str | None, p: int, live: frozenset[int]) -> Any:
    """A partition's leader, epoch and replicas as ``cls`` (Metadata's or DescribeTopicPartitions')
    carries them."""
    replicas = tuple(node.topology.replica_ids())
    if name == OFFSETS_TOPIC:
        leader = node.topology.offsets_leader(p)
        leader_id, epoch = (leader.node_id, 0) if leader is not None else (-1, -1)
    else:
        leader_id, epoch = node.topology.partition_leader(name or "", p)  # a nameless topic has no partitions
    # Liveness comes from the metadata group's connections, leadership from each partition's own group;
    # the two can disagree for a moment around a crash. Never name a leader that is not in the broker
    # list (as Kafka never does): clients look the leader up there, and kafka-python loses a partition's
    # fetches for good when that lookup fails.
    if leader_id not in live:
        leader_id, epoch = -1, -1
    error = ErrorCode.none if leader_id >= 0 else ErrorCode.leader_not_available
    return mk(cls, error_code=error, partition_index=p, leader_id=leader_id,
              leader_epoch=epoch, replica_nodes=replicas, isr_nodes=tuple(r for r in replicas if r in live),
              eligible_leader_replicas=(), last_known_elr=(), offline_replicas=tuple(r for r in replicas if r not in live))


def _topic(m: Any, node: Needs, name: str | None, error: ErrorCode, *, topic_id: uuid.UUID | None = None,
           partitions: int = 0, internal: bool = False, epoch: int = 0, live: frozenset[int] = frozenset(),
           ops: int = NO_OPERATIONS) -> Any:
    parts = tuple(partition_entry(m.MetadataResponsePartition, node, name, p, live) for p in range(partitions))
    return mk(m.MetadataResponseTopic, error_code=error, name=name, topic_id=topic_id or ZERO_UUID,
              is_internal=internal, partitions=parts, topic_authorized_operations=ops)


class Access:
    """What the requesting principal may see: DESCRIBE per topic, the bitfields if asked for."""

    def __init__(self, ctx: RequestContext | None, request: Any) -> None:
        self.ctx = ctx
        self.topic_ops = bool(getattr(request, "include_topic_authorized_operations", False))
        self.cluster_ops = bool(getattr(request, "include_cluster_authorized_operations", False))

    def describes(self, name: str) -> bool:
        return self.ctx is None or self.ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name)

    def cluster_bits(self) -> int:
        """ClusterAuthorizedOperations (v8-10): 0 without DESCRIBE on the cluster, as Kafka answers."""
        if self.cluster_ops and self.ctx is not None and \
                not self.ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return 0
        return self.ops(ResourceType.CLUSTER, CLUSTER_NAME, self.cluster_ops)

    def ops(self, rtype: ResourceType, name: str, wanted: bool) -> int:
        if not wanted or self.ctx is None:
            return NO_OPERATIONS
        node: Needs = self.ctx.node
        return node.access.operations(self.ctx.principal, self.ctx.ip, rtype, name)


def _known(m: Any, node: Needs, name: str, live: frozenset[int], access: Access) -> Any:
    if not access.describes(name):
        return _topic(m, node, name, ErrorCode.topic_authorization_failed)
    ops = access.ops(ResourceType.TOPIC, name, access.topic_ops)
    if name == OFFSETS_TOPIC:
        return _topic(m, node, name, ErrorCode.none, partitions=node.offsets_partitions, internal=True, epoch=1,
                      live=live, ops=ops)
    t = node.topic(name)
    assert t is not None, name  # asked only of the names the node has
    return _topic(m, node, name, ErrorCode.none, topic_id=t.topic_id, partitions=t.partitions, epoch=1, live=live,
                  ops=ops)


def build(node: Needs, request: Any, *, error: ErrorCode | None = None, listener: str = "",
          ctx: RequestContext | None = None, refused: frozenset[str] = frozenset()) -> Any:
    """The answer (``ctx``: the request's, for its principal's view; None for an error answer;
    ``refused``: topics whose auto-creation a partition bound refused)."""
    access = Access(ctx, request)
    v = version_of(request)
    m = resp_mod(API_KEY, v)
    brokers = tuple(mk(m.MetadataResponseBroker, node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                    for b in (node.through(x, listener) if listener else x for x in node.topology.brokers()))
    live = frozenset(b.node_id for b in brokers)
    topics: list[Any] = []
    requested = _unique(request.topics)
    if v == 0 and not requested:
        requested = None  # v0: an empty list means all topics
    auto_create = node.config.auto_create_topics and (v < 4 or bool(request.allow_auto_topic_creation))
    if requested is None:
        if error is None:  # a listing leaves out what the principal may not describe
            topics = [_known(m, node, name, live, access) for name in sorted(node.metadata.topics)
                      if access.describes(name)]
    else:
        for rt in requested:
            name = rt.name
            tid = getattr(rt, "topic_id", None)
            if error is not None:
                topics.append(_topic(m, node, name, error, topic_id=tid))
                continue
            if name is None:
                t = node.metadata.by_id(tid) if tid is not None else None
                if t is None:
                    topics.append(_topic(m, node, None, ErrorCode.unknown_topic_id, topic_id=tid))
                elif not access.describes(t.name):  # ids are not secret; the name is withheld
                    topics.append(_topic(m, node, None, ErrorCode.topic_authorization_failed, topic_id=tid))
                else:
                    topics.append(_known(m, node, t.name, live, access))
                continue
            if name == OFFSETS_TOPIC or node.topic(name) is not None or not access.describes(name):
                topics.append(_known(m, node, name, live, access))
                continue
            bad = validate_topic_name(name)
            if auto_create and ctx is not None and not _may_create(ctx, name):
                topics.append(_topic(m, node, name, ErrorCode.topic_authorization_failed))  # before the name's checks
            elif bad is not None:
                topics.append(_topic(m, node, name, ErrorCode.invalid_topic_exception))
            elif name in refused:  # as Kafka answered an auto-creation that failed: with its error
                topics.append(_topic(m, node, name, ErrorCode.policy_violation))
            elif auto_create and not node.is_internal_topic(name):
                topics.append(_topic(m, node, name, ErrorCode.leader_not_available))
            else:
                topics.append(_topic(m, node, name, ErrorCode.unknown_topic_or_partition))
    # v13's top-level error is KIP-1102's REBOOTSTRAP_REQUIRED, for a client whose bootstrap names a
    # node of another cluster: never said here (each node answers for its own cluster)
    return mk(m.MetadataResponse, throttle_time=ZERO, brokers=brokers, cluster_id=node.cluster_id,
              controller_id=node.topology.controller_id(), topics=tuple(topics),
              cluster_authorized_operations=access.cluster_bits(), error_code=ErrorCode.none)


def _may_create(ctx: RequestContext, name: str) -> bool:
    return ctx.allowed(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME) or \
        ctx.allowed(Operation.CREATE, ResourceType.TOPIC, name)


def _unique(topics: Any) -> list[Any] | None:
    """Each topic once, in request order (Kafka reads the request's topics as a set)."""
    if topics is None:
        return None
    seen: set[Any] = set()
    out = []
    for rt in topics:
        key = (rt.name, getattr(rt, "topic_id", None))
        if key not in seen:
            seen.add(key)
            out.append(rt)
    return out


async def handle(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    v = version_of(request)
    if v < 12 and any(rt.name is None for rt in request.topics or ()):
        # v10-11 may carry a null name on the wire, but topics are looked up by id only from v12:
        # Kafka answers the whole request INVALID_REQUEST, naming no broker, a null name as "".
        warn.warning("invalid_request", "event=invalid_request api_key=3 api_version=%d conn=%d error='null topic name before v12'",
                    v, ctx.connection_id)
        m = resp_mod(API_KEY, v)
        return mk(m.MetadataResponse, throttle_time=ZERO, brokers=(), cluster_id=None, controller_id=-1,
                  topics=tuple(_topic(m, node, rt.name or "", ErrorCode.invalid_request, topic_id=rt.topic_id)
                               for rt in request.topics),
                  cluster_authorized_operations=NO_OPERATIONS)
    auto_create = node.config.auto_create_topics and (v < 4 or bool(request.allow_auto_topic_creation))
    refused: set[str] = set()
    if auto_create and request.topics:
        for rt in _unique(request.topics) or ():
            name = rt.name
            if (name is None or name == OFFSETS_TOPIC or node.topic(name) is not None
                    or validate_topic_name(name) is not None or node.is_internal_topic(name)
                    or not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, name) or not _may_create(ctx, name)):
                continue
            too_many = partition_limit_error(node, node.config.default_num_partitions)
            if too_many is not None:  # the client sees POLICY_VIOLATION
                warn.warning("topic_auto_create_refused", "event=topic_auto_create_refused topic=%s reason=%r",
                             name, too_many)
                refused.add(name)
                continue
            try:
                await node.create_topic_async(name, node.config.default_num_partitions)
                log.info("event=topic_auto_created topic=%s partitions=%d", name, node.config.default_num_partitions)
            except PartitionLimitError as e:  # refused where it was applied (concurrent creations)
                warn.warning("topic_auto_create_refused", "event=topic_auto_create_refused topic=%s reason=%r",
                             name, str(e))
                refused.add(name)
            except Exception as e:  # noqa: BLE001 - the client sees LEADER_NOT_AVAILABLE/unknown and retries
                log.warning("event=topic_auto_create_failed topic=%s error=%r", name, str(e))
    return build(node, request, listener=ctx.listener, ctx=ctx, refused=frozenset(refused))


DESCRIBE_CLUSTER = 60
BROKERS_ENDPOINT = 1  # DescribeCluster's endpoint types: 1 brokers, 2 controllers


def build_describe_cluster(node: Needs, request: Any, *, error: ErrorCode | None = None, listener: str = "",
                           ctx: RequestContext | None = None) -> Any:
    """The brokers as the requester's listener reaches them, the cluster id and the controller.
    kcoord's nodes are brokers and controllers at once; asking for the controllers' endpoints
    (type 2) is answered UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker answers it."""
    m = resp_mod(DESCRIBE_CLUSTER, version_of(request))
    endpoint = int(getattr(request, "endpoint_type", BROKERS_ENDPOINT))
    if error is None and endpoint != BROKERS_ENDPOINT:
        error = ErrorCode.unsupported_endpoint_type
    if error is not None:
        return mk(m.DescribeClusterResponse, throttle_time=ZERO, error_code=error, error_message=None,
                  endpoint_type=endpoint, cluster_id=node.cluster_id, controller_id=-1, brokers=(),
                  cluster_authorized_operations=NO_OPERATIONS)
    brokers = tuple(mk(m.DescribeClusterBroker, broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack,
                       is_fenced=False)
                    for b in (node.through(x, listener) if listener else x for x in node.topology.brokers()))
    return mk(m.DescribeClusterResponse, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
              endpoint_type=endpoint, cluster_id=node.cluster_id, controller_id=node.topology.controller_id(),
              brokers=brokers, cluster_authorized_operations=Access(ctx, request).cluster_bits())


async def handle_describe_cluster(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    return build_describe_cluster(node, request, listener=ctx.listener, ctx=ctx)


def register(node: Needs) -> None:
    node.registry.register(API_KEY, 0, 13, handle, error_response=lambda req, code: build(node, req, error=code))
    node.registry.register(DESCRIBE_CLUSTER, 0, 2, handle_describe_cluster,
                           error_response=lambda req, code: build_describe_cluster(node, req, error=code))
