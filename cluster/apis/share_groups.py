"""Wire handlers of share groups (KIP-932): ShareGroupHeartbeat (76) v1 and ShareGroupDescribe
(77) v1, kio message <-> coordinator command, routed to the group's ``__consumer_offsets``
partition like the other group APIs.

Served only with ``group.share.enable``: otherwise both answer UNSUPPORTED_VERSION, as Kafka's do
while its ``share.version`` feature is 0. The share-state initializations a heartbeat asks for are
carried out by the coordinator driver (``cluster.coordinator_driver``).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as KErr

from cluster.apis.common import ZERO, mk, resp_mod, version_of
from cluster.apis.consumer_groups import NO_OPERATIONS, ConsumerGroupApi, error_response, heartbeat_gate
from cluster.apis.groups import kerr
from cluster.dispatch import RequestContext
from cluster.security.authorizer import Operation, ResourceType
from cluster.services import Catalog, Guarded, Registers
from coordinator import commands as c
from coordinator.errors import ErrorCode
from coordinator.share_group.heartbeat import ShareHeartbeat


class Needs(Registers, Catalog, Guarded, Protocol):
    """What this module uses of its node (``cluster.services``)."""


log = logging.getLogger("kcoord.share_groups")

SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS = 76, 77, 90
RANGES = {SHARE_GROUP_HEARTBEAT: (1, 1), SHARE_GROUP_DESCRIBE: (1, 1), DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1)}
ZERO_UUID = uuid.UUID(int=0)


class ShareGroupApi:
    def __init__(self, consumer: ConsumerGroupApi, enabled: bool) -> None:
        self.consumer = consumer  # its group routing and its view of the topics
        self.groups = consumer.groups
        self.node = consumer.node
        self.enabled = enabled

    async def heartbeat(self, ctx: RequestContext, req: Any) -> Any:
        mod = resp_mod(SHARE_GROUP_HEARTBEAT, version_of(req))
        if not self.enabled:
            return _error_response(SHARE_GROUP_HEARTBEAT)(req, KErr.unsupported_version)
        names = req.subscribed_topic_names
        beat = ShareHeartbeat(group_id=req.group_id, member_id=req.member_id, member_epoch=int(req.member_epoch),
                              rack_id=req.rack_id, subscribed_topic_names=None if names is None else tuple(names))
        resp = await self.groups.call(req.group_id, c.ShareGroupHeartbeatRequest(
            beat, self.consumer.visible_topics(ctx), ctx.client_id or "", ctx.client_host))
        if resp.error not in (ErrorCode.NONE, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            log.info("event=share_heartbeat_error group=%s member=%s epoch=%d error=%s message=%r",
                     req.group_id, req.member_id, beat.member_epoch, resp.error.name, resp.message)
        assignment = None
        if resp.assignment is not None:
            assignment = mk(mod.Assignment, topic_partitions=tuple(
                mk(mod.TopicPartitions, topic_id=uuid.UUID(hex=t), partitions=tuple(sorted(ps)))
                for t, ps in sorted(resp.assignment.items())))
        return mk(mod.ShareGroupHeartbeatResponse, throttle_time=ZERO, error_code=kerr(resp.error),
                  error_message=resp.message, member_id=resp.member_id,
                  member_epoch=resp.member_epoch if resp.error is ErrorCode.NONE else 0,
                  heartbeat_interval=datetime.timedelta(milliseconds=resp.heartbeat_interval_ms),
                  assignment=assignment)

    async def describe(self, ctx: RequestContext, req: Any) -> Any:
        mod = resp_mod(SHARE_GROUP_DESCRIBE, version_of(req))
        if not self.enabled:
            return _error_response(SHARE_GROUP_DESCRIBE)(req, KErr.unsupported_version)
        image = self.node.metadata.topic_image()

        async def one(group_id: str) -> c.ShareGroupDescribeResponse:
            if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group_id):
                return c.ShareGroupDescribeResponse(ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id)
            answer: c.ShareGroupDescribeResponse = await self.groups.call(
                group_id, c.ShareGroupDescribeRequest(group_id, image))
            return answer

        def ops(a: c.ShareGroupDescribeResponse) -> int:
            if not req.include_authorized_operations or a.error is not ErrorCode.NONE:
                return NO_OPERATIONS
            return self.node.access.operations(ctx.principal, ctx.ip, ResourceType.GROUP, a.group_id)

        answers = await asyncio.gather(*(one(g) for g in req.group_ids))
        return mk(mod.ShareGroupDescribeResponse, throttle_time=ZERO, groups=tuple(
            mk(mod.DescribedGroup, error_code=kerr(a.error), error_message=a.message, group_id=a.group_id,
               group_state=a.state, group_epoch=a.group_epoch, assignment_epoch=a.assignment_epoch,
               assignor_name=a.assignor, authorized_operations=ops(a), members=tuple(
                   mk(mod.Member, member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                      client_id=m.client_id, client_host=m.client_host,
                      subscribed_topic_names=m.subscribed_topic_names,
                      assignment=mk(mod.Assignment, topic_partitions=tuple(
                          mk(mod.TopicPartitions, topic_id=uuid.UUID(hex=p.topic_id), topic_name=p.topic_name,
                             partitions=p.partitions) for p in m.assignment)))
                   for m in a.members))
            for a in answers))


    async def describe_offsets(self, ctx: RequestContext, req: Any) -> Any:
        """DescribeShareGroupOffsets (90): each partition's start offset, leader epoch and (v1)
        lag, the partition's end less the start less what is done past it (-1 where unknown)."""
        mod = resp_mod(DESCRIBE_SHARE_GROUP_OFFSETS, version_of(req))
        meta = self.node.metadata

        async def one(g: Any) -> Any:
            if not self.enabled:
                return mk(mod.DescribeShareGroupOffsetsResponseGroup, group_id=g.group_id, topics=(),
                          error_code=KErr.unsupported_version)
            if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, g.group_id):
                return mk(mod.DescribeShareGroupOffsetsResponseGroup, group_id=g.group_id, topics=(),
                          error_code=KErr.group_authorization_failed)
            unknown: list[Any] = []
            asked: list[tuple[str, tuple[int, ...]]] | None = None
            if g.topics is not None:
                asked = []
                for t in g.topics:
                    known = meta.topics.get(t.topic_name)
                    if known is None or known.internal:
                        unknown.append(mk(mod.DescribeShareGroupOffsetsResponseTopic, topic_name=t.topic_name,
                                          topic_id=ZERO_UUID, partitions=tuple(mk(
                                              mod.DescribeShareGroupOffsetsResponsePartition, partition_index=p,
                                              start_offset=-1, leader_epoch=0, lag=-1, error_code=KErr.none)
                                              for p in t.partitions)))
                    else:
                        asked.append((known.topic_id.hex, tuple(int(p) for p in t.partitions)))
                if not asked:
                    return mk(mod.DescribeShareGroupOffsetsResponseGroup, group_id=g.group_id, topics=tuple(unknown),
                              error_code=KErr.none)
            answer: c.ShareOffsetsResponse = await self.groups.call(
                g.group_id, c.ShareOffsetsRequest(g.group_id, None if asked is None else tuple(asked)))
            if answer.error is not ErrorCode.NONE:
                return mk(mod.DescribeShareGroupOffsetsResponseGroup, group_id=g.group_id, topics=(),
                          error_code=kerr(answer.error))
            by_topic: dict[str, list[c.ShareOffset]] = {}
            for o in answer.offsets:
                by_topic.setdefault(o.topic_id, []).append(o)
            topics = []
            for tid, offsets in by_topic.items():
                known = meta.by_id(uuid.UUID(hex=tid))
                if known is None:
                    continue
                denied = not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, known.name)
                topics.append(mk(mod.DescribeShareGroupOffsetsResponseTopic, topic_name=known.name,
                                 topic_id=uuid.UUID(hex=tid), partitions=tuple(
                                     self._offset(mod, known.name, o, denied) for o in offsets)))
            return mk(mod.DescribeShareGroupOffsetsResponseGroup, group_id=g.group_id,
                      topics=(*topics, *unknown), error_code=KErr.none)

        groups = await asyncio.gather(*(one(g) for g in req.groups))
        return mk(mod.DescribeShareGroupOffsetsResponse, throttle_time=ZERO, groups=tuple(groups))

    def _offset(self, mod: Any, topic: str, o: c.ShareOffset, denied: bool) -> Any:
        if denied:
            return mk(mod.DescribeShareGroupOffsetsResponsePartition, partition_index=o.partition, start_offset=-1,
                      leader_epoch=0, lag=-1, error_code=KErr.topic_authorization_failed)
        lag = -1
        part = self.node.topology.partition(topic, o.partition)
        if part is not None and o.start_offset >= 0 and o.delivery_complete_count >= 0:
            lag = max(part.data.high_watermark - o.start_offset - o.delivery_complete_count, 0)
        return mk(mod.DescribeShareGroupOffsetsResponsePartition, partition_index=o.partition,
                  start_offset=o.start_offset, leader_epoch=max(o.leader_epoch, 0) if o.start_offset >= 0 else 0,
                  lag=lag, error_code=KErr.none)


