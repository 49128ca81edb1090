"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), v0: the cluster's SCRAM users,
as ``kafka-configs.sh --entity-type users`` and the Admin clients manage them.

Describe needs DESCRIBE on the cluster, alter ALTER on it (31). An alteration is one change of the
cluster's metadata, applied by every node; each node answers and authenticates from its own copy, a
moment behind the node that took the request, as Kafka's brokers are. Salts and keys never leave.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, resp_mod
from cluster.dispatch import RequestContext
from cluster.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from cluster.security.credentials import DUPLICATE_RESOURCE, RESOURCE_NOT_FOUND, Upsertion, plan
from cluster.services import Guarded, Placement, Registers
from replication.api import ReplicationError


class Needs(Registers, Placement, Guarded, Protocol):
    """What this module uses of its node (``cluster.services``)."""


DESCRIBE_KEY = 50
ALTER_KEY = 51
DENIED = "Cluster authorization failed."


def build_describe(request: Any, code: ErrorCode, message: str | None = None) -> Any:
    m = resp_mod(DESCRIBE_KEY, 0)
    return mk(m.DescribeUserScramCredentialsResponse, throttle_time=ZERO, error_code=code, error_message=message,
              results=tuple(mk(m.DescribeUserScramCredentialsResult, user="", error_code=code, error_message=message,
                               credential_infos=()) for _ in request.users or ()))


async def describe(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return build_describe(request, ErrorCode.cluster_authorization_failed, DENIED)
    m = resp_mod(DESCRIBE_KEY, 0)
    held = node.scram_users.held()
    names = [u.name for u in request.users or ()] or sorted(held)
    counts = Counter(names)
    results = []
    for name in counts:
        if counts[name] > 1:
            results.append(mk(m.DescribeUserScramCredentialsResult, user=name, error_code=ErrorCode(DUPLICATE_RESOURCE),
                              error_message=f"Cannot describe SCRAM credentials for the same user twice in a "
                                            f"single request: {name}", credential_infos=()))
        elif name not in held:
            results.append(mk(m.DescribeUserScramCredentialsResult, user=name, error_code=ErrorCode(RESOURCE_NOT_FOUND),
                              error_message=f"Attempt to describe a user credential that does not exist: {name}",
                              credential_infos=()))
        else:
            results.append(mk(m.DescribeUserScramCredentialsResult, user=name, error_code=ErrorCode.none,
                              error_message=None, credential_infos=tuple(
                                  mk(m.CredentialInfo, mechanism=code, iterations=iterations)
                                  for code, iterations in sorted(held[name].items()))))
    return mk(m.DescribeUserScramCredentialsResponse, throttle_time=ZERO, error_code=ErrorCode.none,
              error_message=None, results=tuple(results))


def _named(request: Any) -> list[str]:
    return sorted({d.name for d in request.deletions} | {u.name for u in request.upsertions})


def build_alter(request: Any, code: ErrorCode, message: str | None = None) -> Any:
    m = resp_mod(ALTER_KEY, 0)
    return mk(m.AlterUserScramCredentialsResponse, throttle_time=ZERO, results=tuple(
        mk(m.AlterUserScramCredentialsResult, user=name, error_code=code, error_message=message)
        for name in _named(request)))


async def alter(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return build_alter(request, ErrorCode.cluster_authorization_failed, DENIED)
    results, change = plan(((d.name, int(d.mechanism)) for d in request.deletions),
                           (Upsertion(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt),
                                      bytes(u.salted_password)) for u in request.upsertions),
                           node.scram_users.held())
    if change:
        try:
            await node.topology.alter_scram(change)
        except (ReplicationError, TimeoutError) as e:
            return build_alter(request, ErrorCode.not_controller, f"metadata not available: {e}")
    m = resp_mod(ALTER_KEY, 0)
    return mk(m.AlterUserScramCredentialsResponse, throttle_time=ZERO, results=tuple(
        mk(m.AlterUserScramCredentialsResult, user=name, error_code=ErrorCode(code), error_message=message)
        for name, (code, message) in sorted(results.items())))


def register(node: Needs) -> None:
    node.registry.register(DESCRIBE_KEY, 0, 0, describe, error_response=build_describe)
    node.registry.register(ALTER_KEY, 0, 0, alter, error_response=build_alter)
