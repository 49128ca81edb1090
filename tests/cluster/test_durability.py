"""Durability of a 3-node cluster across SIGKILLs, after Raft snapshots/compaction have run.

- Full-cluster SIGKILL and restart after compaction: every acknowledged commit and
  produce is still there.
- A follower stopped while the leaders compact, then restarted, catches up (from a
  snapshot) and, once leadership returns to it, serves the same data and offsets.
- A node started with a different ``offsets.topic.num.partitions`` refuses to start.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from coordinator.partitioner import partition_for
from tests.cluster.cluster_harness import FAST_LEADER_BALANCE, Cluster

pytestmark = pytest.mark.cluster
PARTITIONS = 6
N = 16
# Compact the Raft logs constantly: every 100 entries, and every 2 s when anything changed.
SETTINGS = {"group.initial.rebalance.delay.ms": 0, "raft_compaction_entries": 100,
            "raft_compaction_interval_s": 2, **FAST_LEADER_BALANCE}


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    c = Cluster(tmp_path, settings=SETTINGS).start()
    yield c
    c.kill_all()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        for i in range(3):
            print(f"--- node {i} log ---\n{c.log_text(i)[-4000:]}")


def produce(bs: str, topic: str, n: int, start: int = 0) -> set[tuple[int, int, bytes]]:
    acked: set[tuple[int, int, bytes]] = set()
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 2})

    def cb(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked.add((msg.partition(), msg.offset(), msg.value()))

    for i in range(start, start + n):
        p.produce(topic, key=str(i).encode(), value=f"v{i}".encode(), on_delivery=cb)
        if i % 50 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    return acked


def commit_many(bs: str, groups: list[str], topic: str, rounds: int) -> dict[str, dict[int, int]]:
    """Each group commits increasing offsets ``rounds`` times; returns the last acknowledged."""
    last: dict[str, dict[int, int]] = {}
    for g in groups:
        c = Consumer({"bootstrap.servers": bs, "group.id": g, "enable.auto.commit": False})
        for r in range(1, rounds + 1):
            done = c.commit(offsets=[TopicPartition(topic, p, r * 10 + p) for p in range(PARTITIONS)],
                            asynchronous=False)
            for tp in done:
                assert tp.error is None
                last.setdefault(g, {})[tp.partition] = tp.offset
        c.close()
    return last


def read_all(bs: str, topic: str) -> set[tuple[int, int, bytes]]:
    c = Consumer({"bootstrap.servers": bs, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    lows_highs = {}
    for p in range(PARTITIONS):
        for attempt in range(60):  # the client's metadata may not know the partition yet
            try:
                lows_highs[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)
                break
            except Exception:  # noqa: BLE001
                if attempt == 59:
                    raise
                time.sleep(0.5)
    got: set[tuple[int, int, bytes]] = set()
    deadline = time.time() + 60
    while time.time() < deadline and any(
            sum(1 for (q, _, _) in got if q == p) < hi - lo for p, (lo, hi) in lows_highs.items()):
        for m in c.consume(num_messages=1000, timeout=0.5):
            if not m.error():
                got.add((m.partition(), m.offset(), m.value()))
    c.close()
    return got


def committed(admin: AdminClient, group: str, topic: str) -> dict[int, int]:
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    for _ in range(60):
        try:
            res = admin.list_consumer_group_offsets([req])[group].result(timeout=15)
            return {tp.partition: tp.offset for tp in res.topic_partitions}
        except Exception:  # noqa: BLE001 - coordinator moving or loading
            time.sleep(0.5)
    raise AssertionError(f"cannot fetch offsets of {group}")


def snapshots(c: Cluster, i: int) -> list[Path]:
    return list((c.layout[i].data_dir / "raft").glob("*/raft.snapshot"))


def wait_until(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.25)


def test_full_cluster_sigkill_after_compaction_keeps_every_acknowledged_write(cluster: Cluster) -> None:
    bs = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    topic = f"dur-{uuid.uuid4().hex[:6]}"
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 3)]).values():
        f.result(timeout=30)
    groups = [f"g{i}-{uuid.uuid4().hex[:4]}" for i in range(6)]
    acked = produce(bs, topic, 3000)
    last = commit_many(bs, groups, topic, rounds=40)
    acked |= produce(bs, topic, 1000, start=3000)
    # Every node has written snapshots (Raft logs compacted) before the crash.
    wait_until(lambda: all(len(snapshots(cluster, i)) >= 10 for i in range(3)), 30, "snapshots on every node")
    last.update(commit_many(bs, groups[:3], topic, rounds=45))  # more writes after the snapshots
    cluster.kill_all()
    cluster.start()
    got = read_all(bs, topic)
    assert acked <= got, f"{len(acked - got)} acknowledged produces lost"
    admin = AdminClient({"bootstrap.servers": bs})
    for g in groups:
        final = committed(admin, g, topic)
        for p, off in last[g].items():
            assert final[p] >= off, f"{g}[{p}]: acknowledged {off}, after restart {final[p]}"


def test_follower_stopped_during_compaction_catches_up_and_serves_the_same(cluster: Cluster) -> None:
    bs = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    topic = f"fol-{uuid.uuid4().hex[:6]}"
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 3)]).values():
        f.result(timeout=30)
    time.sleep(5)  # preferred leaders in place
    # Groups whose coordinator's preferred node is node 2: slot (1 + p) % 3 == 2.
    groups = []
    while len(groups) < 3:
        g = f"gf-{uuid.uuid4().hex[:6]}"
        if (1 + partition_for(g, N)) % 3 == 2:
            groups.append(g)
    acked = produce(bs, topic, 500)
    cluster.kill(2)
    before = {i: {p.name for p in snapshots(cluster, i)} for i in (0, 1)}
    acked |= produce(bs, topic, 3000, start=500)
    last = commit_many(bs, groups, topic, rounds=40)
    # The survivors compact while node 2 is down (their logs no longer hold what it missed).
    wait_until(lambda: all(len(snapshots(cluster, i)) >= 10 for i in (0, 1)), 30, "snapshots on the leaders")
    assert before is not None
    cluster.start(2)
    # Leadership returns to node 2 for its preferred partitions; it then serves them itself.
    md_wait_deadline = time.time() + 40

    def node2_leads() -> bool:
        md = admin.list_topics(topic, timeout=10)
        data = sum(1 for p in md.topics[topic].partitions.values() if p.leader == 2)
        offs = admin.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"].partitions
        coord = all(offs[partition_for(g, N)].leader == 2 for g in groups)
        return data >= 1 and coord

    while time.time() < md_wait_deadline and not node2_leads():
        time.sleep(0.5)
    assert node2_leads(), "leadership did not return to the restarted node"
    got = read_all(bs, topic)
    assert acked <= got, f"{len(acked - got)} acknowledged produces missing after the follower came back"
    for g in groups:
        final = committed(admin, g, topic)
        assert final == last[g], f"{g}: restarted node serves {final}, acknowledged {last[g]}"


def test_a_node_with_a_different_offsets_partition_count_refuses_to_start(tmp_path: Path) -> None:
    data = tmp_path / "node"
    first = subprocess.run(
        [sys.executable, "-c", "from cluster.node import Node; from cluster.config import load_config; "
         f"Node(load_config(None, overrides={{'data_dir': {str(data)!r}, 'offsets_topic_num_partitions': 16}}))"],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert first.returncode == 0, first.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "cluster.cli", "node", "--port", "0", "--data-dir", str(data),
         "--set", "offsets.topic.num.partitions=32"],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 2
    assert "offsets.topic.num.partitions is 32" in proc.stderr and "created with 16" in proc.stderr
