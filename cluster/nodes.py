"""Which nodes the cluster has, and which a Raft group starts with: the original nodes (the
``peers`` setting) and the nodes added since through the metadata log (``AddNode``), less the
nodes removed (``RemoveNode``).

Every Raft group's voters should be the cluster's nodes; each group's leader moves its group
there one server at a time (``replication/raft/membership.py``). A group created before a node
joined starts without it (every replica computes that alike: a topic records how many nodes had
joined when it was created, ``nodes_at``, or once a node was removed its nodes, ``nodes``) and
gets it as a learner, then a voter; one created after starts with it. A removed node is taken
out of every group by its leader the same way. A node that joins (``join``) counts itself among the original nodes of no
group: its own ``peers`` list names it, the others' do not.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from cluster.config import Peer
from cluster.data_dir import DataDirError
from replication.durable import write_durably

log = logging.getLogger("kcoord.cluster")

FILE_NAME = "nodes.json"  # in the data directory: what the metadata log last said of the nodes
FILE_FORMAT = 1


def added_peers(state: dict[str, Any]) -> list[Peer]:
    """The nodes added through the metadata log, in the order they joined."""
    return [Peer(int(n), str(host), int(kafka), int(raft)) for n, host, kafka, raft in state.get("added_nodes") or ()]


def removed_ids(state: dict[str, Any]) -> list[int]:
    """The nodes removed through the metadata log, in the order they left."""
    return [int(n) for n in state.get("removed_nodes") or ()]


def observer_ids(state: dict[str, Any]) -> list[int]:
    """Nodes added as observers and not promoted yet: learners in every group, voters in none."""
    return [int(n) for n in state.get("observers") or ()]


def original_ids(configured: list[Peer], state: dict[str, Any], me: int, joining: bool) -> list[int]:
    """The nodes the cluster was formed with, as the metadata log records them; else (a cluster
    formed before it did, or a node that has not read it yet) those of ``peers`` that joined no
    later, and not this node if it is joining (it is in its own list only)."""
    recorded = _recorded_original(state)
    if recorded is not None:
        return recorded
    added = {p.node_id for p in added_peers(state)}
    return [p.node_id for p in configured if p.node_id not in added and not (joining and p.node_id == me)]


def _recorded_original(state: dict[str, Any]) -> list[int] | None:
    """The original nodes as the log records them, once a node was added (until then ``peers``
    says: a cluster no node joined may still be given a new list, all nodes stopped)."""
    recorded = state.get("original_nodes")
    if recorded is None or not (state.get("added_nodes") or state.get("removed_nodes")):
        return None
    return sorted(int(x) for x in recorded)


def unknown_configured(configured: list[Peer], state: dict[str, Any], me: int, joining: bool) -> list[int]:
    """Nodes of ``peers`` the cluster neither was formed with nor added (only once the log records
    the original nodes): a list edited ahead of a join, which would start groups with other voters
    than the rest of the cluster's."""
    recorded = _recorded_original(state)
    if recorded is None:
        return []
    known = {*recorded, *(p.node_id for p in added_peers(state))}
    return [p.node_id for p in configured if p.node_id not in known and not (joining and p.node_id == me)]


def nodes_at(original: list[int], state: dict[str, Any], joined: int | None = None) -> list[int]:
    """The cluster's nodes now (``joined`` None), or a group's first voters: the original nodes
    and the first ``joined`` additions (a topic created before any removal)."""
    added = [p.node_id for p in added_peers(state)]
    if joined is not None:
        return sorted({*original, *added[:joined]})
    return sorted({*original, *added} - set(removed_ids(state)))


def topic_nodes(original: list[int], state: dict[str, Any], topic: dict[str, Any]) -> list[int]:
    """The first voters of a topic's groups, as its creation recorded them."""
    if topic.get("nodes") is not None:
        return sorted(int(n) for n in topic["nodes"])
    return nodes_at(original, state, int(topic.get("nodes_at", 0)))


def known_peers(configured: list[Peer], state: dict[str, Any]) -> dict[int, Peer]:
    """Every node's addresses: the configured ones, and the added ones as their addition says."""
    peers = {p.node_id: p for p in configured}
    peers.update({p.node_id: p for p in added_peers(state)})
    return peers


def load(data_dir: str) -> dict[str, Any]:
    """The nodes as this node last read them from the metadata log (``save``), for its start: its
    groups are created before that log is read again, with the voters they started with. Empty
    if none was saved (a node of a cluster no node ever joined) or the file cannot be read (the
    ``peers`` list serves then, as before)."""
    path = os.path.join(data_dir, FILE_NAME)
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        log.warning("event=nodes_file_unreadable path=%s error=%r action=peers_used", path, str(e))
        return {}
    if not isinstance(doc, dict):
        return {}
    fmt = doc.get("format")
    if isinstance(fmt, int) and fmt > FILE_FORMAT:
        raise DataDirError(f"{path} is of format {fmt}; this build reads up to {FILE_FORMAT}: written by a newer "
                           "release. Upgrade this node")
    return {"original_nodes": doc.get("original_nodes"), "added_nodes": doc.get("added_nodes") or [],
            "removed_nodes": doc.get("removed_nodes") or []}


def save(data_dir: str, state: dict[str, Any], saved: dict[str, Any]) -> dict[str, Any]:
    """Keep what the metadata log says of the nodes, when it says more than ``saved``; what is kept now."""
    now = {"original_nodes": state.get("original_nodes"), "added_nodes": state.get("added_nodes") or [],
           "removed_nodes": state.get("removed_nodes") or []}
    if now["original_nodes"] is None or now == saved:
        return saved
    write_durably(os.path.join(data_dir, FILE_NAME), json.dumps({"format": FILE_FORMAT, **now}).encode(), 0o600)
    return now
