"""A follower that was down while the cluster kept taking writes catches up: once restarted,
its copy of every data partition and of the group offsets becomes the leaders' again.

Its whole backlog used to be sent as one hub frame: over the receiver's 256 MiB frame limit
the connection was closed, redialled and the same frame sent again, for ever. The default run
keeps node 2 down for 25 s under a produce and commit load; ``-m slow`` for 10 minutes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.cluster.cluster_harness import Cluster

pytestmark = pytest.mark.cluster

TOPIC, PARTITIONS = "backlog", 2
RATE = 500  # records of 4 KB per second: 2 MB/s


def _load(bootstrap: str, stop: threading.Event, acked: list[int]) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "batch.size": 1 << 20,
                  "queue.buffering.max.kbytes": 65536})
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "backlog-group", "enable.auto.commit": False})
    value = b"v" * 4000
    n = 0
    started = time.monotonic()

    def done(err: object, _msg: object) -> None:
        if err is None:
            acked[0] += 1

    while not stop.is_set():
        try:
            p.produce(TOPIC, value=value, partition=n % PARTITIONS, on_delivery=done)
        except BufferError:
            p.poll(0.05)
            continue
        n += 1
        if n > (time.monotonic() - started) * RATE:
            time.sleep(0.01)  # a steady load, not a flood (a flood wrote 2.5 GB in 45 s)
        if n % 200 == 0:
            p.poll(0)
            try:
                c.commit(offsets=[TopicPartition(TOPIC, q, n) for q in range(PARTITIONS)], asynchronous=False)
            except Exception:  # noqa: BLE001 - a commit during a leader move: not acknowledged
                pass
    p.flush(60)
    c.close()


def _segments(node_dir: Path) -> dict[str, bytes]:
    out = {}
    for f in sorted((node_dir / "topics").rglob("*.log")):
        out[f"{f.parent.name}/{f.name}"] = f.read_bytes()
    return out


def _catch_up(tmp_path: Path, down_s: float) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    cluster = Cluster(tmp_path, settings={"group.initial.rebalance.delay.ms": 0}).start()
    stop = threading.Event()
    acked = [0]
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(20)
        live = f"{cluster.address(0)},{cluster.address(1)}"
        cluster.kill(2)
        worker = threading.Thread(target=_load, args=(live, stop, acked), daemon=True)
        worker.start()
        time.sleep(down_s)
        stop.set()
        worker.join(120)
        assert acked[0] > 100, f"the load made no progress ({acked[0]} produces acknowledged)"
        backlog = sum(len(b) for b in _segments(tmp_path / "node-0").values())
        cluster.start(2)
        deadline = time.monotonic() + max(60.0, down_s)
        while time.monotonic() < deadline:
            lead, follower = _segments(tmp_path / "node-0"), _segments(tmp_path / "node-2")
            if lead == follower:
                break
            time.sleep(1)
        lead, follower = _segments(tmp_path / "node-0"), _segments(tmp_path / "node-2")
        behind = {k: (len(v), len(follower.get(k, b""))) for k, v in lead.items() if follower.get(k) != v}
        assert not behind, f"node 2 did not catch up ({backlog} bytes of backlog): {behind}"
        assert cluster.procs[2] is not None and cluster.procs[2].poll() is None
        print(f"caught up: {acked[0]} produces, {backlog} bytes of data")
    finally:
        stop.set()
        cluster.kill_all()


def test_a_follower_down_for_a_while_catches_up(tmp_path: Path) -> None:
    _catch_up(tmp_path, 15)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # 10 minutes down, then up to 10 minutes to catch up
def test_a_follower_down_for_ten_minutes_catches_up(tmp_path: Path) -> None:
    _catch_up(tmp_path, 600)
