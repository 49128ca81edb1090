"""DescribeProducers (61) v0: the producers a partition leader knows, with the first offset of each
one's open transaction (what ``kafka-transactions.sh describe-producers`` and ``find-hanging``
read)."""

from __future__ import annotations

from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, resp_mod, version_of
from cluster.dispatch import RequestContext
from cluster.security.authorizer import Operation, ResourceType
from cluster.services import Placement, Registers


class Needs(Registers, Placement, Protocol):
    """What this module uses of its node (``cluster.services``)."""


API_KEY = 61


def _partition(m: Any, index: int, code: ErrorCode, producers: tuple[Any, ...] = (), message: str | None = None) -> Any:
    return mk(m.PartitionResponse, partition_index=index, error_code=code, error_message=message,
              active_producers=producers)


async def handle(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    m = resp_mod(API_KEY, ctx.api_version)
    topics = []
    for t in request.topics:
        parts = []
        readable = ctx.allowed(Operation.READ, ResourceType.TOPIC, t.name)
        for index in t.partition_indexes:
            part = node.topology.partition(t.name, int(index))
            if not readable:
                parts.append(_partition(m, index, ErrorCode.topic_authorization_failed))
            elif part is None:
                parts.append(_partition(m, index, ErrorCode.unknown_topic_or_partition))
            elif not part.is_leader:
                parts.append(_partition(m, index, ErrorCode.not_leader_or_follower))
            else:
                parts.append(_partition(m, index, ErrorCode.none, tuple(
                    mk(m.ProducerState, producer_id=pid, producer_epoch=epoch, last_sequence=seq, last_timestamp=ts,
                       coordinator_epoch=coordinator_epoch, current_txn_start_offset=start)
                    for pid, epoch, seq, ts, coordinator_epoch, start in part.data.active_producers())))
        topics.append(mk(m.TopicResponse, name=t.name, partitions=tuple(parts)))
    return mk(m.DescribeProducersResponse, throttle_time=ZERO, topics=tuple(topics))


def build_error(request: Any, code: ErrorCode) -> Any:
    m = resp_mod(API_KEY, version_of(request))
    return mk(m.DescribeProducersResponse, throttle_time=ZERO, topics=tuple(
        mk(m.TopicResponse, name=t.name, partitions=tuple(_partition(m, i, code) for i in t.partition_indexes))
        for t in request.topics))


def register(node: Needs) -> None:
    node.registry.register(API_KEY, 0, 0, handle, error_response=build_error)
