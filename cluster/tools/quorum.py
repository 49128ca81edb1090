"""The cluster metadata quorum as ``kafka-metadata-quorum describe --replication`` shows it: its
leader, epoch and high watermark, and each replica (the voters, then the observers: a node's new
data directory catching up as a learner) with its directory id, log end offset and lag.

One DescribeQuorum request (v2) on a PLAINTEXT listener of any node, which forwards it to the
metadata leader; Apache Kafka's brokers answer it too (for their controllers' quorum).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kio.static.primitive import i32

from cluster.apis.add_raft_voter import API_KEY as ADD_API_KEY
from cluster.apis.common import req_mod
from cluster.apis.describe_quorum import API_KEY, NO_DIRECTORY, TOPIC
from cluster.apis.remove_raft_voter import API_KEY as REMOVE_API_KEY
from cluster.peer_client import PeerClient, PeerRequestError

VERSION = 2


@dataclass(frozen=True, slots=True)
class Replica:
    node_id: int
    directory: str  # "" when the server names none
    log_end: int
    lag: int  # behind the leader's log end offset
    status: str  # Leader, Follower or Observer
    caught_up_ms_ago: int | None  # None: never, or not known


@dataclass(frozen=True, slots=True)
class Quorum:
    leader_id: int
    epoch: int
    high_watermark: int
    replicas: list[Replica]


def _replicas(part: Any, now_ms: int) -> list[Replica]:
    voters, observers = list(part.current_voters), list(part.observers)
    leader_end = next((int(r.log_end_offset) for r in voters if int(r.replica_id) == int(part.leader_id)), 0)

    def row(r: Any, status: str) -> Replica:
        caught = int(r.last_caught_up_timestamp)
        directory = r.replica_directory_id
        return Replica(int(r.replica_id), "" if directory in (None, NO_DIRECTORY) else str(directory),
                       int(r.log_end_offset), max(0, leader_end - int(r.log_end_offset)), status,
                       None if caught < 0 else max(0, now_ms - caught))

    return ([row(r, "Leader" if int(r.replica_id) == int(part.leader_id) else "Follower") for r in voters]
            + [row(r, "Observer") for r in observers])


def _ask(host: str, port: int, api_key: int, version: int, body: Any, timeout_s: float) -> Any:
    """One request's response, or why there was none."""

    async def ask() -> Any:
        client = PeerClient("kcoord-tools", timeout_s)
        try:
            return await asyncio.wait_for(client.request(host, port, api_key, version, body), timeout_s)
        finally:
            client.close()

    try:
        return asyncio.run(ask())
    except (PeerRequestError, TimeoutError, OSError, ValueError) as e:
        return f"no answer from {host}:{port}: {e}"


def describe(host: str, port: int, timeout_s: float) -> Quorum | str:
    """The quorum, or why it could not be described."""
    m = req_mod(API_KEY, VERSION)
    body = m.DescribeQuorumRequest(topics=(m.TopicData(topic_name=TOPIC, partitions=(
        m.PartitionData(partition_index=0),)),))

    resp = _ask(host, port, API_KEY, VERSION, body, timeout_s)
    if isinstance(resp, str):
        return resp
    if int(resp.error_code) != 0:
        return f"DescribeQuorum answered {resp.error_code.name}"
    part = resp.topics[0].partitions[0] if resp.topics and resp.topics[0].partitions else None
    if part is None:
        return "DescribeQuorum answered no partition"
    if int(part.error_code) != 0:
        return f"DescribeQuorum answered {part.error_code.name} for the metadata partition"
    return Quorum(int(part.leader_id), int(part.leader_epoch), int(part.high_watermark),
                  _replicas(part, int(time.time() * 1000)))


def add_node(host: str, port: int, node_id: int, timeout_s: float) -> str | None:
    """AddRaftVoter for observer ``node_id``, naming the directory DescribeQuorum gives for it (as
    ``kafka-metadata-quorum add-controller`` reads it from the controller's meta.properties): None
    once the metadata group counts its vote, else why not."""
    q = describe(host, port, timeout_s)
    if isinstance(q, str):
        return q
    if any(r.node_id == node_id and r.status != "Observer" for r in q.replicas):
        return f"node {node_id} is a voter already"
    directory = next((r.directory for r in q.replicas if r.node_id == node_id), None)
    if not directory:
        return f"node {node_id} is not an observer of the cluster (kcoord status lists them)"
    m = req_mod(ADD_API_KEY, 1)
    body = m.AddRaftVoterRequest(cluster_id=None, timeout=timedelta(seconds=max(timeout_s - 1.0, 1.0)),
                                 voter_id=i32(node_id), voter_directory_id=uuid.UUID(directory), listeners=())
    return _answered(_ask(host, port, ADD_API_KEY, 1, body, timeout_s))


def _answered(resp: Any) -> str | None:
    if isinstance(resp, str):
        return resp
    if int(resp.error_code) != 0:
        return f"{resp.error_code.name}: {resp.error_message or ''}".rstrip(": ")
    return None


def remove_node(host: str, port: int, node_id: int, timeout_s: float) -> str | None:
    """RemoveRaftVoter for ``node_id``, naming the directory DescribeQuorum gives as its voter's
    (as ``kafka-metadata-quorum remove-controller`` is given it): None once the cluster recorded
    the removal, else why not."""
    q = describe(host, port, timeout_s)
    if isinstance(q, str):
        return q
    directory = next((r.directory for r in q.replicas if r.node_id == node_id and r.status != "Observer"), None)
    if not directory:
        return f"node {node_id} is not a voter of the cluster (kcoord status lists them)"
    m = req_mod(REMOVE_API_KEY, 0)
    body = m.RemoveRaftVoterRequest(cluster_id=None, voter_id=i32(node_id), voter_directory_id=uuid.UUID(directory))

    return _answered(_ask(host, port, REMOVE_API_KEY, 0, body, timeout_s))
