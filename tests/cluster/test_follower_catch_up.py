"""A follower that was down while the cluster kept taking writes catches up: once restarted,
its copy of every data partition and of the group offsets becomes the leaders' again.

Its whole backlog used to be sent as one hub frame: over the receiver's 256 MiB frame limit
the connection was closed, redialled and the same frame sent again, for ever. The default run
keeps node 2 down for 15 s under a produce and commit load; ``-m slow`` for 10 minutes, and
2 GB into one partition (every node's peak RSS under 400 MB while node 2 installs it)."""

from __future__ import annotations

import hashlib
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


def _segments(node_dir: Path, digest: bool = False) -> dict[str, int | str]:
    """Each data segment's size, or (``digest``) its SHA-256, read a MiB at a time."""
    out: dict[str, int | str] = {}
    for f in sorted((node_dir / "topics").glob("*/*.log")):
        if digest:
            h = hashlib.sha256()
            with open(f, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    h.update(chunk)
            out[f"{f.parent.name}/{f.name}"] = h.hexdigest()
        else:
            out[f"{f.parent.name}/{f.name}"] = f.stat().st_size
    return out


def _flood(bootstrap: str, total: int, stop: threading.Event, acked: list[int]) -> None:
    """``total`` bytes into partition 0 as fast as the cluster takes them."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 50, "batch.size": 1 << 20,
                  "queue.buffering.max.kbytes": 131072, "message.max.bytes": 1 << 20})
    value = b"f" * 16000

    def done(err: object, _msg: object) -> None:
        if err is None:
            acked[0] += 1

    sent = 0
    while sent < total and not stop.is_set():
        try:
            p.produce(TOPIC, value=value, partition=0, on_delivery=done)
            sent += len(value)
        except BufferError:
            p.poll(0.05)
    p.flush(300)


def _peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _catch_up(tmp_path: Path, down_s: float, flood: int = 0) -> None:
    """Node 2 is down while the others take ``down_s`` seconds of load (or ``flood`` bytes into
    one partition); journals are compacted every MiB, so it catches up through snapshot installs."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    cluster = Cluster(tmp_path, settings={"group.initial.rebalance.delay.ms": 0,
                                          "raft_compaction_bytes": 1 << 20}).start()
    stop = threading.Event()
    acked = [0]
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(20)
        live = f"{cluster.address(0)},{cluster.address(1)}"
        cluster.kill(2)
        if flood:
            _flood(live, flood, stop, acked)
        else:
            worker = threading.Thread(target=_load, args=(live, stop, acked), daemon=True)
            worker.start()
            time.sleep(down_s)
            stop.set()
            worker.join(120)
        assert acked[0] > 100, f"the load made no progress ({acked[0]} produces acknowledged)"
        backlog = sum(int(b) for b in _segments(tmp_path / "node-0").values())
        cluster.start(2)
        restarted = time.monotonic()
        deadline = restarted + max(60.0, down_s, backlog / 5e6)
        while time.monotonic() < deadline:
            if _segments(tmp_path / "node-0") == _segments(tmp_path / "node-2"):
                break
            time.sleep(1)
        caught_up_s = time.monotonic() - restarted
        lead, follower = _segments(tmp_path / "node-0", True), _segments(tmp_path / "node-2", True)
        sizes = _segments(tmp_path / "node-2")
        behind = {k: (_segments(tmp_path / "node-0")[k], sizes.get(k, 0)) for k, v in lead.items()
                  if follower.get(k) != v}
        assert not behind, f"node 2 did not catch up ({backlog} bytes of backlog): {behind}"
        assert cluster.procs[2] is not None and cluster.procs[2].poll() is None
        installed = (tmp_path / "node-2.log").read_text(errors="replace").count("event=snapshot_installed")
        assert installed, "node 2 caught up without a snapshot install: the test did not test it"
        peaks = [_peak_rss_mb(p.pid) for p in cluster.procs if p is not None]
        print(f"caught up in {caught_up_s:.0f} s: {acked[0]} produces, {backlog} bytes of data, "
              f"{installed} snapshot installs, "
              f"peak RSS per node (MB): {[round(x) for x in peaks]}")
        if flood:
            assert max(peaks) < 400, f"peak RSS over 400 MB: {peaks}"
    finally:
        stop.set()
        cluster.kill_all()


def test_a_follower_down_for_a_while_catches_up(tmp_path: Path) -> None:
    _catch_up(tmp_path, 15)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # 10 minutes down, then up to 10 minutes to catch up
def test_a_follower_down_for_ten_minutes_catches_up(tmp_path: Path) -> None:
    _catch_up(tmp_path, 600)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_a_follower_catches_up_two_gigabytes_in_bounded_memory(tmp_path: Path) -> None:
    _catch_up(tmp_path, 0, flood=2 << 30)
