"""A node started with only ``bootstrap`` (the Raft addresses of some running nodes) instead of
``peers``: before it starts, it asks them over the hub's join channel for the cluster's nodes and
the next node id, keeps the answer in its data directory (``bootstrap.json``), and starts as a
joining node whose ``peers`` are that answer and itself (``RaftCluster`` adds it from there, as
any joining node). Given a node id the cluster has (``node_id``: a node whose data directory was
lost), it starts as that node, at the addresses the cluster has for it. Restarted, it reads the
file: its id and the nodes it started with stay (the nodes added since are in ``nodes.json``, as
for every node).

The answer comes from any node that has read the cluster's metadata (``RaftCluster.nodes_asked``);
its next id is the metadata leader's to accept: two nodes bootstrapping at once may be told the
same one, and the second is refused when it asks to join (``join_refused``, which says so).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import select
import time
from typing import Any

from cluster.config import ConfigError, NodeConfig, Peer, parse_addresses
from cluster.data_dir import DataDirError, read_record
from cluster.security.tls import raft_tls
from replication.durable import write_durably
from replication.hub import RaftHub

log = logging.getLogger("kcoord.cluster")

JOIN_DOOR = "__join"  # the hub's channel on which nodes ask to join, to be told the nodes, or whether they were removed
FILE_NAME = "bootstrap.json"
FILE_FORMAT = 1
ASK_EVERY_S = 0.5
WAIT_LOGGED_EVERY_S = 10.0


class _Answers:
    """The hub endpoint of ``JOIN_DOOR`` while the node asks: the first well-formed answer."""

    def __init__(self) -> None:
        self.answer: dict[str, Any] | None = None
        self.sender = ""

    def on_connected(self, peer: str) -> None:
        pass

    def on_disconnected(self, peer: str) -> None:
        pass

    def on_message(self, peer: str, message: Any) -> None:
        if self.answer is None and isinstance(message, dict) and message.get("type") == "nodes":
            self.answer, self.sender = message, peer


def resolve(config: NodeConfig, timeout: float | None = None) -> NodeConfig:
    """``config`` as the node runs it: unchanged without ``bootstrap``; else with the node id and
    ``peers`` the cluster gave it (asked now, on the first start, and kept), ``join`` as the
    cluster said (a new node joins), and ``bootstrap`` cleared.
    A node asks until answered (``timeout`` None) or ConfigError after ``timeout`` seconds."""
    if not config.bootstrap:
        return config
    saved = _load(config.data_dir)
    if saved is not None:
        node_id, peers, joins = saved
        resolved = dataclasses.replace(config, node_id=node_id, peers=peers, join=joins, bootstrap="").validate()
        mine = resolved.cluster_peers[node_id]
        if f"{mine.host}:{mine.kafka_port}:{mine.raft_port}" != _me(config):
            raise ConfigError(f"this node is node {node_id} at {mine.host}:{mine.kafka_port}:{mine.raft_port} "
                              f"(host:kafka_port:raft_port, kept in {FILE_NAME}), not {_me(config)}: start it with "
                              "those, or as a new node on an empty data directory")
        return resolved
    node_id, peers, joins = _ask(config, timeout)
    resolved = dataclasses.replace(config, node_id=node_id, peers=peers, join=joins, bootstrap="").validate()  # before it is kept
    os.makedirs(config.data_dir, exist_ok=True)
    write_durably(os.path.join(config.data_dir, FILE_NAME), json.dumps(
        {"format": FILE_FORMAT, "node_id": node_id, "peers": peers, "join": joins}).encode(), 0o600)
    log.warning("event=bootstrapped node=%d peers=%s", node_id, peers)
    return resolved


def answer(next_id: int, known: dict[int, Peer], added: list[int]) -> dict[str, Any] | None:
    """What a running node tells one that asks: every node the cluster has had (ids are positions
    in ``peers``: removed nodes too), those that joined it since it formed, and the next node id;
    None if its view has a gap."""
    ids = sorted(known)
    if ids != list(range(len(ids))) or next_id != len(ids):
        return None
    return {"type": "nodes", "next_id": next_id, "added": sorted(added),
            "peers": [[known[i].host, known[i].kafka_port, known[i].raft_port] for i in ids]}


def _me(config: NodeConfig) -> str:
    """This node's entry in ``peers``: the host the others reach, the Kafka port clients are told."""
    main = config.listener_list()[0]
    return f"{config.host}:{config.advertised_for(main.name)[1]}:{config.raft_port}"


