"""The wire fuzzer against a live 3-node cluster, beside a healthy confluent-kafka group.

Passes when no node exits, every health probe answers, and every acknowledged produce and
commit of the healthy group is still there afterwards. The default run is bounded; ``-m slow``
runs a long one. A failure names the seed: ``kcoord chaos fuzz --seed S`` replays the cases.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from chaos.fuzz.healthy import HealthyGroup
from chaos.fuzz.runner import fuzz
from tests.cluster.cluster_harness import Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]

SEED = int(os.environ.get("KCOORD_FUZZ_SEED", "20261124"))


def _fuzz_cluster(tmp_path: Path, cases: int, idle: int) -> None:
    cluster = Cluster(tmp_path, settings={"group.initial.rebalance.delay.ms": 0}).start()
    nodes = cluster.bootstrap.split(",")

    def dead() -> list[str]:
        return [f"node {i} exited with {p.returncode}" for i, p in enumerate(cluster.procs)
                if p is not None and p.poll() is not None]

    try:
        with HealthyGroup(cluster.bootstrap) as healthy:
            time.sleep(3)  # the group forms and starts committing
            report = asyncio.run(fuzz(nodes, cases=cases, seed=SEED, idle_connections=idle, dead_nodes=dead))
            time.sleep(2)
        print(report.summary())
        s = healthy.stats
        print(f"healthy: {len(s.produced)} produced, {s.commits} commits, {s.consumed} consumed, errors {s.errors[:5]}")
        assert not report.failures, f"seed={SEED}: {report.failures[:10]}"
        assert not dead(), dead()
        assert report.cases == cases
        assert len(s.produced) > 50 and s.commits > 5, f"seed={SEED}: the healthy group made no progress"
        problems = healthy.verify()
        assert not problems, f"seed={SEED}: {problems}"
    finally:
        cluster.kill_all()
        for i in range(3):
            log = cluster.log_text(i)
            if "Traceback" in log or "event=fail_stop" in log:
                print(f"--- node {i} log tail ---\n{log[-3000:]}")


def test_fuzz_bounded(tmp_path: Path) -> None:
    # the sweep first sends the huge-count trick at every offset of every served API and version;
    # 800 random cases (seed 20261124) then hit each of the 36 served APIs at least 16 times and
    # each mutation kind about 65 times
    _fuzz_cluster(tmp_path, cases=800, idle=500)


@pytest.mark.slow
def test_fuzz_long(tmp_path: Path) -> None:
    _fuzz_cluster(tmp_path, cases=50000, idle=3000)
