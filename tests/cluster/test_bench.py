"""``kcoord bench commit`` and ``rebalance``, a few seconds each, against a started node.

Runs the real CLI (``python -m cluster.cli bench ...``) and checks its JSON line: the
figures are there and positive, and no acknowledged commit was lost.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.harness import ROOT, NodeProcess

pytestmark = pytest.mark.cluster


@pytest.fixture
def node(tmp_path):
    n = NodeProcess(tmp_path, settings={"group.initial.rebalance.delay.ms": 0}).start()
    yield n
    n.kill()


def bench(*argv: str, timeout: float = 180) -> dict:
    proc = subprocess.run([sys.executable, "-m", "cluster.cli", "bench", *argv, "--quiet"], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"no JSON line (rc={proc.returncode})\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    out = json.loads(lines[-1])
    assert proc.returncode == (0 if out["ok"] else 1), proc.stderr
    return out


def test_bench_commit(node: NodeProcess) -> None:
    out = bench("commit", "--bootstrap", node.bootstrap, "--clients", "2", "--duration", "1.5",
                "--phases", "sync-1,sync-10,async-1")
    assert out["scenario"] == "commit" and out["ok"] is True, out
    assert out["errors"] == {} and out["ratios"] == {} and out["ratio_of"] is None
    r = out["results"]["kcoord"]
    for ph in ("sync-1", "sync-10", "async-1"):
        assert r[f"{ph}.commits_per_s"] > 0, r
        assert r[f"{ph}.errors"] == 0, r
    assert r["sync-10.offsets_per_s"] == pytest.approx(10 * r["sync-10.commits_per_s"], rel=0.01)
    assert 0 < r["sync-1.p50_ms"] <= r["sync-1.p99_ms"]
    for ph in ("sync-1", "sync-10", "async-1"):  # CPU per commit: the clients' own, and the rest of the host's
        assert r[f"{ph}.client_cpu_us"] > 0 and r[f"{ph}.server_cpu_us"] >= 0, r
        assert 0 < r[f"{ph}.host_busy_pct"] <= 100, r
    assert r["partitions_checked"] == 2 * 10
    assert r["acked_commits"] > 0
    assert r["lost_commits"] == 0, r.get("lost_detail")


def test_bench_txn(node: NodeProcess) -> None:
    out = bench("txn", "--bootstrap", node.bootstrap, "--duration", "1.5", "--batch", "20")
    assert out["scenario"] == "txn" and out["ok"] is True, out
    r = out["results"]["kcoord"]
    assert r["transactions"] > 0 and r["txns_per_s"] > 0 and r["records_per_s"] == pytest.approx(
        20 * r["txns_per_s"], rel=0.01)
    assert 0 < r["commit_p50_ms"] <= r["commit_p99_ms"]
    assert (r["missing"], r["duplicates"]) == (0, 0)  # every committed record read back once, read_committed


def test_bench_rebalance(node: NodeProcess) -> None:
    out = bench("rebalance", "--bootstrap", node.bootstrap, "--members", "3", "--partitions", "6",
                "--rounds", "1")
    assert out["scenario"] == "rebalance" and out["ok"] is True, out
    r = out["results"]["kcoord"]
    assert r["failed_measurements"] == 0
    for k in ("initial_s", "join_median_s", "leave_median_s"):
        assert r[k] is not None and 0 < r[k] < 30, r
    assert r["assignments"] >= 3 + 4 + 3  # initial, after the join, after the leave


def test_bench_failover_needs_three_nodes(node: NodeProcess) -> None:
    proc = subprocess.run([sys.executable, "-m", "cluster.cli", "bench", "failover", "--bootstrap",
                           node.bootstrap, "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "needs a 3-node cluster started by `kcoord up`" in proc.stderr


def test_bench_failover_start_cluster_one_kill(tmp_path: Path) -> None:
    """A fresh 3-node cluster; SIGKILL the coordinator of a committing group once; no commit lost;
    the client's librdkafka log, with the kill's wall-clock time to find it there."""
    log = tmp_path / "clients.log"
    out = bench("failover", "--start-cluster", "--kills", "1", "--client-debug", str(log), timeout=150)
    assert out["scenario"] == "failover" and out["ok"] is True, out
    r = out["results"]["kcoord"]
    assert len(r["samples_s"]) == 1 and 0 < r["samples_s"][0] < 30, r
    assert r["groups_checked"] == 1 and r["lost_commits"] == 0, r
    assert r["acked_commits"] > 20, r
    at = r["detail"][0]["at"]
    stamps = [float(line.split("|")[1]) for line in log.read_text(errors="replace").splitlines()
              if line.startswith("%") and "|OffsetCommit" not in line and line.count("|") >= 3]
    assert stamps and min(stamps) < at < max(stamps), (at, stamps[:3], stamps[-3:])
    assert "FindCoordinatorRequest" in log.read_text(errors="replace")


def test_bench_heartbeat_start_cluster_small() -> None:
    """60 members in 12 groups on a fresh 3-node cluster, every 0.5 s for 3 s: figures present and sane."""
    out = bench("heartbeat", "--start-cluster", "--members", "60", "--groups", "12", "--interval", "0.5",
                "--duration", "3", timeout=150)
    assert out["scenario"] == "heartbeat" and out["errors"] == {}, out
    assert out["params"]["members"] == 60 and out["params"]["groups"] == 12
    r = out["results"]["kcoord"]
    assert r["members"] == 60 and r["groups"] == 12 and r["coordinators"] >= 1, r
    assert r["joined_s"] is not None and r["joined_s"] > 0, r
    assert r["sync_requests"] >= 60 and r["join_requests"] >= 2 * 60, r
    assert r["expected_per_s"] == pytest.approx(120.0)
    assert 0 < r["ok"] <= r["sent"], r
    assert r["achieved_per_s"] == pytest.approx(r["ok"] / 3, rel=0.01), r
    assert r["errors"] == sum(r["error_codes"].values()), r
    assert 0 < r["p50_ms"] <= r["p99_ms"] <= r["max_ms"], r
    assert r["loadgen_cpu_pct"] >= 0 and r["nodes_cpu_pct"] > 0, r
    assert len(r["nodes_cpu_pct_per_node"]) == 3, r
    assert out["ok"] is (r["errors"] == 0 and r["timeouts"] == 0 and r["achieved_pct"] >= 95), out


@pytest.mark.slow
def test_bench_compaction_start_cluster_small() -> None:
    """5 MB of updates compacted by a fresh 3-node cluster, 2 s of load before and during."""
    out = bench("compaction", "--start-cluster", "--data-mb", "5", "--keys", "100", "--duration", "2", timeout=150)
    r = out["results"]["kcoord"]
    assert out["ok"] and r["passes"] >= 3 and r["compact_mb_per_s"] > 0, out  # every replica compacted
    assert r["compacted_mb_left"] < 5 and r["errors"] == 0, r
    for phase in ("steady", "compacting"):
        assert 0 < r[f"{phase}_commit_p50_ms"] <= r[f"{phase}_commit_p99_ms"], r
        assert 0 < r[f"{phase}_produce_p50_ms"] <= r[f"{phase}_produce_p99_ms"], r


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None, reason="needs Java 17 and Maven")
def test_bench_commit_against_apache_kafka(node: NodeProcess) -> None:
    """``--peer kafka``: a 3-broker KRaft Apache Kafka started from Maven Central's jars runs the same
    commit workload; both sides' figures and the ratios are there, and neither lost a commit."""
    out = bench("commit", "--bootstrap", node.bootstrap, "--peer", "kafka", "--clients", "2", "--duration", "2",
                "--phases", "sync-1,async-1", timeout=900)
    assert out["ok"] is True and out["errors"] == {}, out
    assert out["ratio_of"] == "kcoord/kafka" and set(out["results"]) == {"kcoord", "kafka"}, out
    assert len(out["targets"]["kafka"].split(",")) == 3, out["targets"]
    for name in ("kcoord", "kafka"):
        r = out["results"][name]
        assert r["sync-1.commits_per_s"] > 0 and r["async-1.commits_per_s"] > 0, (name, r)
        assert r["lost_commits"] == 0 and r["acked_commits"] > 0, (name, r)
    assert out["ratios"]["sync-1.commits_per_s"] > 0, out["ratios"]
