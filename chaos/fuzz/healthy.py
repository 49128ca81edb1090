"""A well-behaved confluent-kafka client group that runs beside the fuzzer: one producer
(acks=all) and one consumer in a group that commits synchronously. It records every acknowledged
produce and commit; ``verify`` then reads the topic back and the group's offsets, and lists
anything acknowledged that is missing."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

TOPIC = "fuzz-healthy"
GROUP = "fuzz-healthy-group"
PARTITIONS = 3


@dataclass
class HealthyStats:
    produced: dict[tuple[int, int], bytes] = field(default_factory=dict)  # (partition, offset) -> value
    committed: dict[int, int] = field(default_factory=dict)  # partition -> highest acknowledged commit
    consumed: int = 0
    errors: list[str] = field(default_factory=list)
    progress: list[tuple[float, int, int]] = field(default_factory=list)  # (time, produced, commits)
    commits: int = 0


class HealthyGroup:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.stats = HealthyStats()
        self.stop = threading.Event()
        self._threads = [threading.Thread(target=self._produce, daemon=True, name="healthy-producer"),
                         threading.Thread(target=self._consume, daemon=True, name="healthy-consumer")]

    def __enter__(self) -> HealthyGroup:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
        for f in futures.values():
            try:
                f.result(30)
            except Exception as e:  # noqa: BLE001 - already exists from an earlier run
                if "TOPIC_ALREADY_EXISTS" not in str(e):
                    raise
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(60)

    def _produce(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5,
                      "message.timeout.ms": 60000})
        n = 0

        def acked(err: Any, msg: Any) -> None:
            if err is None:
                self.stats.produced[(msg.partition(), msg.offset())] = msg.value()
            else:
                self.stats.errors.append(f"produce: {err}")

        while not self.stop.is_set():
            p.produce(TOPIC, value=f"v{n}".encode(), key=str(n % 17).encode(), on_delivery=acked)
            n += 1
            p.poll(0.02)
        p.flush(60)

    def _consume(self) -> None:
        from confluent_kafka import Consumer, KafkaException

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "session.timeout.ms": 10000})
        c.subscribe([TOPIC])
        since_commit = 0
        try:
            while not self.stop.is_set():
                msg = c.poll(0.2)
                if msg is not None and msg.error() is None:
                    self.stats.consumed += 1
                    since_commit += 1
                if since_commit >= 20:
                    since_commit = 0
                    try:
                        for tp in c.commit(asynchronous=False) or []:
                            if tp.error is None and tp.offset >= 0:
                                prev = self.stats.committed.get(tp.partition, -1)
                                self.stats.committed[tp.partition] = max(prev, tp.offset)
                        self.stats.commits += 1
                    except KafkaException as e:
                        self.stats.errors.append(f"commit: {e}")
                self.stats.progress.append((time.monotonic(), len(self.stats.produced), self.stats.commits))
        finally:
            c.close()

    def verify(self) -> list[str]:
        """What was acknowledged and is missing now."""
        from confluent_kafka import Consumer, TopicPartition

        problems: list[str] = []
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
        try:
            for tp in c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30):
                want = self.stats.committed.get(tp.partition, -1)
                if tp.offset < want:
                    problems.append(f"commit lost: partition {tp.partition} at {tp.offset}, acknowledged {want}")
        finally:
            c.close()
        reader = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "fuzz-verify",
                           "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        seen: dict[tuple[int, int], bytes] = {}
        try:
            ends = {p: reader.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
                    for p in range(PARTITIONS)}
            reader.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and any(
                    max([o for (p2, o) in seen if p2 == p], default=-1) + 1 < ends[p] for p in ends):
                msg = reader.poll(0.5)
                if msg is not None and msg.error() is None:
                    seen[(int(msg.partition() or 0), int(msg.offset() or 0))] = msg.value() or b""
        finally:
            reader.close()
        lost = [k for k, v in self.stats.produced.items() if seen.get(k) != v]
        if lost:
            problems.append(f"{len(lost)} of {len(self.stats.produced)} acknowledged records missing or changed, "
                            f"e.g. {sorted(lost)[:5]}")
        return problems
