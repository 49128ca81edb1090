"""CreatePartitions (37) v0–3: a topic grows to a new partition count through the cluster's
metadata log; every node opens the new partitions (each a Raft group of its own), and consumers
see them in Metadata and rebalance onto them.

Kafka's rules (``ReplicationControlManager.createPartitions``): a topic named twice is
INVALID_REQUEST; a count that is not an increase is INVALID_PARTITIONS; assignments that do not
name one replica list per new partition, or name a node that does not exist, are
INVALID_REPLICA_ASSIGNMENT; ``validate_only`` answers as if applied. kcoord replicates every
partition on every node, so an assignment only has to name existing nodes; the partition bounds
(``max_partitions``, ``max_partitions_per_request``) answer POLICY_VIOLATION, as for CreateTopics.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, resp_mod, version_of
from cluster.apis.topics import LimitNeeds, partition_limit_error
from cluster.dispatch import RequestContext
from cluster.security.authorizer import Operation, ResourceType
from cluster.services import Placement, Registers
from replication.api import ReplicationError


class Needs(Registers, Placement, LimitNeeds, Protocol):
    """What this module uses of its node (``cluster.services``)."""


log = logging.getLogger(__name__)
API_KEY = 37
Result = tuple[ErrorCode, str | None]


def _check(node: Needs, t: Any, granted: int, validate_only: bool) -> tuple[Result, int]:
    """The early answer for one topic, and how many partitions it adds."""
    if node.is_internal_topic(t.name):
        return (ErrorCode.invalid_request, f"kcoord fixes the partitions of {t.name} at the cluster's first start"), 0
    topic = node.topic(t.name)
    if topic is None:
        return (ErrorCode.unknown_topic_or_partition, None), 0  # no message, as Kafka
    have = topic.partitions
    if t.count == have:
        return (ErrorCode.invalid_partitions, f"Topic already has {have} partition(s)."), 0
    if t.count < have:
        return (ErrorCode.invalid_partitions,
                f"The topic {t.name} currently has {have} partition(s); {t.count} would not be an increase."), 0
    adding = t.count - have
    if t.assignments is not None:
        if len(t.assignments) != adding:
            return (ErrorCode.invalid_replica_assignment, f"Attempted to add {adding} additional partition(s), but "
                    f"only {len(t.assignments)} assignment(s) were specified."), 0
        nodes = set(node.topology.replica_ids())
        for a in t.assignments:
            ids = list(a.broker_ids)
            if not ids or len(set(ids)) != len(ids) or set(ids) - nodes:
                return (ErrorCode.invalid_replica_assignment,
                        f"Replica assignment {ids} is invalid: the brokers are {sorted(nodes)}"), 0
    too_many = partition_limit_error(node, adding, this_request=granted, unapplied=granted if validate_only else 0)
    if too_many is not None:
        return (ErrorCode.policy_violation, too_many), 0
    return (ErrorCode.none, None), adding


async def _grow(node: Needs, ctx: RequestContext | None, t: Any, validate_only: bool,
                granted: int) -> tuple[Result, int]:
    if ctx is not None and not ctx.allowed(Operation.ALTER, ResourceType.TOPIC, t.name):
        return (ErrorCode.topic_authorization_failed, "Authorization failed."), 0
    result, adding = _check(node, t, granted, validate_only)
    if result[0] is not ErrorCode.none or validate_only:
        return result, adding
    topic = node.topic(t.name)
    assert topic is not None  # _check found it
    try:
        code, message = await node.topology.create_partitions(topic, t.count)
    except (ReplicationError, TimeoutError) as e:
        return (ErrorCode.not_controller, f"metadata not available: {e}"), 0
    if code != "none":
        return (ErrorCode[str(code)], message), 0
    log.info("event=partitions_created topic=%s from=%d to=%d", t.name, topic.partitions, t.count)
    return (ErrorCode.none, None), adding


def _response(request: Any, results: list[tuple[str, Result]]) -> Any:
    m = resp_mod(API_KEY, version_of(request))
    return mk(m.CreatePartitionsResponse, throttle_time=ZERO, results=tuple(
        mk(m.CreatePartitionsTopicResult, name=name, error_code=code, error_message=message)
        for name, (code, message) in results))


def error_response(request: Any, code: ErrorCode) -> Any:
    return _response(request, [(t.name, (code, None)) for t in request.topics])


async def handle(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    return await build(node, request, ctx)


async def build(node: Needs, request: Any, ctx: RequestContext | None = None) -> Any:
    counts: dict[str, int] = {}
    for t in request.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    results: list[tuple[str, Result]] = []
    granted = 0  # partitions this request adds so far (the per-request bound)
    for t in request.topics:
        if counts[t.name] > 1:
            results.append((t.name, (ErrorCode.invalid_request, "Duplicate topic name.")))
            continue
        result, adding = await _grow(node, ctx, t, request.validate_only, granted)
        granted += adding
        results.append((t.name, result))
    return _response(request, results)


def register(node: Needs) -> None:
    node.registry.register(API_KEY, 0, 3, handle, error_response=error_response)
