"""CreateTopics (19) v2–7 and DeleteTopics (20) v1–6.

kio 0.6.5 has no schemas for CreateTopics v0–1 / DeleteTopics v0, and Kafka 4 removed
those versions too (KIP-896), so they are not advertised.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, resp_mod, version_of
from cluster.apis.configs import Entry, dynamic_of, topic_entries
from cluster.dispatch import RequestContext
from cluster.metadata import (
    PartitionLimitError,
    partition_limit_message,
    validate_topic_config,
    validate_topic_name,
)
from cluster.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from cluster.services import Catalog, Identity, Placement, Registers, TopicAdmin
from replication.api import ReplicationError


class LimitNeeds(Identity, Catalog, TopicAdmin, Protocol):
    """What ``partition_limit_error`` uses (CreatePartitions asks it too)."""


class Needs(Registers, Placement, Identity, Catalog, TopicAdmin, Protocol):
    """What this module uses of its node (``cluster.services``)."""


CREATE_KEY = 19
DELETE_KEY = 20
ZERO_UUID = uuid.UUID(int=0)


def _create_result(m: Any, name: str, error: ErrorCode, message: str | None = None, *,
                   topic_id: uuid.UUID = ZERO_UUID, partitions: int = -1, rf: int = -1,
                   configs: list[Entry] | None = None, configs_error: ErrorCode = ErrorCode.none) -> Any:
    """v5+ lists every config of the new topic with its value and source, as DescribeConfigs
    would (Kafka's answer), not only those the request set."""
    cfgs = tuple(
        mk(m.CreatableTopicConfigs, name=n, value=v, read_only=False, config_source=source, is_sensitive=sensitive)
        for n, v, source, _type, sensitive, _synonyms in configs or ()
    ) if hasattr(m, "CreatableTopicConfigs") else ()
    return mk(m.CreatableTopicResult, name=name, topic_id=topic_id, error_code=error, error_message=message,
              topic_config_error_code=configs_error, num_partitions=partitions, replication_factor=rf, configs=cfgs)


def _validate_create(node: Needs, t: Any) -> tuple[ErrorCode, str | None, int]:
    name = t.name
    bad = validate_topic_name(name)
    if bad is not None:
        return ErrorCode.invalid_topic_exception, bad, -1
    if node.topic(name) is not None or node.is_internal_topic(name):
        return ErrorCode.topic_already_exists, f"Topic '{name}' already exists.", -1
    # Kafka's controller validates every new topic's configs before it creates any of them (and
    # only then finds a wrong partition count, replication factor or assignment).
    for c in t.configs:
        err = validate_topic_config(c.name, c.value, message_max_bytes=node.config.message_max_bytes)
        if err is not None:
            return ErrorCode.invalid_config, err, -1
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            return (ErrorCode.invalid_request, "Both numPartitions or replicationFactor and replicasAssignments "
                    "were set. Both cannot be used at the same time.", -1)
        idx = sorted(a.partition_index for a in t.assignments)
        if idx != list(range(len(idx))):
            return ErrorCode.invalid_replica_assignment, "Partitions should be a consecutive 0-based integer sequence", -1
        for a in t.assignments:
            if not a.broker_ids or set(a.broker_ids) - set(node.topology.replica_ids()):
                return (ErrorCode.invalid_replica_assignment,
                        f"Replica assignment {list(a.broker_ids)} for partition {a.partition_index} is invalid: "
                        f"the brokers are {node.topology.replica_ids()}", -1)
        partitions = len(idx)
    else:
        partitions = node.config.default_num_partitions if t.num_partitions == -1 else t.num_partitions
        if t.num_partitions == 0 or t.num_partitions < -1:
            return ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value.", -1
        if t.replication_factor == 0 or t.replication_factor < -1:
            return (ErrorCode.invalid_replication_factor,
                    "Replication factor must be larger than 0, or -1 to use the default value.", -1)
        brokers = len(node.topology.replica_ids())
        if t.replication_factor > brokers:
            return (ErrorCode.invalid_replication_factor,
                    f"Unable to replicate the partition {t.replication_factor} time(s): The target replication "
                    f"factor of {t.replication_factor} cannot be reached because only {brokers} broker(s) are "
                    "registered.", -1)
        if partitions > 100000:
            return ErrorCode.invalid_partitions, f"Number of partitions {partitions} is too large.", -1
    too_many = partition_limit_error(node, partitions)
    if too_many is not None:
        return ErrorCode.policy_violation, too_many, -1
    return ErrorCode.none, None, partitions


def partition_limit_error(node: LimitNeeds, adding: int, *, this_request: int = 0, unapplied: int = 0) -> str | None:
    """Every partition is a Raft group on every node: their number is bounded per request and
    for the whole cluster (``max_partitions_per_request``, ``max_partitions``, which the node's
    open-file limit may have lowered: ``cluster.fd_budget``). A message if ``adding`` more would
    pass a bound (``this_request``: already granted in this request, of which ``unapplied`` are
    not in the metadata: validate_only). This is the early answer: the cluster bound is checked
    again where a creation is applied (``PartitionLimitError``), as concurrent requests can each
    pass it here."""
    per_request = node.config.max_partitions_per_request
    if this_request + adding > per_request:
        return f"A request may create at most {per_request} partitions (max_partitions_per_request)"
    total = sum(t.partitions for t in node.metadata.topics.values()) + unapplied
    return node.fd_budget.refusal(total, adding) or partition_limit_message(total, adding, node.config.max_partitions)


def _allowed(ctx: RequestContext | None, op: Operation, rtype: ResourceType, name: str) -> bool:
    return ctx is None or ctx.allowed(op, rtype, name)


async def build_create(node: Needs, request: Any, *, error: ErrorCode | None = None,
                       ctx: RequestContext | None = None) -> Any:
    """The answer (``ctx``: the request's, whose principal needs CREATE on the cluster or on each
    topic, and DESCRIBE_CONFIGS on it to be told its configs; None for an error answer)."""
    m = resp_mod(CREATE_KEY, version_of(request))
    cluster_create = _allowed(ctx, Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
    counts: dict[str, int] = {}
    for t in request.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    results = []
    seen: set[str] = set()
    granted = 0  # partitions this request creates so far (the per-request bound)
    for t in request.topics:
        if error is not None:
            results.append(_create_result(m, t.name, error))
            continue
        if counts[t.name] > 1:
            if t.name not in seen:
                seen.add(t.name)
                results.append(_create_result(
                    m, t.name, ErrorCode.invalid_request,
                    f"Create topics request from client contains multiple topics named {t.name}"))
            continue
        if not cluster_create and not _allowed(ctx, Operation.CREATE, ResourceType.TOPIC, t.name):
            results.append(_create_result(m, t.name, ErrorCode.topic_authorization_failed, "Authorization failed."))
            continue
        code, msg, partitions = _validate_create(node, t)
        if code is ErrorCode.none and granted:
            # the topics created so far are in the metadata already; validate_only ones are not
            too_many = partition_limit_error(node, partitions, this_request=granted,
                                             unapplied=granted if request.validate_only else 0)
            if too_many is not None:
                code, msg = ErrorCode.policy_violation, too_many
        if code is not ErrorCode.none:
            results.append(_create_result(m, t.name, code, msg))
            continue
        granted += partitions
        requested = {c.name: c.value for c in t.configs}
        configs: list[Entry] | None = topic_entries(node.config, requested, dynamic_of(node))
        configs_error, shown, rf = ErrorCode.none, partitions, len(node.topology.replica_ids())
        if not _allowed(ctx, Operation.DESCRIBE_CONFIGS, ResourceType.TOPIC, t.name):  # created, not described
            configs, configs_error, shown, rf = None, ErrorCode.topic_authorization_failed, -1, -1
        if request.validate_only:  # the id the topic would have had, as Kafka answers
            results.append(_create_result(m, t.name, ErrorCode.none, topic_id=uuid.uuid4(), partitions=shown, rf=rf,
                                          configs=configs, configs_error=configs_error))
            continue
        try:
            meta = await node.create_topic_async(t.name, partitions, requested)
        except PartitionLimitError as e:  # concurrent creations passed the check above together
            results.append(_create_result(m, t.name, ErrorCode.policy_violation, str(e)))
            continue
        except (ReplicationError, TimeoutError) as e:
            # No metadata leader right now: retriable, as Kafka's NOT_CONTROLLER is for clients.
            results.append(_create_result(m, t.name, ErrorCode.not_controller, f"metadata not available: {e}"))
            continue
        results.append(_create_result(m, t.name, ErrorCode.none, topic_id=meta.topic_id, partitions=shown, rf=rf,
                                      configs=configs, configs_error=configs_error))
    return mk(m.CreateTopicsResponse, throttle_time=ZERO, topics=tuple(results))


async def handle_create(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    return await build_create(node, request, ctx=ctx)


async def build_delete(node: Needs, request: Any, *, error: ErrorCode | None = None,
                       ctx: RequestContext | None = None) -> Any:
    """The answer (``ctx``: the request's; its principal needs DELETE on the cluster, or DESCRIBE
    and DELETE on each topic, answered so that a refusal tells nothing of a topic it may not see)."""
    m = resp_mod(DELETE_KEY, version_of(request))
    cluster_delete = _allowed(ctx, Operation.DELETE, ResourceType.CLUSTER, CLUSTER_NAME)
    if hasattr(request, "topic_names"):
        targets: list[tuple[str | None, uuid.UUID | None]] = [(n, None) for n in request.topic_names]
    else:
        targets = [(t.name, t.topic_id if t.topic_id != ZERO_UUID else None) for t in request.topics]
    results = []
    for name, tid in targets:
        def res(code: ErrorCode, msg: str | None = None, *, n: str | None = name,
                i: uuid.UUID | None = tid) -> Any:
            return mk(m.DeletableTopicResult, name=n, topic_id=i or ZERO_UUID, error_code=code, error_message=msg)

        if error is not None:
            results.append(res(error))
            continue
        if name is None and tid is None:  # as Kafka's controller answers these two
            results.append(res(ErrorCode.invalid_request, "Neither topic name nor id were specified."))
            continue
        if name is not None and tid is not None:
            results.append(res(ErrorCode.invalid_request, "You may not specify both topic name and topic id."))
            continue
        if name is None:
            meta = node.metadata.by_id(tid) if tid is not None else None
            if meta is None:
                results.append(res(ErrorCode.unknown_topic_id, "This server does not host this topic ID."))
                continue
            if not cluster_delete and not _allowed(ctx, Operation.DELETE, ResourceType.TOPIC, meta.name):
                seen = _allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, meta.name)
                results.append(res(ErrorCode.topic_authorization_failed, n=meta.name if seen else None))
                continue
            name = meta.name
        elif not cluster_delete:
            if not _allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, name):
                results.append(res(ErrorCode.topic_authorization_failed))
                continue
            if node.topic(name) is not None and not _allowed(ctx, Operation.DELETE, ResourceType.TOPIC, name):
                results.append(res(ErrorCode.topic_authorization_failed))
                continue
        if node.is_internal_topic(name):
            results.append(res(ErrorCode.invalid_topic_exception, f"Topic {name} is internal and cannot be deleted",
                               n=name))
            continue
        try:
            meta = await node.delete_topic_async(name) if node.topic(name) is not None else None
        except (ReplicationError, TimeoutError) as e:
            results.append(res(ErrorCode.not_controller, f"metadata not available: {e}", n=name))
            continue
        if meta is None:
            results.append(res(ErrorCode.unknown_topic_or_partition,
                               "This server does not host this topic-partition.", n=name))
        else:
            results.append(res(ErrorCode.none, n=name, i=meta.topic_id))
    return mk(m.DeleteTopicsResponse, throttle_time=ZERO, responses=tuple(results))


async def handle_delete(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    return await build_delete(node, request, ctx=ctx)


def _run_sync(coro: Any) -> Any:
    """Drive a builder that will not await (the error path) to its result."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("error response builder tried to wait")


def register(node: Needs) -> None:
    node.registry.register(CREATE_KEY, 2, 7, handle_create,
                           error_response=lambda req, code: _run_sync(build_create(node, req, error=code)))
    node.registry.register(DELETE_KEY, 1, 6, handle_delete,
                           error_response=lambda req, code: _run_sync(build_delete(node, req, error=code)))
