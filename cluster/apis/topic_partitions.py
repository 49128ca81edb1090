"""DescribeTopicPartitions (75) v0: topics and their partitions as Metadata describes them, in
pages: the Java Admin (4.x) describes topics with it, a page at a time.

Kafka's rules (``DescribeTopicPartitionsRequestHandler``): an empty topic list means every topic
the principal may DESCRIBE; topics come sorted by name, each asked-for topic it may not describe
with TOPIC_AUTHORIZATION_FAILED and each unknown one with UNKNOWN_TOPIC_OR_PARTITION; a page holds
at most ``ResponsePartitionLimit`` partitions (and at most the node's own bound, 2000), starting at
the request's cursor, and ``NextCursor`` names the first partition left out. A cursor on a topic
the request does not list is INVALID_REQUEST.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, resp_mod, version_of
from cluster.apis.metadata import NO_OPERATIONS, Access, partition_entry
from cluster.dispatch import RequestContext
from cluster.metadata import OFFSETS_TOPIC
from cluster.security.authorizer import ResourceType
from cluster.services import Catalog, Identity, Placement, Registers


class Needs(Registers, Placement, Identity, Catalog, Protocol):
    """What this module uses of its node (``cluster.services``)."""


API_KEY = 75
MAX_PARTITIONS = 2000  # Kafka's max.request.partition.size.limit
ZERO_UUID = uuid.UUID(int=0)


def _error_topic(m: Any, name: str, code: ErrorCode, ops: int = NO_OPERATIONS) -> Any:
    return mk(m.DescribeTopicPartitionsResponseTopic, error_code=code, name=name, topic_id=ZERO_UUID,
              is_internal=False, partitions=(), topic_authorized_operations=ops)


def error_response(request: Any, code: ErrorCode) -> Any:
    m = resp_mod(API_KEY, version_of(request))
    return mk(m.DescribeTopicPartitionsResponse, throttle_time=ZERO, next_cursor=None,
              topics=tuple(_error_topic(m, t.name, code) for t in request.topics))


def build(node: Needs, request: Any, ctx: RequestContext | None = None) -> Any:
    m = resp_mod(API_KEY, version_of(request))
    access = Access(ctx, request)
    asked = sorted({t.name for t in request.topics})
    cursor = request.cursor
    if cursor is not None and (asked and cursor.topic_name not in asked or cursor.partition_index < 0):
        return error_response(request, ErrorCode.invalid_request)
    names = asked or [n for n in sorted(node.metadata.topics) if access.describes(n)]
    live = frozenset(b.node_id for b in node.topology.brokers())
    room = max(1, min(int(request.response_partition_limit), MAX_PARTITIONS))  # a page moves the cursor on
    topics: list[Any] = []
    next_cursor = None
    for name in names:
        if cursor is not None and name < cursor.topic_name:
            continue
        if not access.describes(name):
            topics.append(_error_topic(m, name, ErrorCode.topic_authorization_failed))
            continue
        meta = node.topic(name)
        if meta is None and name != OFFSETS_TOPIC:
            # with what the principal could do to it (as Kafka answers: this API always says)
            topics.append(_error_topic(m, name, ErrorCode.unknown_topic_or_partition,
                                       access.ops(ResourceType.TOPIC, name, ctx is not None)))
            continue
        count = node.offsets_partitions if meta is None else meta.partitions
        first = min(cursor.partition_index, count) if cursor is not None and name == cursor.topic_name else 0
        if room == 0:
            next_cursor = mk(m.Cursor, topic_name=name, partition_index=first)
            break
        last = min(count, first + room)
        parts = tuple(partition_entry(m.DescribeTopicPartitionsResponsePartition, node, name, p, live)
                      for p in range(first, last))
        room -= last - first
        ops = access.ops(ResourceType.TOPIC, name, ctx is not None)
        topics.append(mk(m.DescribeTopicPartitionsResponseTopic, error_code=ErrorCode.none, name=name,
                         topic_id=ZERO_UUID if meta is None else meta.topic_id, is_internal=meta is None,
                         partitions=parts, topic_authorized_operations=ops))
        if last < count:
            next_cursor = mk(m.Cursor, topic_name=name, partition_index=last)
            break
    return mk(m.DescribeTopicPartitionsResponse, throttle_time=ZERO, topics=tuple(topics), next_cursor=next_cursor)


async def handle(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    return build(node, request, ctx)


def register(node: Needs) -> None:
    node.registry.register(API_KEY, 0, 0, handle, error_response=error_response)
