"""Debian's kcat (librdkafka's command-line client) against a 3-node cluster, as its users run it:
``-L`` lists the brokers and a topic's partitions, ``-P`` produces lines, ``-C -e`` reads them all
back and exits, ``-Q`` finds an offset by timestamp. Slow set (``make apptest``): it needs the
``kcat`` package, which ``make setup`` installs when run as root (skipped without it)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster.cluster_harness import Cluster, report_apis

pytestmark = [pytest.mark.cluster, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("kcat") is None, reason="needs Debian's kcat")]


def _kcat(*args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(["kcat", *args], input=stdin, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"kcat {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def test_kcat_lists_produces_consumes_and_queries(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = Cluster(tmp_path, settings={"group.initial.rebalance.delay.ms": 0}, metrics=True).start()
    try:
        bs = ["-b", cluster.bootstrap]
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # held until the answer
        admin.create_topics([NewTopic("kcat-t", 1, 3)])["kcat-t"].result(20)
        listing = _kcat(*bs, "-L", "-t", "kcat-t")
        assert "3 brokers:" in listing and 'topic "kcat-t" with 1 partitions' in listing, listing
        before = int(time.time() * 1000)
        _kcat(*bs, "-P", "-t", "kcat-t", "-p", "0", stdin="".join(f"line-{i}\n" for i in range(100)))
        got = _kcat(*bs, "-C", "-t", "kcat-t", "-o", "beginning", "-e", "-q")
        assert got.splitlines() == [f"line-{i}" for i in range(100)]
        found = _kcat(*bs, "-Q", "-t", f"kcat-t:0:{before}")
        assert "kcat-t [0] offset 0" in found, found
    finally:
        report_apis(cluster)
        cluster.kill_all()
