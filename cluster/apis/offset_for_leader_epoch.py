"""OffsetForLeaderEpoch (23) v2–4: where a leader epoch ended (KIP-320), which a consumer asks
after a leader change to check that its position is still in the log.

A partition's leader epoch is the Raft term of its leader (``replication.leader_epochs``): its
batches carry it, and Metadata, ListOffsets and Fetch tell it. Since Raft never truncates a
committed entry, no position a consumer read can fall past the answer: validation always passes
here, and it is exact, as Kafka computes it (``LeaderEpochFileCache.endOffsetFor``). Kafka's
checks, in its order: CLUSTER_ACTION on the cluster or DESCRIBE on the topic
(TOPIC_AUTHORIZATION_FAILED), an unknown partition (UNKNOWN_TOPIC_OR_PARTITION), a node that does
not lead it (NOT_LEADER_OR_FOLLOWER), the request's current leader epoch older or newer than the
leader's (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH). Advertised once every node stamps its
batches with terms (``RaftCluster.epochs_exact``): a client never asks it of epochs it was not told.
"""

from __future__ import annotations

from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, resp_mod, version_of
from cluster.apis.fetch import epoch_error
from cluster.dispatch import RequestContext
from cluster.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from cluster.services import Placement, Registers
from replication.leader_epochs import term_of

API_KEY = 23


class Needs(Registers, Placement, Protocol):
    """What this module uses of its node (``cluster.services``)."""


def _end(m: Any, index: int, code: ErrorCode, epoch: int = -1, end: int = -1) -> Any:
    return mk(m.EpochEndOffset, error_code=code, partition=index, leader_epoch=epoch, end_offset=end)


def _one(node: Needs, m: Any, topic: str, p: Any) -> Any:
    index = int(p.partition)
    part = node.topology.partition(topic, index)
    if part is None:
        return _end(m, index, ErrorCode.unknown_topic_or_partition)
    if not part.serves_reads:
        return _end(m, index, ErrorCode.not_leader_or_follower)
    current = part.reported_epoch
    err = epoch_error(int(p.current_leader_epoch), current)
    if err is not None:
        return _end(m, index, err)
    # an epoch an earlier release told (a batch's or a committed offset's fence epoch): its term
    epoch, end = part.data.leader_epoch_end(term_of(int(p.leader_epoch)), part.leader_term)
    return _end(m, index, ErrorCode.none, epoch, end)


async def handle(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    m = resp_mod(API_KEY, ctx.api_version)
    replicas = ctx.allowed(Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
    topics = []
    for t in request.topics:
        if replicas or ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t.topic):
            parts = tuple(_one(node, m, t.topic, p) for p in t.partitions)
        else:
            parts = tuple(_end(m, int(p.partition), ErrorCode.topic_authorization_failed) for p in t.partitions)
        topics.append(mk(m.OffsetForLeaderTopicResult, topic=t.topic, partitions=parts))
    return mk(m.OffsetForLeaderEpochResponse, throttle_time=ZERO, topics=tuple(topics))


def build_error(request: Any, code: ErrorCode) -> Any:
    m = resp_mod(API_KEY, version_of(request))
    return mk(m.OffsetForLeaderEpochResponse, throttle_time=ZERO, topics=tuple(
        mk(m.OffsetForLeaderTopicResult, topic=t.topic, partitions=tuple(_end(m, int(p.partition), code)
                                                                         for p in t.partitions))
        for t in request.topics))


def register(node: Needs) -> None:
    node.registry.register(API_KEY, 2, 4, handle, error_response=build_error,
                           advertise_if=node.topology.epochs_exact)
