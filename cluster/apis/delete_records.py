"""DeleteRecords (21) v0–2: move partitions' log start offsets forward (``kafka-delete-records``,
the Java Admin's ``deleteRecords``, Kafka Streams purging its repartition topics).

Each partition is answered by its leader, which replicates the new start through the partition's
Raft log, so every replica starts there (``DataPartition.delete_records``); the Admin client
sends each partition to its leader. Offset -1 means the high watermark. As Kafka: DELETE on the
topic is needed (TOPIC_AUTHORIZATION_FAILED), an offset past the high watermark is
OFFSET_OUT_OF_RANGE, a compacted topic POLICY_VIOLATION, a partition this node does not lead
NOT_LEADER_OR_FOLLOWER, and the answer's low watermark is the partition's log start offset after
the deletion (-1 with an error).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, resp_mod, to_ms, version_of
from cluster.dispatch import RequestContext
from cluster.security.authorizer import Operation, ResourceType
from cluster.services import Placement, Registers

API_KEY = 21


class Needs(Registers, Placement, Protocol):
    """What this module uses of its node (``cluster.services``)."""


def _result(m: Any, index: int, code: ErrorCode, low: int = -1) -> Any:
    return mk(m.DeleteRecordsPartitionResult, partition_index=index, low_watermark=low, error_code=code)


async def _one(node: Needs, m: Any, topic: str, p: Any, allowed: bool, timeout_s: float) -> Any:
    index = int(p.partition_index)
    if not allowed:
        return _result(m, index, ErrorCode.topic_authorization_failed)
    part = node.topology.partition(topic, index)
    if part is None:
        return _result(m, index, ErrorCode.unknown_topic_or_partition)
    code, low, _message = await part.delete_records(int(p.offset), timeout_s)
    return _result(m, index, ErrorCode(int(code)), low)


async def handle(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    m = resp_mod(API_KEY, ctx.api_version)
    timeout_s = min(max(to_ms(request.timeout), 1), 300_000) / 1000
    allowed = [ctx.allowed(Operation.DELETE, ResourceType.TOPIC, t.name) for t in request.topics]
    # every partition at once: the request's timeout bounds the whole request
    answers = iter(await asyncio.gather(*(_one(node, m, t.name, p, ok, timeout_s)
                                           for t, ok in zip(request.topics, allowed, strict=True)
                                           for p in t.partitions)))
    topics = [mk(m.DeleteRecordsTopicResult, name=t.name, partitions=tuple(next(answers) for _ in t.partitions))
              for t in request.topics]
    return mk(m.DeleteRecordsResponse, throttle_time=ZERO, topics=tuple(topics))


def build_error(request: Any, code: ErrorCode) -> Any:
    m = resp_mod(API_KEY, version_of(request))
    return mk(m.DeleteRecordsResponse, throttle_time=ZERO, topics=tuple(
        mk(m.DeleteRecordsTopicResult, name=t.name, partitions=tuple(
            _result(m, int(p.partition_index), code) for p in t.partitions))
        for t in request.topics))


def register(node: Needs) -> None:
    node.registry.register(API_KEY, 0, 2, handle, error_response=build_error)
