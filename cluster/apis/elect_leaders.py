"""ElectLeaders (43) v0–2: hand a data partition's leadership back to its preferred node
(``kafka-leader-election --election-type preferred``), as the balancing rounds do by themselves.

Kafka's rules (``ReplicationControlManager.electLeaders``): ALTER on the cluster, else
CLUSTER_AUTHORIZATION_FAILED; per partition UNKNOWN_TOPIC_OR_PARTITION, ELECTION_NOT_NEEDED when
the preferred node leads already, PREFERRED_LEADER_NOT_AVAILABLE when it cannot take over; null
partitions means every partition, answered only for those that needed an election. Only a
partition's leader can hand it over, so a node that does not lead a partition asks its leader
(once: a forwarded request is not forwarded again). An unclean election (type 1) is never needed
under Raft: a partition with a leader answers ELECTION_NOT_NEEDED, one without answers
ELIGIBLE_LEADERS_NOT_AVAILABLE (a leader comes from a majority, or not at all).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, req_mod, resp_mod, to_ms, version_of
from cluster.config import Peer
from cluster.dispatch import RequestContext
from cluster.peer_client import PeerClient, PeerRequestError
from cluster.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from cluster.security.tls import peer_context
from cluster.services import Catalog, Identity, Placement, Registers


class Needs(Registers, Placement, Identity, Catalog, Protocol):
    """What this module uses of its node (``cluster.services``)."""


log = logging.getLogger(__name__)
API_KEY = 43
PREFERRED, UNCLEAN = 0, 1
CONCURRENT = 16  # partitions handed over at once
FORWARDED = "kcoord-elect-leaders"  # the client id of a request one node forwards to a leader
Result = tuple[ErrorCode, str | None]


def _response(request: Any, code: ErrorCode, results: dict[str, list[tuple[int, Result]]]) -> Any:
    m = resp_mod(API_KEY, version_of(request))
    return mk(m.ElectLeadersResponse, throttle_time=ZERO, error_code=code, replica_election_results=tuple(
        mk(m.ReplicaElectionResult, topic=topic, partition_result=tuple(
            mk(m.PartitionResult, partition_id=p, error_code=c, error_message=msg) for p, (c, msg) in parts))
        for topic, parts in results.items()))


def _asked(request: Any) -> list[tuple[str, int]] | None:
    if request.topic_partitions is None:
        return None
    return [(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions]


def error_response(request: Any, code: ErrorCode) -> Any:
    results: dict[str, list[tuple[int, Result]]] = {t.topic: [] for t in request.topic_partitions or ()}
    for topic, p in _asked(request) or ():
        results.setdefault(topic, []).append((p, (code, None)))
    return _response(request, code, results)


async def _forward(node: Needs, leader: Peer, topic: str, partition: int, timeout_ms: int) -> Result:
    m = req_mod(API_KEY, 2)
    body = m.ElectLeadersRequest(election_type=PREFERRED, timeout=datetime.timedelta(milliseconds=timeout_ms),
                                 topic_partitions=(m.TopicPartitions(topic=topic, partitions=(partition,)),))
    client = PeerClient(FORWARDED, timeout_ms / 1000 + 5, ssl_context=peer_context(node.config))
    try:
        resp = await client.request(leader.host, leader.kafka_port, API_KEY, 2, body)
    except PeerRequestError as e:
        return ErrorCode.preferred_leader_not_available, f"the leader (node {leader.node_id}) did not answer: {e}"
    finally:
        client.close()
    for r in resp.replica_election_results:
        for pr in r.partition_result:
            return ErrorCode(pr.error_code), pr.error_message
    return ErrorCode(resp.error_code), None


async def _elect(node: Needs, ctx: RequestContext, topic: str, partition: int, unclean: bool,
                 timeout_ms: int) -> Result:
    t = node.topic(topic)
    if t is None or not 0 <= partition < t.partitions:
        return ErrorCode.unknown_topic_or_partition, "The partition does not exist."
    if unclean:
        leader, _ = node.topology.partition_leader(topic, partition)
        if leader >= 0:
            return ErrorCode.election_not_needed, None
        return ErrorCode.eligible_leaders_not_available, "No leader: a Raft leader comes from a majority of replicas"
    code, leader_peer = await node.topology.elect_preferred(topic, partition, timeout_ms / 1000)
    if code == "forward" and leader_peer is not None:
        if ctx.client_id == FORWARDED:  # leadership moved on while the request travelled
            return ErrorCode.preferred_leader_not_available, "leadership moved; try again"
        return await _forward(node, leader_peer, topic, partition, timeout_ms)
    if code == "none":
        log.info("event=preferred_leader_elected topic=%s partition=%d", topic, partition)
    return ErrorCode[code], None


async def handle(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    if not ctx.allowed(Operation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return error_response(request, ErrorCode.cluster_authorization_failed)
    unclean = int(getattr(request, "election_type", PREFERRED)) == UNCLEAN
    timeout_ms = max(1, to_ms(request.timeout))
    asked = _asked(request)
    wanted = asked if asked is not None else [(name, p) for name, t in sorted(node.metadata.topics.items())
                                              for p in range(t.partitions)]
    gate = asyncio.Semaphore(CONCURRENT)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000  # the request's timeout bounds the whole of it

    async def one(topic: str, p: int) -> Result:
        async with gate:
            left_ms = int((deadline - loop.time()) * 1000)
            if left_ms <= 0:
                return ErrorCode.request_timed_out, "the request's timeout passed before this partition's turn"
            try:
                return await _elect(node, ctx, topic, p, unclean, left_ms)
            except Exception as e:  # noqa: BLE001 - one partition's failure is its own answer
                log.warning("event=elect_leaders_failed topic=%s partition=%d error=%r", topic, p, str(e))
                return ErrorCode.unknown_server_error, str(e)

    keys = list(dict.fromkeys(wanted))
    done = await asyncio.gather(*(one(topic, p) for topic, p in keys))
    # A topic asked for with no partitions is answered too, with none (as Kafka does).
    results: dict[str, list[tuple[int, Result]]] = {t.topic: [] for t in request.topic_partitions or ()}
    for (topic, p), result in zip(keys, done, strict=True):
        if asked is None and result[0] is ErrorCode.election_not_needed:
            continue  # every partition: only those that needed an election are answered
        results.setdefault(topic, []).append((p, result))
    return _response(request, ErrorCode.none, results)


def register(node: Needs) -> None:
    node.registry.register(API_KEY, 0, 2, handle, error_response=error_response)