def _error_response(api_key: int) -> Any:
    if api_key == DESCRIBE_SHARE_GROUP_OFFSETS:
        def build(req: Any, error: Any) -> Any:
            mod = resp_mod(api_key, version_of(req))
            return mk(mod.DescribeShareGroupOffsetsResponse, throttle_time=ZERO, groups=tuple(
                mk(mod.DescribeShareGroupOffsetsResponseGroup, group_id=g.group_id, topics=(), error_code=error)
                for g in req.groups))
        return build
    return error_response(api_key, "ShareGroupHeartbeatResponse", "ShareGroupDescribeResponse", SHARE_GROUP_HEARTBEAT)


def register(node: Needs, consumer: ConsumerGroupApi, enabled: bool) -> ShareGroupApi:
    api = ShareGroupApi(consumer, enabled)
    for key, handler in ((SHARE_GROUP_HEARTBEAT, api.heartbeat), (SHARE_GROUP_DESCRIBE, api.describe),
                         (DESCRIBE_SHARE_GROUP_OFFSETS, api.describe_offsets)):
        lo, hi = RANGES[key]
        node.registry.register(key, lo, hi, handler, error_response=_error_response(key),
                               authorize=heartbeat_gate if key == SHARE_GROUP_HEARTBEAT else None)
    return api
