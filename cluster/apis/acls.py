"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), v1-3 (Kafka 4 dropped v0, KIP-896): the ACLs in the cluster's metadata,
as ``kafka-acls.sh`` and the Admin clients manage them.

Describe needs DESCRIBE on the cluster, create and delete ALTER on it (31 otherwise). Without an
authorizer all three answer SECURITY_DISABLED (54), as Kafka does: no ACL is ever stored that
nothing enforces. A create or delete is one metadata change, so every node applies all of it or
none; creating an ACL that exists is a success that changes nothing. A delete's filters are matched
where the change is applied, against the committed ACLs, and its answer lists what that removed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, resp_mod, version_of
from cluster.dispatch import RequestContext
from cluster.metadata import AclRow
from cluster.security.access import binding, row
from cluster.security.authorizer import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from cluster.services import Guarded, Placement, Registers
from replication.api import ReplicationError


class Needs(Registers, Placement, Guarded, Protocol):
    """What this module uses of its node (``cluster.services``)."""


DESCRIBE_KEY = 29
CREATE_KEY = 30
DELETE_KEY = 31
DISABLED = "No Authorizer is configured."
DENIED = "Cluster authorization failed."


class BadFilter(ValueError):
    """A filter with a code this version cannot carry (answered INVALID_REQUEST)."""


def _enum(cls: Any, value: int, what: str) -> Any:
    try:
        out = cls(int(value))
    except ValueError:
        raise BadFilter(f"Unknown {what} {value}") from None
    if out.name == "UNKNOWN":
        raise BadFilter(f"{what} UNKNOWN is not valid")
    return out


def acl_filter(f: Any, version: int) -> AclFilter:
    """A DescribeAcls request or DeleteAcls filter as the authorizer matches it."""
    pattern = _enum(PatternType, f.pattern_type_filter, "pattern type")
    rtype = _enum(ResourceType, f.resource_type_filter, "resource type")
    if rtype == ResourceType.USER and version < 3:
        raise BadFilter(f"Version {version} does not support resource type USER")
    return AclFilter(rtype, f.resource_name_filter, pattern, f.principal_filter, f.host_filter,
                     _enum(Operation, f.operation, "operation"), _enum(Permission, f.permission_type, "permission"))


# -- DescribeAcls ---------------------------------------------------------------------------------

def build_describe(request: Any, code: ErrorCode, message: str | None = None,
                   acls: Sequence[AclBinding] = ()) -> Any:
    m = resp_mod(DESCRIBE_KEY, version_of(request))
    grouped: dict[tuple[int, str, int], list[AclBinding]] = {}
    for a in acls:
        grouped.setdefault((a.resource_type, a.name, a.pattern), []).append(a)
    return mk(m.DescribeAclsResponse, throttle_time=ZERO, error_code=code, error_message=message, resources=tuple(
        mk(m.DescribeAclsResource, resource_type=t, resource_name=name, pattern_type=p, acls=tuple(
            mk(m.AclDescription, principal=a.principal, host=a.host, operation=int(a.operation),
               permission_type=int(a.permission)) for a in bucket))
        for (t, name, p), bucket in grouped.items()))


