"""A data directory has one owner: a second process on it, or a node with another id (or of
another cluster), exits at start with one clear message and exit code 2."""

from __future__ import annotations

import hashlib
import hmac
import json
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


def test_the_identity_file_holds_nothing_that_tests_a_guess_of_the_secret_cheaply(tmp_path: Path) -> None:
    """Only a slow, salted check of the secret (scrypt): a 64-bit HMAC of it tested guesses at
    the speed of SHA-256."""
    secret = "guessable-secret"
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        check_identity(str(tmp_path / d), 1, secret)
    docs = [json.loads((tmp_path / d / "node.identity").read_text()) for d in ("a", "b")]
    fast = hmac.new(secret.encode(), b"kcoord data_dir identity", hashlib.sha256).hexdigest()
    for doc in docs:
        assert set(doc) == {"node_id", "cluster_secret_check", "cluster_id", "directory_id", "voter", "format"}, doc
        check = doc["cluster_secret_check"]
        assert check["kdf"] == "scrypt" and check["n"] >= 2**15 and check["r"] >= 8 and len(check["salt"]) == 32
        assert fast[:16] not in json.dumps(doc)
    assert docs[0]["cluster_secret_check"]["salt"] != docs[1]["cluster_secret_check"]["salt"]  # salted at random


def test_an_identity_file_of_an_earlier_version_is_checked_once_then_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "node.identity"
    old = hmac.new(b"secret-a", b"kcoord data_dir identity", hashlib.sha256).hexdigest()[:16]
    path.write_text(json.dumps({"node_id": 3, "cluster_secret_fingerprint": old, "cluster_id": "abc"}))
    with pytest.raises(DataDirError, match="another cluster"):
        check_identity(str(tmp_path), 3, "secret-b")
    assert json.loads(path.read_text())["cluster_secret_fingerprint"] == old  # a refusal rewrites nothing
    check_identity(str(tmp_path), 3, "secret-a")
    doc = json.loads(path.read_text())
    assert "cluster_secret_fingerprint" not in doc and doc["cluster_id"] == "abc" and doc["node_id"] == 3
    check_identity(str(tmp_path), 3, "secret-a")
    with pytest.raises(DataDirError, match="another cluster"):
        check_identity(str(tmp_path), 3, "secret-b")
    with pytest.raises(DataDirError, match="another cluster"):
        check_identity(str(tmp_path), 3, "")


def test_each_directory_gets_an_id_of_its_own_kept_across_starts_and_added_to_older_files(tmp_path: Path) -> None:
    """The replica's identity (a replaced disk is a new replica of its node): random per
    directory, unchanged by later starts; a file from before directory ids gets one, and the
    ``voter`` mark is set only by ``mark_voter``."""
    from cluster.data_dir import directory_id, mark_voter, was_voter

    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        check_identity(str(tmp_path / d), 1, "s")
    a, b = directory_id(str(tmp_path / "a")), directory_id(str(tmp_path / "b"))
    assert a != b and len(a) == 32
    check_identity(str(tmp_path / "a"), 1, "s")
    assert directory_id(str(tmp_path / "a")) == a and not was_voter(str(tmp_path / "a"))
    mark_voter(str(tmp_path / "a"))
    check_identity(str(tmp_path / "a"), 1, "s")
    assert was_voter(str(tmp_path / "a")) and directory_id(str(tmp_path / "a")) == a
    doc = json.loads((tmp_path / "b" / "node.identity").read_text())
    del doc["directory_id"], doc["voter"]
    (tmp_path / "b" / "node.identity").write_text(json.dumps(doc))
    with pytest.raises(DataDirError, match="no directory id"):
        directory_id(str(tmp_path / "b"))
    check_identity(str(tmp_path / "b"), 1, "s")
    assert directory_id(str(tmp_path / "b")) not in ("", b) and not was_voter(str(tmp_path / "b"))
