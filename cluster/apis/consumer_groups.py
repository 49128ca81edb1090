"""Wire handlers of the consumer group protocol (KIP-848): ConsumerGroupHeartbeat (68) v0-1 and
ConsumerGroupDescribe (69) v0-1, kio message <-> coordinator command, routed to the group's
``__consumer_offsets`` partition like the classic group APIs.

The coordinator names topics by id; each request carries the cluster's topics as they are now
(name -> id, partition count), so a topic created or grown later reaches the group on the next
heartbeat, as Kafka's metadata image does.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as KErr

from cluster.apis.common import ZERO, mk, resp_mod, to_ms, version_of
from cluster.apis.groups import GroupApi, kerr
from cluster.dispatch import RequestContext
from cluster.security.authorizer import Operation, ResourceType
from cluster.services import Catalog, Guarded, Registers
from coordinator import commands as c
from coordinator.consumer_group.heartbeat_request import ConsumerHeartbeat
from coordinator.errors import ErrorCode


class Needs(Registers, Catalog, Guarded, Protocol):
    """What this module uses of its node (``cluster.services``)."""


log = logging.getLogger("kcoord.consumer_groups")

CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
RANGES = {CONSUMER_GROUP_HEARTBEAT: (0, 1), CONSUMER_GROUP_DESCRIBE: (0, 1)}
NO_OPERATIONS = -2147483648  # authorized operations not asked for


def _owned(topic_partitions: Any) -> dict[str, frozenset[int]] | None:
    if topic_partitions is None:
        return None
    out: dict[str, frozenset[int]] = {}
    for tp in topic_partitions:
        if tp.topic_id is not None:
            out[tp.topic_id.hex] = out.get(tp.topic_id.hex, frozenset()) | frozenset(int(p) for p in tp.partitions)
    return out


class ConsumerGroupApi:
    def __init__(self, groups: GroupApi) -> None:
        self.groups = groups
        self.node = groups.node
        # (principal, address) -> the topic image and ACLs it was filtered from, and the result
        self._visible: dict[tuple[str, str], tuple[object, object, dict[str, tuple[str, int]]]] = {}

    async def heartbeat(self, ctx: RequestContext, req: Any) -> Any:
        v = version_of(req)
        mod = resp_mod(CONSUMER_GROUP_HEARTBEAT, v)
        names = req.subscribed_topic_names
        beat = ConsumerHeartbeat(
            group_id=req.group_id, member_id=req.member_id, member_epoch=int(req.member_epoch), api_version=v,
            instance_id=req.instance_id, rack_id=req.rack_id, rebalance_timeout_ms=to_ms(req.rebalance_timeout),
            subscribed_topic_names=None if names is None else tuple(names),
            subscribed_topic_regex=getattr(req, "subscribed_topic_regex", None),
            server_assignor=req.server_assignor, owned=_owned(req.topic_partitions))
        resp = await self.groups.call(req.group_id, c.ConsumerGroupHeartbeatRequest(
            beat, self.visible_topics(ctx), ctx.client_id or "", ctx.client_host))
        if resp.error not in (ErrorCode.NONE, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            log.info("event=consumer_heartbeat_error group=%s member=%s epoch=%d error=%s message=%r",
                     req.group_id, req.member_id, beat.member_epoch, resp.error.name, resp.message)
        assignment = None
        if resp.assignment is not None:
            assignment = mk(mod.Assignment, topic_partitions=tuple(
                mk(mod.TopicPartitions, topic_id=uuid.UUID(hex=t), partitions=tuple(sorted(ps)))
                for t, ps in sorted(resp.assignment.items())))
        return mk(mod.ConsumerGroupHeartbeatResponse, throttle_time=ZERO, error_code=kerr(resp.error),
                  error_message=resp.message, member_id=resp.member_id,
                  member_epoch=resp.member_epoch if resp.error is ErrorCode.NONE else 0,  # Kafka's errors: 0
                  heartbeat_interval=datetime.timedelta(milliseconds=resp.heartbeat_interval_ms),
                  assignment=assignment)

    def visible_topics(self, ctx: RequestContext) -> dict[str, tuple[str, int]]:
        """The topics a heartbeat resolves subscriptions against: with ACLs on, only those the
        member's principal may DESCRIBE, so a regex never reaches a hidden topic (Kafka drops those
        silently). A group's members share one principal in practice; members of one group under
        principals that see different topics would each see the group's subscriptions their way."""
        image = self.node.metadata.topic_image()
        access = self.node.access
        if not access.enabled:
            return image
        key = (ctx.principal, ctx.ip)
        cached = self._visible.get(key)
        acls = access.authorizer()
        if cached is not None and cached[0] is image and cached[1] is acls:
            return cached[2]
        visible = {n: v for n, v in image.items() if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, n)}
        if len(self._visible) > 10_000:
            self._visible.clear()
        self._visible[key] = (image, acls, visible)
        return visible

    async def describe(self, ctx: RequestContext, req: Any) -> Any:
        mod = resp_mod(CONSUMER_GROUP_DESCRIBE, version_of(req))
        image = self.node.metadata.topic_image()

        async def one(group_id: str) -> c.ConsumerGroupDescribeResponse:
            if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group_id):
                return c.ConsumerGroupDescribeResponse(ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id)
            if not group_id:
                return c.ConsumerGroupDescribeResponse(ErrorCode.INVALID_GROUP_ID, "")
            answer: c.ConsumerGroupDescribeResponse = await self.groups.call(
                group_id, c.ConsumerGroupDescribeRequest(group_id, image))
            if answer.error is ErrorCode.NONE and self.node.access.enabled and any(  # Kafka 4: the topics too
                    not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, p.topic_name)
                    for m in answer.members for p in (*m.assignment, *m.target_assignment)):
                return c.ConsumerGroupDescribeResponse(
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED, group_id,
                    "The group has described topic(s) that the client is not authorized to describe.")
            return answer

        def assignment(parts: tuple[c.DescribedTopicPartitions, ...]) -> Any:
            return mk(mod.Assignment, topic_partitions=tuple(
                mk(mod.TopicPartitions, topic_id=uuid.UUID(hex=p.topic_id), topic_name=p.topic_name,
                   partitions=p.partitions) for p in parts))

        def ops(a: c.ConsumerGroupDescribeResponse) -> int:
            if not req.include_authorized_operations or a.error is not ErrorCode.NONE:
                return NO_OPERATIONS
            return self.node.access.operations(ctx.principal, ctx.ip, ResourceType.GROUP, a.group_id)

        answers = await asyncio.gather(*(one(g) for g in req.group_ids))
        return mk(mod.ConsumerGroupDescribeResponse, throttle_time=ZERO, groups=tuple(
            mk(mod.DescribedGroup, error_code=kerr(a.error), error_message=a.message, group_id=a.group_id,
               group_state=a.state, group_epoch=a.group_epoch, assignment_epoch=a.assignment_epoch,
               assignor_name=a.assignor, authorized_operations=ops(a), members=tuple(
                   mk(mod.Member, member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                      member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                      subscribed_topic_names=m.subscribed_topic_names,
                      subscribed_topic_regex=m.subscribed_topic_regex or "", assignment=assignment(m.assignment),
                      target_assignment=assignment(m.target_assignment), member_type=0 if m.classic else 1)
                   for m in a.members))
            for a in answers))