async def describe(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    if not node.access.enabled:
        return build_describe(request, ErrorCode.security_disabled, DISABLED)
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return build_describe(request, ErrorCode.cluster_authorization_failed, DENIED)
    try:
        flt = acl_filter(request, version_of(request))
    except BadFilter as e:
        return build_describe(request, ErrorCode.invalid_request, str(e))
    return build_describe(request, ErrorCode.none, None, node.access.authorizer().acls(flt))


# -- CreateAcls -----------------------------------------------------------------------------------

def _created(m: Any, code: ErrorCode, message: str | None = None) -> Any:
    return mk(m.AclCreationResult, error_code=code, error_message=message)


def build_create(request: Any, code: ErrorCode, message: str | None = None) -> Any:
    m = resp_mod(CREATE_KEY, version_of(request))
    return mk(m.CreateAclsResponse, throttle_time=ZERO, results=tuple(_created(m, code, message)
                                                                      for _ in request.creations))


def _new_acl(c: Any, version: int) -> AclBinding:
    try:
        acl = AclBinding(ResourceType(int(c.resource_type)), c.resource_name, PatternType(int(c.resource_pattern_type)),
                         c.principal,
                         c.host, Operation(int(c.operation)), Permission(int(c.permission_type)))
    except ValueError as e:
        raise InvalidAcl(str(e)) from None
    if acl.resource_type == ResourceType.USER and version < 3:
        raise InvalidAcl(f"Version {version} does not support resource type USER")
    return acl.validate()


async def create(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    m = resp_mod(CREATE_KEY, version_of(request))
    if not node.access.enabled:
        return build_create(request, ErrorCode.security_disabled, DISABLED)
    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return build_create(request, ErrorCode.cluster_authorization_failed, DENIED)
    results: list[Any] = []
    wanted = []
    for c in request.creations:
        try:
            wanted.append(row(_new_acl(c, version_of(request))))
            results.append(None)
        except InvalidAcl as e:
            results.append(_created(m, ErrorCode.invalid_request, str(e)))
    if wanted:
        try:
            await node.topology.create_acls(wanted)
        except (ReplicationError, TimeoutError) as e:
            return build_create(request, ErrorCode.not_controller, f"metadata not available: {e}")
    return mk(m.CreateAclsResponse, throttle_time=ZERO, results=tuple(
        r if r is not None else _created(m, ErrorCode.none) for r in results))


# -- DeleteAcls -----------------------------------------------------------------------------------

def build_delete(request: Any, code: ErrorCode, message: str | None = None) -> Any:
    m = resp_mod(DELETE_KEY, version_of(request))
    return mk(m.DeleteAclsResponse, throttle_time=ZERO, filter_results=tuple(
        mk(m.DeleteAclsFilterResult, error_code=code, error_message=message, matching_acls=())
        for _ in request.filters))


async def delete(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    v = version_of(request)
    m = resp_mod(DELETE_KEY, v)
    if not node.access.enabled:
        return build_delete(request, ErrorCode.security_disabled, DISABLED)
    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return build_delete(request, ErrorCode.cluster_authorization_failed, DENIED)
    filters: list[AclFilter | BadFilter] = []
    for f in request.filters:
        try:
            filters.append(acl_filter(f, v))
        except BadFilter as e:
            filters.append(e)
    valid = [f for f in filters if isinstance(f, AclFilter)]
    matched: list[list[AclRow]] = []
    if valid:
        # Matched where the change is applied, on the committed ACLs: this node's copy may not
        # hold yet an ACL just created through another node. The answer lists what was removed.
        try:
            matched = await node.topology.delete_acls(valid)
        except (ReplicationError, TimeoutError) as e:
            return build_delete(request, ErrorCode.not_controller, f"metadata not available: {e}")
    found = iter(matched)
    return mk(m.DeleteAclsResponse, throttle_time=ZERO, filter_results=tuple(
        mk(m.DeleteAclsFilterResult, error_code=ErrorCode.invalid_request, error_message=str(f), matching_acls=())
        if isinstance(f, BadFilter) else
        mk(m.DeleteAclsFilterResult, error_code=ErrorCode.none, error_message=None, matching_acls=tuple(
            _removed(m, binding(r)) for r in next(found)))
        for f in filters))


def _removed(m: Any, a: AclBinding) -> Any:
    return mk(m.DeleteAclsMatchingAcl, error_code=ErrorCode.none, error_message=None, resource_type=int(a.resource_type),
              resource_name=a.name, pattern_type=int(a.pattern), principal=a.principal, host=a.host,
              operation=int(a.operation), permission_type=int(a.permission))


def register(node: Needs) -> None:
    node.registry.register(DESCRIBE_KEY, 1, 3, describe, error_response=build_describe)
    node.registry.register(CREATE_KEY, 1, 3, create, error_response=build_create)
    node.registry.register(DELETE_KEY, 1, 3, delete, error_response=build_delete)
