"""franz-go's admin client (kadm) and a kgo consumer group against a 3-node cluster
(``tests/cluster/go/kadmprobe``, built with the Go toolchain; its modules come from the Go module
proxy into Go's own cache, outside the repository): brokers, topic creation, configs described
and altered, a partition increase, end and start offsets, DeleteRecords, a group that consumes
and commits, ListGroups, DescribeGroups, FetchOffsets, the group's lag and a topic deletion.
Slow (a Go build on a cold cache takes a while)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cluster.cluster_harness import Cluster, report_apis

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
PROBE = Path(__file__).resolve().parent / "go" / "kadmprobe"


def test_franz_go_kadm_runs_its_admin_calls_and_a_group(tmp_path: Path) -> None:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    assert Path(go).exists(), "the franz-go test needs the Go toolchain"
    binary = tmp_path / "kadmprobe"
    build = subprocess.run([go, "build", "-o", str(binary), "."], cwd=PROBE, capture_output=True, text=True,
                           timeout=600, env={**os.environ, "GOFLAGS": "-mod=mod"})
    assert build.returncode == 0, build.stderr[-3000:]
    cluster = Cluster(tmp_path / "cluster", settings={"group.initial.rebalance.delay.ms": 0}, metrics=True).start()
    try:
        proc = subprocess.run([str(binary), cluster.bootstrap], capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, f"kadmprobe exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    finally:
        report_apis(cluster)
        cluster.kill_all()
    got = dict(line.split("\t", 1) for line in proc.stdout.splitlines() if "\t" in line)
    print(proc.stdout)
    assert got["brokers"] == "3" and got["create"] == "<nil>" and got["partitions"] == "3"
    assert got["config.retention.ms"] == "3600000|DYNAMIC_TOPIC_CONFIG"
    assert got["config.cleanup.policy"] == "delete|DEFAULT_CONFIG"
    assert got["alter"] == "<nil>" and got["altered.retention.ms"] == "7200000"
    assert got["grow"] == "<nil>" and got["end.0"] == "20"
    assert got["deleted.low"] == "8|<nil>" and got["start.0"] == "8"
    assert int(got["consumed"]) >= 12 and "kadm-g" in got["groups"].split(",")
    state, protocol, members = got["group"].split("|")
    assert state == "Stable" and members == "1", got["group"]
    assert got["committed.0"] == "20" and got["lag.0"] == "0"
    assert got["delete"] == "<nil>"
