"""FindCoordinator (10) v0–6, including batched keys (v4+).

GROUP keys → ``partition_for(key, n)`` → ``node.topology.offsets_leader(p)``;
TRANSACTION keys → ``partition_for(key, m)`` → ``node.topology.txn_leader(p)``;
SHARE keys (type 2) before v6 → INVALID_REQUEST; any other type → INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, resp_mod, version_of
from cluster.dispatch import RequestContext
from cluster.security.authorizer import Operation, ResourceType
from cluster.services import Identity, Placement, Registers
from coordinator.partitioner import partition_for


class Needs(Registers, Placement, Identity, Protocol):
    """What this module uses of its node (``cluster.services``)."""


API_KEY = 10
GROUP, TRANSACTION, SHARE = 0, 1, 2


def _lookup(node: Needs, key: str, key_type: int, version: int) -> tuple[ErrorCode, str | None, Any]:
    if key_type == GROUP:
        partition = partition_for(key, node.offsets_partitions)
        leader = node.topology.offsets_leader(partition)
        if leader is None:
            # Still unknown after the wait (see handle): this node may be cut off from the
            # others. Name the node that most likely took over (the leader's successor stands
            # first in an election): librdkafka asks only the brokers it is connected to, and
            # "not available" from here kept it asking the one node that cannot know. The guess
            # must be the same on every ask: a different node each time had librdkafka switch
            # coordinators a thousand times a second and never commit.
            likely = node.topology.likely_offsets_leader(partition)  # None on a single node
            if likely is None:
                return ErrorCode.coordinator_not_available, "The coordinator is not available.", None
            return ErrorCode.none, None, likely
        return ErrorCode.none, None, leader
    if key_type == TRANSACTION:
        leader = node.topology.txn_leader(partition_for(key, node.txn_partitions))
        if leader is None:
            return ErrorCode.coordinator_not_available, "The transaction coordinator is not available.", None
        return ErrorCode.none, None, leader
    if key_type == SHARE and version >= 6:
        return ErrorCode.coordinator_not_available, "Share groups are not supported by this cluster (kcoord).", None
    return ErrorCode.invalid_request, f"Invalid coordinator key type {key_type} for version {version}.", None


def _refused(ctx: RequestContext | None, key: str, key_type: int) -> ErrorCode | None:
    """DESCRIBE on the group or transactional id the key names (30 / 53 without it)."""
    if ctx is None:
        return None
    if key_type == GROUP and not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.group_authorization_failed
    if key_type == TRANSACTION and not ctx.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.transactional_id_authorization_failed
    return None


def build(node: Needs, request: Any, *, error: ErrorCode | None = None, listener: str = "",
          ctx: RequestContext | None = None) -> Any:
    v = version_of(request)
    m = resp_mod(API_KEY, v)
    key_type = int(getattr(request, "key_type", GROUP))

    def lookup(key: str) -> tuple[ErrorCode | None, str | None, Any]:
        if error is not None:
            return error, None, None
        refused = _refused(ctx, key, key_type)
        return (refused, None, None) if refused is not None else _lookup(node, key, key_type, v)

    if v >= 4:
        coords = []
        for key in request.coordinator_keys:
            code, msg, b = lookup(key)
            b = node.through(b, listener) if listener and b is not None else b
            coords.append(mk(m.Coordinator, key=key, node_id=b.node_id if b else -1, host=b.host if b else "",
                             port=b.port if b else -1, error_code=code, error_message=msg))
        return mk(m.FindCoordinatorResponse, throttle_time=ZERO, coordinators=tuple(coords))
    code, msg, b = lookup(request.key)
    if code in (None, ErrorCode.none) and msg is None and v >= 1:
        msg = "NONE"  # Kafka's v1-3 answer carries its error's message, NONE's too
    b = node.through(b, listener) if listener and b is not None else b
    return mk(m.FindCoordinatorResponse, throttle_time=ZERO, error_code=code, error_message=msg,
              node_id=b.node_id if b else -1, host=b.host if b else "", port=b.port if b else -1)


# While a group's partition has no reachable leader (an election is running), hold the answer a
# little instead of replying COORDINATOR_NOT_AVAILABLE at once: clients only re-ask after their
# own back-off (librdkafka: up to a second), which would add that much to every failover. A node
# cut off from the majority does not wait: no election it could see is coming, and its answer
# (another node) sends the client where the group is being served.
ELECTION_WAIT_S = 1.5


def _keys(request: Any) -> list[str]:
    return list(request.coordinator_keys) if version_of(request) >= 4 else [request.key]


async def handle(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    key_type = int(getattr(request, "key_type", GROUP))
    # woken by the topology's leadership events, not by a poll of its own
    if key_type == GROUP:
        await node.topology.wait_offsets_leaders({partition_for(k, node.offsets_partitions) for k in _keys(request)},
                                                 ELECTION_WAIT_S)
    elif key_type == TRANSACTION:
        await node.topology.wait_txn_leaders({partition_for(k, node.txn_partitions) for k in _keys(request)},
                                             ELECTION_WAIT_S)
    return build(node, request, listener=ctx.listener, ctx=ctx)


def register(node: Needs) -> None:
    node.registry.register(API_KEY, 0, 6, handle, error_response=lambda req, code: build(node, req, error=code))
