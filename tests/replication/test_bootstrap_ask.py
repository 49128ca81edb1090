"""A node started with ``bootstrap`` asks a running node's hub for the cluster's nodes, over the
authenticated Raft port, and keeps the answer (cluster/bootstrap.py); a stranger without the
cluster secret gets nothing."""

from __future__ import annotations

import json
import select
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from cluster import bootstrap
from cluster.config import ConfigError, Peer, load_config
from replication.hub import RaftHub
from tests.cluster.harness import free_port

SECRET = "test-cluster-secret-5f1c9a7e2b4d80364be1a7c2d9f03e68"


class _RunningNode:
    """The answering side, as ``RaftCluster.nodes_asked`` answers: every node known, the next id."""

    def __init__(self, hub: RaftHub, known: dict[int, Peer]) -> None:
        self.hub, self.known, self.asked = hub, known, 0

    def on_connected(self, peer: str) -> None:
        pass

    def on_disconnected(self, peer: str) -> None:
        pass

    def on_message(self, peer: str, message: Any) -> None:
        if message.get("type") == "nodes?":
            self.asked += 1
            self.hub.send(peer, bootstrap.JOIN_DOOR, bootstrap.answer(len(self.known), self.known, [3]))


@pytest.fixture
def running() -> Iterator[tuple[str, _RunningNode]]:
    addr = f"127.0.0.1:{free_port()}"
    hub = RaftHub(addr, SECRET)
    node = _RunningNode(hub, {i: Peer(i, "127.0.0.1", 9092 + i, 19000 + 1000 * i) for i in range(4)})
    hub.attach(bootstrap.JOIN_DOOR, node, ())
    stop = threading.Event()

    def serve() -> None:
        import time
        while not stop.is_set():
            hub.maintain(time.monotonic())
            select.select([hub.fileno()], [], [], 0.05)
            hub.process()
            hub.flush()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield addr, node
    stop.set()
    t.join(5)
    hub.close()


def _config(tmp_path: Any, addr: str, **more: Any) -> Any:
    return load_config(None, env={}, overrides={"bootstrap": addr, "raft_port": free_port(), "host": "127.0.0.1",
                                                "port": 9500, "cluster_secret": SECRET, "data_dir": str(tmp_path),
                                                **more})


def test_the_cluster_names_its_nodes_and_the_next_id_which_is_kept(tmp_path: Any, running: Any) -> None:
    addr, node = running
    cfg = _config(tmp_path, addr)
    ran = bootstrap.resolve(cfg, timeout=30)
    assert ran.node_id == 4 and ran.join
    assert [p.raft_port for p in ran.cluster_peers] == [19000, 20000, 21000, 22000, cfg.raft_port]
    assert ran.cluster_peers[4] == Peer(4, "127.0.0.1", 9500, cfg.raft_port)
    kept = json.loads((tmp_path / bootstrap.FILE_NAME).read_text())
    assert kept["node_id"] == 4
    asked = node.asked
    assert bootstrap.resolve(cfg).cluster_peers == ran.cluster_peers  # a restart asks no more
    assert node.asked == asked


def test_a_node_id_given_must_be_the_next_or_a_node_started_again_at_its_addresses(tmp_path: Any,
                                                                                   running: Any) -> None:
    with pytest.raises(ConfigError, match="next node id is 4"):
        bootstrap.resolve(_config(tmp_path, running[0], node_id=7), timeout=30)
    with pytest.raises(ConfigError, match="has that node at 127.0.0.1:9095:22000"):  # node 3, elsewhere
        bootstrap.resolve(_config(tmp_path, running[0], node_id=3), timeout=30)
    assert not (tmp_path / bootstrap.FILE_NAME).exists()
    # node 3 (it joined) and node 1 (it formed the cluster), their data lost, started again
    again = bootstrap.resolve(_config(tmp_path / "3", running[0], node_id=3, port=9095, raft_port=22000), timeout=30)
    assert (again.node_id, again.join, len(again.cluster_peers)) == (3, True, 4)
    again = bootstrap.resolve(_config(tmp_path / "1", running[0], node_id=1, port=9093, raft_port=20000), timeout=30)
    assert (again.node_id, again.join, len(again.cluster_peers)) == (1, False, 4)


def test_without_the_cluster_secret_nothing_is_told(tmp_path: Any, running: Any) -> None:
    addr, node = running
    cfg = _config(tmp_path, addr, cluster_secret="another-secret-" + "9e1d" * 8)
    with pytest.raises(ConfigError, match="answered in 2s"):
        bootstrap.resolve(cfg, timeout=2.0)  # it asks and asks: the handshake fails each time
    assert node.asked == 0 and not (tmp_path / bootstrap.FILE_NAME).exists()
