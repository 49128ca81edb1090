"""RemoveRaftVoter (81) v0: take a node out of the cluster, as ``kafka-metadata-quorum
remove-controller --controller-id N --controller-directory-id D`` takes a controller out of
Kafka's quorum. Here every node is a voter of every Raft group, so the node leaves them all:
the metadata log records the removal, each group's leader takes the node out (a group the node
leads is handed over first) and the node stops once it leads none (``cluster/nodes.py``).

ALTER on the cluster is needed, as in Kafka. A cluster id that is not this cluster's is
INCONSISTENT_CLUSTER_ID; no directory id (the all-zero one) INVALID_REQUEST, as Kafka answers; a
directory id other than the node's voting replica's, or a node the cluster does not have,
VOTER_NOT_FOUND. ``kcoord cluster remove-node`` reads the directory id from DescribeQuorum first.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, resp_mod, version_of
from cluster.dispatch import RequestContext
from cluster.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from cluster.services import Identity, Placement, Registers

API_KEY = 81
NO_DIRECTORY = uuid.UUID(int=0)


class Needs(Registers, Placement, Identity, Protocol):
    """What this module uses of its node (``cluster.services``)."""


def _response(version: int, code: ErrorCode, message: str | None = None) -> Any:
    m = resp_mod(API_KEY, version)
    return mk(m.RemoveRaftVoterResponse, throttle_time=ZERO, error_code=code, error_message=message)


def error_code(name: str) -> ErrorCode:
    """The Kafka error a topology answer names."""
    try:
        return ErrorCode[name]
    except KeyError:
        return ErrorCode.unknown_server_error


def refusal(ctx: RequestContext, request: Any, whose: str) -> tuple[ErrorCode, str | None] | None:
    """What AddRaftVoter and RemoveRaftVoter both refuse, as Kafka does: no ALTER on the cluster,
    another cluster's id, no directory id (``whose``: the replicas DescribeQuorum lists it for)."""
    node: Needs = ctx.node
    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.cluster_authorization_failed, None
    if request.cluster_id is not None and request.cluster_id != node.cluster_id:
        return (ErrorCode.inconsistent_cluster_id,
                f"the request is for cluster {request.cluster_id}; this is cluster {node.cluster_id}")
    directory = request.voter_directory_id
    if directory is None or directory == NO_DIRECTORY:
        return (ErrorCode.invalid_request,
                f"the request names no voter directory id (kafka-metadata-quorum describe --replication lists {whose})")
    return None


async def handle(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    v = ctx.api_version
    refused = refusal(ctx, request, "each voter's")
    if refused is not None:
        return _response(v, *refused)
    name, message = await node.topology.remove_node(int(request.voter_id), request.voter_directory_id.hex)
    code = error_code(name)
    return _response(v, code, None if code is ErrorCode.none else message)


def register(node: Needs) -> None:
    node.registry.register(API_KEY, 0, 0,
                           handle, error_response=lambda req, code: _response(version_of(req), code))