def error_response(api_key: int, heartbeat: str, describe: str, heartbeat_key: int) -> Any:
    """The whole-request error answer of a group heartbeat (``heartbeat``: its response class
    name, at ``heartbeat_key``) or describe API (``describe``), for the consumer and share APIs."""
    def build(req: Any, error: Any) -> Any:
        mod = resp_mod(api_key, version_of(req))
        if api_key == heartbeat_key:
            return mk(getattr(mod, heartbeat), throttle_time=ZERO, error_code=error, member_epoch=0,
                      heartbeat_interval=ZERO)
        return mk(getattr(mod, describe), throttle_time=ZERO, groups=tuple(
            mk(mod.DescribedGroup, error_code=error, group_id=g, group_state="", group_epoch=-1,
               assignment_epoch=-1, assignor_name="", members=(), authorized_operations=NO_OPERATIONS)
            for g in req.group_ids))

    return build


def heartbeat_gate(ctx: RequestContext, req: Any) -> KErr | None:
    """READ on the group, then (Kafka 4.0+, KAFKA-18813; share groups too) DESCRIBE on every topic
    it names."""
    if not ctx.allowed(Operation.READ, ResourceType.GROUP, req.group_id):
        return KErr.group_authorization_failed
    if any(not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t) for t in req.subscribed_topic_names or ()):
        return KErr.topic_authorization_failed
    return None


def register(node: Needs, groups: GroupApi) -> ConsumerGroupApi:
    api = ConsumerGroupApi(groups)
    for key, handler in ((CONSUMER_GROUP_HEARTBEAT, api.heartbeat), (CONSUMER_GROUP_DESCRIBE, api.describe)):
        lo, hi = RANGES[key]
        node.registry.register(key, lo, hi, handler,
                               error_response=error_response(key, "ConsumerGroupHeartbeatResponse",
                                                             "ConsumerGroupDescribeResponse", CONSUMER_GROUP_HEARTBEAT),
                               authorize=heartbeat_gate if key == CONSUMER_GROUP_HEARTBEAT else None)
    return api
