"""A Kafka Streams 4.4 exactly-once application (tests/cluster/java/StreamsWordCount.java: a
repartition and a changelog) on a 3-node cluster, killed with SIGKILL mid-stream and restarted
on an empty state directory, so it restores its counts from the changelog: every word's counts,
read back read_committed, are exactly 1, 2, ..., n (nothing lost, nothing counted twice)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.cluster_harness import Cluster, report_apis, wait_for
from tests.cluster.java_client import SLF4J_VERSION, compile_program, maven_classpath

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
STREAMS_VERSION = "4.4.0"
WORDS = [f"w{i}" for i in range(20)]


def _produce(bootstrap: str, start: int, n: int, pause: float = 0.0) -> Counter[str]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    sent: Counter[str] = Counter()
    for i in range(start, start + n):
        word = WORDS[(i * 7) % len(WORDS)]
        p.produce("words-in", key=str(i).encode(), value=word.encode())
        sent[word] += 1
        if pause:
            p.poll(0)
            time.sleep(pause)
    assert p.flush(30) == 0
    return sent


def _counts(bootstrap: str, partitions: int = 3) -> dict[str, list[int]]:
    """Every count written per word, read_committed, in log order."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    out: dict[str, list[int]] = {}
    try:
        c.assign([TopicPartition("counts-out", p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 30
        idle_since = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - idle_since < 2.0:
            msg = c.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            idle_since = time.monotonic()
            out.setdefault((msg.key() or b"").decode(), []).append(int(msg.value() or b"0"))
    finally:
        c.close()
    return out


def _start(cp: str, bootstrap: str, state: Path, log: Path) -> subprocess.Popen[Any]:
    return subprocess.Popen(["java", "-cp", cp, "StreamsWordCount", bootstrap, "wordcount", "words-in", "counts-out",
                             str(state)], stdout=open(log, "ab"), stderr=subprocess.STDOUT,  # noqa: SIM115
                            start_new_session=True)




def _wait_for(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    wait_for(cond, timeout, what, every=0.5)


def test_an_exactly_once_streams_application_survives_a_sigkill(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    classpath = maven_classpath(f"kafka-streams-{STREAMS_VERSION}", [
        ("org.apache.kafka", "kafka-streams", STREAMS_VERSION), ("org.slf4j", "slf4j-nop", SLF4J_VERSION)])
    cp = compile_program(ROOT / "tests/cluster/java/StreamsWordCount.java", tmp_path / "classes", classpath)
    cluster = Cluster(tmp_path / "cluster", settings={"group.initial.rebalance.delay.ms": 0}, metrics=True).start()
    app: subprocess.Popen[Any] | None = None
    log = tmp_path / "streams.log"
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for name in ("words-in", "counts-out"):
            admin.create_topics([NewTopic(name, 3, 3)])[name].result(20)
        sent = _produce(cluster.bootstrap, 0, 600)
        app = _start(cp, cluster.bootstrap, tmp_path / "state-1", log)
        _wait_for(lambda: sum(len(v) for v in _counts(cluster.bootstrap).values()) >= 300, 120,
                  "the application to count the first records")
        # killed mid-stream: while the next 600 arrive (over about 3 s), a second into them
        more: list[Counter[str]] = []
        feeder = threading.Thread(target=lambda: more.append(_produce(cluster.bootstrap, 600, 600, pause=0.005)))
        feeder.start()
        time.sleep(1.0)
        os.killpg(app.pid, signal.SIGKILL)
        app.wait(10)
        at_kill = sum(len(v) for v in _counts(cluster.bootstrap).values())
        feeder.join(60)
        sent += more[0]
        assert 600 <= at_kill < 1200, at_kill  # it had counted some of the second 600, not all
        # a new state directory: the counts come back from the changelog
        app = _start(cp, cluster.bootstrap, tmp_path / "state-2", log)
        _wait_for(lambda: {w: max(v) for w, v in _counts(cluster.bootstrap).items()} == dict(sent), 180,
                  "every word counted once per input")
        counts = _counts(cluster.bootstrap)
        for word, n in sent.items():
            assert counts[word] == list(range(1, n + 1)), (word, counts[word][:20], n)
    except AssertionError:
        print(log.read_text(errors="replace")[-5000:] if log.exists() else "(no application log)")
        raise
    finally:
        if app is not None and app.poll() is None:
            os.killpg(app.pid, signal.SIGKILL)
        report_apis(cluster)
        cluster.kill_all()
