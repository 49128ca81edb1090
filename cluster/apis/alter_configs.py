"""IncrementalAlterConfigs (44) v0–1 and AlterConfigs (33) v0–2: a topic's config overrides,
changed through the cluster's metadata log and applied live on every node (retention, cleanup
policy, segment size, ``max.message.bytes``).

Kafka's rules (``ConfigAdminManager``, ``ConfigurationControlManager``): a resource named twice in
one request, a key named twice in one resource, or a value missing where the operation needs one
is INVALID_REQUEST; an unknown key, a bad value, or APPEND/SUBTRACT on a key that is not a list is
INVALID_CONFIG, and nothing of that resource is applied; ``validate_only`` answers as if applied
and changes nothing. AlterConfigs replaces the topic's whole override set. A GROUP resource's
configs (``cluster/group_configs.py``) change the same way, through the metadata log, and its
coordinator reads them at the group's next heartbeat; so do a BROKER resource's (the node's own,
or "" for the cluster's), whose log defaults every node applies live (``cluster/broker_configs.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster import broker_configs, group_configs
from cluster.apis.common import ZERO, mk, resp_mod, version_of
from cluster.apis.configs import BROKER, GROUP, TOPIC
from cluster.dispatch import RequestContext
from cluster.group_configs import node_limits
from cluster.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from cluster.services import Catalog, Identity, Placement, Registers
from cluster.topic_configs import SET, ConfigError, Op, altered
from replication.api import ReplicationError


class Needs(Registers, Placement, Identity, Catalog, Protocol):
    """What this module uses of its node (``cluster.services``)."""


log = logging.getLogger(__name__)
ALTER_KEY = 33
INCREMENTAL_KEY = 44
Result = tuple[ErrorCode, str | None]
OK: Result = (ErrorCode.none, None)


async def _alter(node: Needs, ctx: RequestContext | None, res: Any, ops: list[Op], replace: bool,
                 validate_only: bool) -> Result:
    def allowed(rtype: ResourceType, name: str) -> bool:
        return ctx is None or ctx.allowed(Operation.ALTER_CONFIGS, rtype, name)

    if res.resource_type == TOPIC:
        if not allowed(ResourceType.TOPIC, res.resource_name):
            return ErrorCode.topic_authorization_failed, None
        if node.is_internal_topic(res.resource_name):
            return ErrorCode.invalid_request, f"kcoord manages the configs of {res.resource_name} itself"
        topic = node.topic(res.resource_name)
        if topic is None:
            return ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition."
        t = topic
        return await _checked_then_committed(
            lambda: altered(t.configs, ops, replace=replace, message_max_bytes=node.config.message_max_bytes),
            lambda: node.topology.alter_topic_configs(t, ops, replace), validate_only)
    if res.resource_type == BROKER:
        if not allowed(ResourceType.CLUSTER, CLUSTER_NAME):
            return ErrorCode.cluster_authorization_failed, None
        if res.resource_name not in ("", str(node.node_id)):
            return (ErrorCode.invalid_request, f"Unexpected broker id, expected {node.node_id} but received "
                    f"{res.resource_name}")
        broker = res.resource_name
        return await _checked_then_committed(
            lambda: broker_configs.altered(node.metadata.broker_configs.get(broker, {}), ops, replace=replace),
            lambda: node.topology.alter_broker_configs(broker, ops, replace), validate_only)
    if res.resource_type == GROUP:
        if not allowed(ResourceType.GROUP, res.resource_name):
            return ErrorCode.group_authorization_failed, None
        group = res.resource_name
        if group == "":
            return ErrorCode.invalid_request, "Default group resources are not allowed."
        return await _checked_then_committed(
            lambda: group_configs.altered(node.metadata.group_configs.get(group, {}), ops, node_limits(node.config),
                                          replace=replace),
            lambda: node.topology.alter_group_configs(group, ops, replace), validate_only)
    return ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type}"


async def _checked_then_committed(check: Callable[[], object], commit: Callable[[], Awaitable[list[str | None]]],
                                  validate_only: bool) -> Result:
    """The early answer (``check``), then the change through the metadata log, where it is
    checked again as it is folded (the committed configs may have moved since)."""
    try:
        check()
    except ConfigError as e:
        return ErrorCode[e.code], str(e)
    if validate_only:
        return OK
    try:
        code, message = await commit()
    except (ReplicationError, TimeoutError) as e:
        return ErrorCode.not_controller, f"metadata not available: {e}"
    return OK if code == "none" else (ErrorCode[str(code)], message)


def _response(api_key: int, request: Any, results: list[tuple[Any, Result]]) -> Any:
    m = resp_mod(api_key, version_of(request))
    name = "IncrementalAlterConfigsResponse" if api_key == INCREMENTAL_KEY else "AlterConfigsResponse"
    return mk(getattr(m, name), throttle_time=ZERO, responses=tuple(
        mk(m.AlterConfigsResourceResponse, error_code=code, error_message=message,
           resource_type=res.resource_type, resource_name=res.resource_name) for res, (code, message) in results))


def error_response(api_key: int, request: Any, code: ErrorCode) -> Any:
    return _response(api_key, request, [(res, (code, None)) for res in request.resources])


async def build(node: Needs, request: Any, api_key: int, ctx: RequestContext | None = None) -> Any:
    counts: dict[tuple[int, str], int] = {}
    for res in request.resources:
        counts[(res.resource_type, res.resource_name)] = counts.get((res.resource_type, res.resource_name), 0) + 1
    results: list[tuple[Any, Result]] = []
    for res in request.resources:
        if counts[(res.resource_type, res.resource_name)] > 1:
            results.append((res, (ErrorCode.invalid_request, f"Duplicate resource: {res.resource_name}")))
            continue
        if api_key == INCREMENTAL_KEY:
            ops: list[Op] = [(c.name, int(c.config_operation), c.value) for c in res.configs]
        else:
            ops = [(c.name, SET, c.value) for c in res.configs]
        code, message = await _alter(node, ctx, res, ops, api_key == ALTER_KEY, request.validate_only)
        if code is ErrorCode.none and not request.validate_only and res.resource_type in (TOPIC, GROUP):
            kind = "topic" if res.resource_type == TOPIC else "group"
            log.info("event=%s_configs_altered %s=%s ops=%s", kind, kind, res.resource_name, ops)
        results.append((res, (code, message)))
    return _response(api_key, request, results)


async def handle_alter(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    return await build(node, request, ALTER_KEY, ctx)


async def handle_incremental(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    return await build(node, request, INCREMENTAL_KEY, ctx)


def register(node: Needs) -> None:
    node.registry.register(ALTER_KEY, 0, 2, handle_alter,
                           error_response=lambda req, code: error_response(ALTER_KEY, req, code))
    node.registry.register(INCREMENTAL_KEY, 0, 1, handle_incremental,
                           error_response=lambda req, code: error_response(INCREMENTAL_KEY, req, code))
