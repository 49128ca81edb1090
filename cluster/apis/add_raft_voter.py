"""AddRaftVoter (80) v0-1: promote an observer to a voting node of the cluster, as ``kafka-metadata-quorum
add-controller`` adds a controller to Kafka's quorum. A node started with
``controller.quorum.auto.join.enable=false`` joins as an observer: it follows every Raft group as
a learner and votes in none until this request; then the metadata log records the promotion and
each group's leader promotes it once it has caught up there (``cluster/nodes.py``). A node that
joins with auto-join (kcoord's default) is promoted without it.

ALTER on the cluster is needed, as in Kafka. A cluster id that is not this cluster's is
INCONSISTENT_CLUSTER_ID; no directory id (the all-zero one) INVALID_REQUEST; a node that votes
already DUPLICATE_VOTER; a node that is no observer of the cluster, or another directory than its
replica's, REQUEST_TIMED_OUT (Kafka's answer for a replica it has not heard from). The answer comes
once the metadata group counts the new vote (v1's ``ack_when_committed`` false: once recorded), or
REQUEST_TIMED_OUT after the request's timeout (the promotion is recorded and completes later).
The request's listeners are not used: the node gave its addresses when it joined.
"""

from __future__ import annotations

from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, resp_mod, version_of
from cluster.apis.remove_raft_voter import error_code, refusal
from cluster.dispatch import RequestContext
from cluster.services import Identity, Placement, Registers

API_KEY = 80
MAX_WAIT_S = 60.0  # the most a request waits, whatever its timeout says


class Needs(Registers, Placement, Identity, Protocol):
    """What this module uses of its node (``cluster.services``)."""


def _response(version: int, code: ErrorCode, message: str | None = None) -> Any:
    m = resp_mod(API_KEY, version)
    return mk(m.AddRaftVoterResponse, throttle_time=ZERO, error_code=code, error_message=message)


async def handle(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    v = ctx.api_version
    refused = refusal(ctx, request, "each observer's")
    if refused is not None:
        return _response(v, *refused)
    asked = min(max(request.timeout.total_seconds(), 0.0), MAX_WAIT_S)
    wait = asked if getattr(request, "ack_when_committed", True) else 0.0
    name, message = await node.topology.promote_node(int(request.voter_id), request.voter_directory_id.hex, wait)
    code = error_code(name)
    return _response(v, code, None if code is ErrorCode.none else message)


def register(node: Needs) -> None:
    node.registry.register(API_KEY, 0, 1,
                           handle, error_response=lambda req, code: _response(version_of(req), code))
