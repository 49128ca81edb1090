"""Metadata (3) v0–12: brokers, cluster id, controller, topics/partitions/leaders."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, resp_mod, version_of
from cluster.dispatch import RequestContext
from cluster.metadata import OFFSETS_TOPIC, validate_topic_name

API_KEY = 3
log = logging.getLogger("kcoord.api.metadata")
ZERO_UUID = uuid.UUID(int=0)


def _topic(m: Any, node: Any, name: str | None, error: ErrorCode, *, topic_id: uuid.UUID | None = None,
           partitions: int = 0, internal: bool = False, epoch: int = 0) -> Any:
    me = node.node_id
    parts = tuple(
        mk(m.MetadataResponsePartition, error_code=ErrorCode.none, partition_index=p, leader_id=me,
           leader_epoch=epoch, replica_nodes=(me,), isr_nodes=(me,), offline_replicas=())
        for p in range(partitions)
    )
    return mk(m.MetadataResponseTopic, error_code=error, name=name, topic_id=topic_id or ZERO_UUID,
              is_internal=internal, partitions=parts)


def _known(m: Any, node: Any, name: str) -> Any:
    if name == OFFSETS_TOPIC:
        return _topic(m, node, name, ErrorCode.none, partitions=node.offsets_partitions, internal=True, epoch=1)
    t = node.topic(name)
    return _topic(m, node, name, ErrorCode.none, topic_id=t.topic_id, partitions=t.partitions, epoch=1)


def build(node: Any, request: Any, *, error: ErrorCode | None = None) -> Any:
    v = version_of(request)
    m = resp_mod(API_KEY, v)
    brokers = tuple(mk(m.MetadataResponseBroker, node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                    for b in node.brokers())
    topics: list[Any] = []
    requested = request.topics
    if v == 0 and not requested:
        requested = None  # v0: an empty list means all topics
    auto_create = node.config.auto_create_topics and (v < 4 or bool(request.allow_auto_topic_creation))
    if requested is None:
        if error is None:
            topics = [_known(m, node, name) for name in sorted(node.metadata.topics)]
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
                else:
                    topics.append(_known(m, node, t.name))
                continue
            if name == OFFSETS_TOPIC or node.topic(name) is not None:
                topics.append(_known(m, node, name))
                continue
            bad = validate_topic_name(name)
            if bad is not None:
                topics.append(_topic(m, node, name, ErrorCode.invalid_topic_exception))
            elif auto_create and not node.is_internal_topic(name):
                node.create_topic(name, node.config.default_num_partitions)
                log.info("event=topic_auto_created topic=%s partitions=%d", name, node.config.default_num_partitions)
                topics.append(_known(m, node, name))
            else:
                topics.append(_topic(m, node, name, ErrorCode.unknown_topic_or_partition))
    return mk(m.MetadataResponse, throttle_time=ZERO, brokers=brokers, cluster_id=node.cluster_id,
              controller_id=node.controller_id(), topics=tuple(topics))


async def handle(ctx: RequestContext, request: Any) -> Any:
    return build(ctx.node, request)


def register(node: Any) -> None:
    node.registry.register(API_KEY, 0, 12, handle, error_response=lambda req, code: build(node, req, error=code))
