"""A topic deleted and created again under its name starts empty, on every node, including a
node that was down during the delete (it used to replay the old topic's Raft journal and get
its old data back)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.cluster.cluster_harness import FAST_LEADER_BALANCE, Cluster
from tests.cluster.cluster_harness import wait_for as _wait_for

pytestmark = pytest.mark.cluster

TOPIC, PARTITIONS = "reborn", 3


def _produce(bootstrap: str, prefix: bytes, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        p.produce(TOPIC, value=prefix + b"-%d" % i, partition=i % PARTITIONS)
    assert p.flush(30) == 0


def _consume_all(bootstrap: str) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                  "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        ends: dict[int, int] = {}
        deadline = time.monotonic() + 30
        while len(ends) < PARTITIONS:
            for p in range(PARTITIONS):
                try:
                    ends[p] = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=5)[1]
                except Exception:  # noqa: BLE001 - metadata or leadership still settling
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 30
        while len(got) < sum(ends.values()) and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value() or b"")
    finally:
        c.close()
    return got


def _admin(bootstrap: str):  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})




def _leaders(bootstrap: str) -> dict[int, int]:
    try:
        md = _admin(bootstrap).list_topics(TOPIC, timeout=5)
        return {p.id: p.leader for p in md.topics[TOPIC].partitions.values()}
    except Exception:  # noqa: BLE001 - metadata still settling
        return {}


def _holds_old_data(node_dir: Path) -> bool:
    for f in node_dir.rglob("*"):
        try:
            if f.is_file() and b"old-" in f.read_bytes():
                return True
        except FileNotFoundError:  # replaced while we looked
            continue
    return False


def test_a_recreated_topic_starts_empty_on_every_node(tmp_path: Path) -> None:
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    cluster = Cluster(tmp_path, settings={"group.initial.rebalance.delay.ms": 0, **FAST_LEADER_BALANCE}).start()
    try:
        admin = _admin(cluster.bootstrap)
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(20)
        _produce(cluster.bootstrap, b"old", 30)
        # node 2 has the old data too (else the check on its files at the end proves nothing)
        _wait_for(lambda: _holds_old_data(tmp_path / "node-2"), 20, "the old data on node 2")
        cluster.kill(2)
        live = f"{cluster.address(0)},{cluster.address(1)}"
        admin = _admin(live)
        admin.delete_topics([TOPIC])[TOPIC].result(20)
        deadline = time.monotonic() + 20
        while True:
            try:
                admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(20)
                break
            except Exception:  # noqa: BLE001 - the delete is still being applied
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        _produce(live, b"new", 9)
        assert sorted(_consume_all(live)) == sorted(b"new-%d" % i for i in range(9))
        cluster.start(2)
        # node 2 catches up, and leadership is balanced back to it for its partitions (each node
        # prefers one of the three); it was a fixed 8 s
        _wait_for(lambda: sorted(_leaders(cluster.bootstrap).values()) == [0, 1, 2], 30,
                  "leadership balanced back to node 2")
        cluster.kill(0)  # from now on node 2 serves what it holds
        # elections of the partitions node 0 led (it was a fixed 3 s)
        survivors = f"{cluster.address(1)},{cluster.address(2)}"

        def elected() -> bool:
            leaders = _leaders(survivors)
            return len(leaders) == PARTITIONS and set(leaders.values()) <= {1, 2}

        _wait_for(elected, 30, "new leaders for node 0's partitions")
        got = _consume_all(survivors)
        assert sorted(got) == sorted(b"new-%d" % i for i in range(9)), got
        stale = [str(f) for f in (tmp_path / "node-2").rglob("*") if f.is_file() and b"old-" in f.read_bytes()]
        assert not stale, f"node 2 still holds the deleted topic's data: {stale}"
    finally:
        cluster.kill_all()
