"""A node whose disk fills under a commit load stops with one clear line; the other two keep
serving; once space is freed and the node restarted, every acknowledged commit is there.

Node 2's data_dir is a small tmpfs mounted by the test (root only), so the ENOSPC is real."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.cluster_harness import Cluster

pytestmark = [pytest.mark.cluster, pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")]

TOPIC, GROUP, PARTITIONS = "diskfull", "diskfull-group", 8


def _commit_until(bootstrap: str, until: float, node_dead: callable) -> dict[int, int]:  # type: ignore[valid-type]
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    acked: dict[int, int] = {}
    offset = 0
    metadata = "m" * 4000  # offset.metadata.max.bytes: each commit stores ~32 KB
    try:
        while time.monotonic() < until:
            offset += 1
            try:
                done = c.commit(offsets=[TopicPartition(TOPIC, p, offset, metadata=metadata)
                                         for p in range(PARTITIONS)], asynchronous=False)
            except KafkaException:
                continue  # e.g. NOT_COORDINATOR while the coordinator moves: not acknowledged
            for tp in done or []:
                if tp.error is None:
                    acked[tp.partition] = max(acked.get(tp.partition, -1), tp.offset)
            if node_dead() and offset % 50 == 0:
                break
    finally:
        c.close()
    return acked


def test_a_full_disk_stops_the_node_and_loses_nothing(tmp_path: Path) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    cluster = Cluster(tmp_path, settings={"group.initial.rebalance.delay.ms": 0})
    mnt = cluster.layout[2].data_dir
    mnt.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)], check=True)
    try:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(20)
        proc2 = cluster.procs[2]
        assert proc2 is not None
        acked = _commit_until(cluster.bootstrap, time.monotonic() + 90, lambda: proc2.poll() is not None)
        assert proc2.poll() is not None, "node 2 never filled its 3 MB disk"
        assert proc2.returncode == 3  # replication.failstop.EXIT_FAIL_STOP
        log2 = cluster.log_text(2)
        assert "event=fail_stop" in log2 and "No space left on device" in log2
        # the other two keep serving: more commits are acknowledged without node 2
        more = _commit_until(cluster.bootstrap, time.monotonic() + 3, lambda: False)
        assert more, "the cluster stopped serving commits with one node down"
        for p, o in more.items():
            acked[p] = max(acked.get(p, -1), o)
        cluster.procs[2] = None
        subprocess.run(["mount", "-o", "remount,size=256m", str(mnt)], check=True)  # space freed
        cluster.start(2)
        time.sleep(3)
        cluster.kill(0)  # node 2 must now hold what it had acknowledged, and catch up the rest
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
        try:
            got = _committed_after_failover(c)
        finally:
            c.close()
        lost = {p: (got.get(p), o) for p, o in acked.items() if got.get(p, -1) < o}
        assert not lost, f"acknowledged commits lost (partition: (now, acknowledged)): {lost}"
    finally:
        cluster.kill_all()
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _committed_after_failover(c: Any) -> dict[int, int]:
    """The group's offsets, asked again while its coordinator moves off the killed node:
    librdkafka hands committed()'s NOT_COORDINATOR to the caller (the Java client retries it
    itself), which happened once when a FindCoordinator named a node still being elected."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    deadline = time.monotonic() + 30
    while True:
        try:
            tps = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
            return {tp.partition: tp.offset for tp in tps}
        except KafkaException as exc:
            retriable = exc.args[0].code() in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
            if not retriable or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
