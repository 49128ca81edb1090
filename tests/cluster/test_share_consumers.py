"""Share groups end to end (KIP-932): three Kafka 4.4 Java share consumers and one librdkafka share
consumer in one group consume a 3-partition topic in explicit acknowledgement mode while a
partition's leader and then the group's coordinator are SIGKILLed. Some records are released once
(and accepted at their next delivery), some rejected, the rest accepted.

What must hold: every record is acknowledged as its rule says (accepted, or rejected: archived),
confirmed by the broker or with its answer lost in a kill; no record is confirmed done twice; a
released record comes back with its delivery count raised; every consumer of both kinds does some
of the work; and a consumer started afterwards finds nothing left, so every record is done on the
server (those whose answer was lost included)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.cluster_harness import Cluster, alter_configs, wait_for
from tests.cluster.java_client import compile_program
from tests.cluster.test_group_configs import _coordinator
from tests.cluster.test_share_groups import _describe, _leaders

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
TOPIC, PARTITIONS, RECORDS = "work", 3, 600


def _kind(i: int) -> str:
    return "release" if i % 10 == 3 else "reject" if i % 25 == 7 else "plain"


class Worker:
    """A share consumer process and the lines it printed."""

    def __init__(self, name: str, cmd: list[str]) -> None:
        self.name = name
        self.lines: list[str] = []
        self.errors: list[str] = []
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout, self.lines), daemon=True)
        self._reader.start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.errors), daemon=True).start()

    @staticmethod
    def _read(stream: Any, into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip())

    def done(self) -> int:
        return sum(1 for x in list(self.lines) if x.startswith("DONE"))

    def finish(self, timeout: float) -> None:
        self.proc.wait(timeout)
        self._reader.join(5)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, settings={"group.share.enable": True}).start()
    try:
        yield c
    finally:
        c.kill_all()


def _produce(bootstrap: str, first: int, last: int, trickle: bool = False) -> None:
    """Records first..last-1, round the partitions; ``trickle``: about 100 a second."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(first, last):
        producer.produce(TOPIC, value=f"{_kind(i)}-{i}".encode(), key=str(i).encode(), partition=i % PARTITIONS)
        if trickle and i % 10 == 9:
            producer.flush(30)
            time.sleep(0.1)
    assert producer.flush(60) == 0


def test_three_java_and_one_librdkafka_share_consumers_through_two_kills(cluster: Cluster, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
    group = f"share-{uuid.uuid4().hex[:8]}"
    assert alter_configs(cluster.address(0), 32, group, ("share.auto.offset.reset", 0, "earliest")).error_code == 0
    cp = compile_program(ROOT / "tests/cluster/java/ShareConsume.java", tmp_path / "classes")
    args = [cluster.bootstrap, TOPIC, group, "10", "150"]
    workers = [Worker(f"java-{i}", ["java", "-cp", cp, "ShareConsume", *args]) for i in range(3)]
    workers.append(Worker("librdkafka", [sys.executable, "-m", "tests.cluster.share_worker", *args]))
    try:
        # records trickle in once all four have joined, so that each gets some (a consumer that
        # joined alone would otherwise take all that was waiting at once)
        wait_for(lambda: len(_describe(cluster, group).members) == 4, 60, "four members")
        _produce(cluster.bootstrap, 0, RECORDS // 3, trickle=True)
        wait_for(lambda: sum(w.done() for w in workers) >= RECORDS // 6, 90, "a sixth of the records done")
        _, leaders = _leaders(cluster, TOPIC)
        first = leaders[0]
        cluster.kill(first)  # a partition's leader, while records are acquired and acknowledged
        _produce(cluster.bootstrap, RECORDS // 3, 2 * RECORDS // 3, trickle=True)
        wait_for(lambda: sum(w.done() for w in workers) >= RECORDS // 2, 90, "half the records done")
        cluster.start(first)
        second = _coordinator(cluster, group)
        cluster.kill(second)  # the group's coordinator, which keeps the share state too
        _produce(cluster.bootstrap, 2 * RECORDS // 3, RECORDS, trickle=True)
        cluster.start(second)
        for w in workers:
            w.finish(200)
    finally:
        for w in workers:
            if w.proc.poll() is None:
                w.proc.kill()

    # what each record went through, per worker: deliveries (type, count), confirmations
    acks: dict[tuple[int, int], list[tuple[str, str, int]]] = defaultdict(list)
    confirmed: dict[tuple[int, int], list[tuple[str, str]]] = defaultdict(list)
    # an acknowledgement whose answer was lost with a killed leader: done or not, the client cannot
    # know (the record comes back if it was not); the late consumer below finds none left over
    unknown: dict[tuple[int, int], list[tuple[str, str]]] = defaultdict(list)
    for w in workers:
        last: dict[tuple[int, int], str] = {}
        for line in w.lines:
            parts = line.split()
            if parts[:1] == ["ACK"]:
                key = (int(parts[1]), int(parts[2]))
                acks[key].append((w.name, parts[3].lower(), int(parts[4])))
                last[key] = parts[3].lower()
            elif parts[:1] in (["DONE"], ["FAILED"]):
                key = (int(parts[1]), int(parts[2]))
                (confirmed if parts[0] == "DONE" else unknown)[key].append((w.name, last.get(key, "?")))
    expected = {(i % PARTITIONS, i // PARTITIONS): _kind(i) for i in range(RECORDS)}
    missing = [k for k, kind in expected.items()
               if not any(t == ("reject" if kind == "reject" else "accept")
                          for _w, t in [*confirmed.get(k, []), *unknown.get(k, [])])]
    assert not missing, (f"{len(missing)} records never confirmed done, e.g. "
                         f"{[(k, acks.get(k), confirmed.get(k)) for k in missing[:6]]}; "
                         f"unknown: {len(unknown)}")
    twice = {k: v for k, v in confirmed.items() if sum(t in ("accept", "reject") for _w, t in v) > 1}
    assert not twice, f"records confirmed done twice: {dict(list(twice.items())[:5])}"
    released = [k for k, kind in expected.items() if kind == "release"]
    assert all(any(t == "accept" and n >= 2 for _w, t, n in acks[k]) for k in released), \
        "a released record did not come back with its delivery count raised"
    for w in workers:
        assert w.done() > 0, f"{w.name} did no work: {w.lines[-5:]} {w.errors[-20:]}"
    print(f"records {RECORDS}; done per consumer {[(w.name, w.done()) for w in workers]}; deliveries "
          f"{sum(len(v) for v in acks.values())}, redelivered (count >= 2) "
          f"{sum(1 for v in acks.values() for _w, _t, n in v if n >= 2)}, answers lost in kills {len(unknown)}")

    late = Worker("late", [sys.executable, "-m", "tests.cluster.share_worker", cluster.bootstrap, TOPIC, group, "3",
                           "12"])
    late.finish(60)
    assert not [x for x in late.lines if x.startswith("ACK")], late.lines[:5]
