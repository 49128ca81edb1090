"""A node started with ``bootstrap``: its settings, the answer a running node gives, and the
record that keeps its id across restarts (cluster/bootstrap.py)."""

from __future__ import annotations

import json

import pytest

from cluster import bootstrap
from cluster.config import ConfigError, Peer, load_config
from cluster.data_dir import DataDirError

SECRET = "test-cluster-secret-5f1c9a7e2b4d80364be1a7c2d9f03e68"
BOOT = {"bootstrap": "10.0.0.1:19000,10.0.0.2:19000", "raft_port": 19000, "host": "10.0.0.9", "port": 9092,
        "cluster_secret": SECRET}


def test_bootstrap_takes_kafkas_name_and_needs_a_raft_port_a_reachable_host_and_the_secret() -> None:
    cfg = load_config(None, env={}, overrides={**BOOT, "bootstrap": None,
                                               "controller.quorum.bootstrap.servers": "10.0.0.1:19000"})
    assert cfg.bootstrap == "10.0.0.1:19000"
    for change, needle in (({"raft_port": 0}, "raft_port"), ({"host": "0.0.0.0"}, "host"),
                           ({"cluster_secret": "short"}, "cluster_secret"), ({"bootstrap": "10.0.0.1"}, "bootstrap"),
                           ({"bootstrap": "h:99999"}, "bootstrap"),
                           ({"peers": "a:1:2,b:3:4"}, "give bootstrap or peers, not both"),
                           ({"host": "127.0.0.1"}, "loopback"), ({"port": 0}, "not 0")):
        with pytest.raises(ConfigError, match=needle):
            load_config(None, env={}, overrides={**BOOT, **change})


def test_a_running_node_tells_every_node_id_removed_ones_too_and_the_next() -> None:
    known = {i: Peer(i, f"h{i}", 9092, 19000) for i in range(5)}  # node 1 removed: still a position
    told = bootstrap.answer(5, known, [4, 3])
    assert told is not None and told["next_id"] == 5 and told["added"] == [3, 4]
    assert told["peers"][1] == ["h1", 9092, 19000] and len(told["peers"]) == 5
    assert bootstrap.answer(5, {i: known[i] for i in (0, 2, 3, 4)}, []) is None  # a gap: it cannot say
    assert bootstrap.answer(6, known, []) is None


def test_the_first_answer_is_kept_and_a_restart_reads_it(tmp_path) -> None:
    cfg = load_config(None, env={}, overrides={**BOOT, "data_dir": str(tmp_path)})
    (tmp_path / bootstrap.FILE_NAME).write_text(json.dumps(
        {"format": 1, "node_id": 3, "peers": "a:1:100,b:2:2000,c:3:4000,10.0.0.9:9092:19000"}))
    ran = bootstrap.resolve(cfg)
    assert (ran.node_id, ran.join, ran.cluster_peers[3]) == (3, True, Peer(3, "10.0.0.9", 9092, 19000))
    moved = load_config(None, env={}, overrides={**BOOT, "data_dir": str(tmp_path), "port": 9093})
    with pytest.raises(ConfigError, match="not 10.0.0.9:9093:19000"):  # restarted with other addresses
        bootstrap.resolve(moved)
    (tmp_path / bootstrap.FILE_NAME).write_text('{"format": 9, "node_id": 3, "peers": "a:1:2"}')
    with pytest.raises(DataDirError, match="newer release"):
        bootstrap.resolve(cfg)
    (tmp_path / bootstrap.FILE_NAME).write_text("{")
    with pytest.raises(DataDirError, match="empty data directory"):
        bootstrap.resolve(cfg)
