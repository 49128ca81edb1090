"""Real clients, one node: 6 partitions, 1000 messages, three consumers in one group.

For each of confluent-kafka, kafka-python (producer at its default idempotence),
aiokafka and KafkaJS: every message is consumed exactly once across the group, the
committed offsets add up to 1000 after the consumers close, and a new consumer in the
same group reads nothing.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.cluster

N = 1000
PARTITIONS = 6
JS_DIR = Path(__file__).parent / "js"
ROOT = Path(__file__).resolve().parents[2]


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
        f.result(timeout=15)


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=15)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def new_consumer_reads_nothing(bootstrap: str, group: str, topic: str) -> tuple[int, int]:
    """A fresh member of the group: (messages read, partitions it was assigned)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    extra = 0
    deadline = time.time() + 30
    while not c.assignment() and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            extra += 1
    assigned = len(c.assignment())
    end = time.time() + 4
    while time.time() < end:
        m = c.poll(0.5)
        if m is not None and not m.error():
            extra += 1
    c.close()
    return extra, assigned


def check(bootstrap: str, group: str, topic: str, seen: list[tuple[int, int]]) -> None:
    assert len(seen) == len(set(seen)), "a message was consumed twice"
    assert len(set(seen)) == N, f"consumed {len(set(seen))} of {N}"
    offsets = committed_offsets(bootstrap, group, topic)
    assert sum(max(o, 0) for o in offsets.values()) == N, offsets
    extra, assigned = new_consumer_reads_nothing(bootstrap, group, topic)
    assert assigned == PARTITIONS
    assert extra == 0


def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"t-{suffix}", f"g-{suffix}"


def test_confluent_kafka_group_round_trip(bootstrap: str) -> None:
    topic, group = names()
    create_topic(bootstrap, topic)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(N):
        p.produce(topic, key=str(i).encode(), value=f"m{i}".encode())
    assert p.flush(30) == 0

    seen: list[tuple[int, int]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def run() -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.subscribe([topic])
        while not stop.is_set():
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                continue
            with lock:
                seen.append((m.partition(), m.offset()))
                if len(seen) >= N:
                    stop.set()
            c.commit(message=m, asynchronous=False)
        c.close()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    stop.wait(90)
    stop.set()
    for t in threads:
        t.join(30)
    check(bootstrap, group, topic, seen)


def test_kafka_python_group_round_trip(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic, group = names()
    create_topic(bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)  # idempotence on by default in 3.x
    futures = [producer.send(topic, key=str(i).encode(), value=f"m{i}".encode()) for i in range(N)]
    producer.flush()
    for f in futures:
        f.get(timeout=10)
    producer.close()

    seen: list[tuple[int, int]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def run() -> None:
        c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                          enable_auto_commit=False)
        while not stop.is_set():
            batch = c.poll(timeout_ms=200)
            got = [(tp.partition, m.offset) for tp, msgs in batch.items() for m in msgs]
            if got:
                with lock:
                    seen.extend(got)
                    if len(seen) >= N:
                        stop.set()
                c.commit()
        c.close()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    stop.wait(90)
    stop.set()
    for t in threads:
        t.join(30)
    check(bootstrap, group, topic, seen)


def test_aiokafka_group_round_trip(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic, group = names()
    create_topic(bootstrap, topic)
    seen: list[tuple[int, int]] = []

    async def main() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
        await p.start()
        futs = [await p.send(topic, key=str(i).encode(), value=f"m{i}".encode()) for i in range(N)]
        await asyncio.gather(*futs)
        await p.stop()
        done = asyncio.Event()

        async def run() -> None:
            c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                 auto_offset_reset="earliest", enable_auto_commit=False)
            await c.start()
            try:
                while not done.is_set():
                    batch = await c.getmany(timeout_ms=200)
                    got = [(tp.partition, m.offset) for tp, msgs in batch.items() for m in msgs]
                    if got:
                        seen.extend(got)
                        if len(seen) >= N:
                            done.set()
                        await c.commit()
            finally:
                await c.stop()

        tasks = [asyncio.create_task(run()) for _ in range(3)]
        try:
            await asyncio.wait_for(done.wait(), 90)
        finally:
            done.set()
            await asyncio.gather(*tasks)

    asyncio.run(main())
    check(bootstrap, group, topic, seen)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_kafkajs_group_round_trip(bootstrap: str) -> None:
    if not (ROOT / "node_modules" / "kafkajs").exists():
        pytest.fail("kafkajs is not installed: run `make setup` (npm install)")
    topic, group = names()
    proc = subprocess.run(["node", str(JS_DIR / "group_round_trip.js"), bootstrap, topic, group, str(N)],
                          capture_output=True, text=True, timeout=150, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    seen = [tuple(x) for x in result["seen"]]
    check(bootstrap, group, topic, seen)  # type: ignore[arg-type]