def _load(data_dir: str) -> tuple[int, str, bool] | None:
    path = os.path.join(data_dir, FILE_NAME)
    doc = read_record(path, "it holds this node's id and first peers: restore it, or start the node on an empty "
                            "data directory (it joins as a new node)", FILE_FORMAT)
    if doc is None:
        return None
    if not isinstance(doc.get("node_id"), int) or not isinstance(doc.get("peers"), str):
        raise DataDirError(f"{path} is not a bootstrap record")
    return int(doc["node_id"]), str(doc["peers"]), doc.get("join") is not False


def _ask(config: NodeConfig, timeout: float | None) -> tuple[int, str, bool]:
    """Ask the bootstrap nodes until one answers (logged every few seconds while none does): this
    node's id, its ``peers`` and whether it joins. A node id given (not 0) that the cluster has
    already is a node whose data directory was lost, started again under its id (it joined the
    cluster, or formed it, as before)."""
    targets = parse_addresses(config.bootstrap)
    endpoint = _Answers()
    hub = RaftHub(f"{config.host}:{config.raft_port}", config.cluster_secret, tls=raft_tls(config))
    hub.attach(JOIN_DOOR, endpoint, targets)
    for t in targets:
        hub.dial_first(t)
    started = next_ask = time.monotonic()
    logged = started
    try:
        while endpoint.answer is None:
            now = time.monotonic()
            if timeout is not None and now - started > timeout:
                raise ConfigError(f"bootstrap: no node of {config.bootstrap} answered in {timeout:.0f}s")
            hub.maintain(now)
            if now >= next_ask:
                for t in targets:
                    hub.send(t, JOIN_DOOR, {"type": "nodes?"})
                next_ask = now + ASK_EVERY_S
            if now - logged >= WAIT_LOGGED_EVERY_S:
                logged = now
                log.warning("event=bootstrap_waiting bootstrap=%s waited_s=%.0f connected=%d hint=%r", config.bootstrap,
                            now - started, len(hub.connected()),
                            "each address must be a running node's Raft address exactly as its peers list names it, "
                            "and the cluster secret the same")
            hub.flush()
            select.select([hub.fileno()], [], [], 0.1)
            hub.process()
    finally:
        hub.close()
    got = endpoint.answer
    try:
        next_id = int(got["next_id"])
        peers = [f"{h}:{int(k)}:{int(r)}" for h, k, r in got["peers"]]
        added = {int(n) for n in got["added"]}
    except (KeyError, TypeError, ValueError):
        raise ConfigError(f"bootstrap: {endpoint.sender} answered with a malformed list of nodes") from None
    if next_id != len(peers):
        raise ConfigError(f"bootstrap: {endpoint.sender} named node id {next_id} for this node after "
                          f"{len(peers)} nodes")
    log.info("event=bootstrap_answered by=%s next_id=%d nodes=%d", endpoint.sender, next_id, len(peers))
    if config.node_id in (0, next_id):
        return next_id, ",".join([*peers, _me(config)]), True
    if config.node_id > next_id:
        raise ConfigError(f"node_id {config.node_id} was given, but the cluster's next node id is {next_id} "
                          "(with bootstrap, leave node_id out: the cluster gives it)")
    if peers[config.node_id] != _me(config):
        raise ConfigError(f"node_id {config.node_id} was given: the cluster has that node at {peers[config.node_id]} "
                          f"(host:kafka_port:raft_port), not {_me(config)}. A node started again under its id (its "
                          "data lost) keeps its addresses; a new node leaves node_id out")
    return config.node_id, ",".join(peers), config.node_id in added
