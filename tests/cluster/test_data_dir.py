"""A data directory has one owner: a second process on it, or a node with another id (or of
another cluster), exits at start with one clear message and exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cluster.data_dir import DataDirError, check_identity, lock, record_cluster_id
from tests.cluster.harness import ROOT, NodeProcess, free_port


def _start_on(data_dir: Path, node_id: int) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "cluster.cli", "node", "--node-id", str(node_id), "--host", "127.0.0.1",
           "--port", str(free_port()), "--data-dir", str(data_dir)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.mark.cluster
def test_a_second_process_and_another_node_id_are_refused(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path).start()
    try:
        second = _start_on(node.data_dir, 0)
        assert second.returncode == 2
        assert "is in use by another kcoord process" in second.stderr and str(node.proc.pid) in second.stderr
        assert node.alive()
    finally:
        node.stop()
    other = _start_on(node.data_dir, 1)
    assert other.returncode == 2 and "belongs to node 0, not node 1" in other.stderr
    node.start()  # its own node id still starts
    node.stop()


def test_identity_is_recorded_then_checked(tmp_path: Path) -> None:
    check_identity(str(tmp_path), 3, "secret-a")
    check_identity(str(tmp_path), 3, "secret-a")
    with pytest.raises(DataDirError, match="another cluster"):
        check_identity(str(tmp_path), 3, "secret-b")
    with pytest.raises(DataDirError, match="belongs to node 3"):
        check_identity(str(tmp_path), 4, "secret-a")
    record_cluster_id(str(tmp_path), "abc")
    record_cluster_id(str(tmp_path), "abc")
    with pytest.raises(DataDirError, match="belongs to cluster abc"):
        record_cluster_id(str(tmp_path), "xyz")


def test_the_lock_is_held_until_released(tmp_path: Path) -> None:
    import os

    fd = lock(str(tmp_path))
    probe = subprocess.run([sys.executable, "-c", f"from cluster.data_dir import lock; lock({str(tmp_path)!r})"],
                           cwd=ROOT, capture_output=True, text=True)
    assert probe.returncode != 0 and "in use by another kcoord process" in probe.stderr
    os.close(fd)
    lock(str(tmp_path))
