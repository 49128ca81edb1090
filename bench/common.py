"""Helpers shared by the scenarios: topics, client configs, process start-up."""

from __future__ import annotations

import multiprocessing
import time
import uuid
from collections.abc import Callable
from typing import Any

from bench.brokers import BenchError

CLIENT_DEFAULTS: dict[str, Any] = {"socket.nagle.disable": True}


def host_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of the whole host, all CPUs, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v) - idle, sum(v)


def mp_context() -> Any:
    # spawn, never fork: the parent may already hold librdkafka threads.
    return multiprocessing.get_context("spawn")


def run_id() -> str:
    return uuid.uuid4().hex[:8]


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0,
                 replication_factor: int = 1, client_config: dict[str, str] | None = None) -> None:
    """Create ``topic`` and wait until the metadata shows every partition with a leader."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({**(client_config or {}), "bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor)],
                                  operation_timeout=timeout)
    for f in futures.values():
        try:
            f.result(timeout=timeout)
        except Exception as e:  # noqa: BLE001 - any client error ends the run with its text
            raise BenchError(f"{bootstrap}: cannot create topic {topic}: {e}") from e
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=topic, timeout=5)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions \
                and all(p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.1)
    raise BenchError(f"{bootstrap}: topic {topic} has no leaders for all {partitions} partitions after {timeout}s")


def client_config(items: list[str] | None) -> dict[str, str]:
    """``KEY=VALUE`` librdkafka settings (security.protocol, ssl.ca.location, sasl.*, ...)."""
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BenchError(f"client setting {item!r} is not KEY=VALUE")
        out[key.strip()] = value
    return out


def broker_count(bootstrap: str, timeout: float = 10.0) -> int:
    from confluent_kafka.admin import AdminClient

    try:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=timeout)
    except Exception as e:  # noqa: BLE001
        raise BenchError(f"{bootstrap}: no metadata: {e}") from e
    return len(md.brokers)


def bulk_produce(bootstrap: str, topic: str, count: int, record: Callable[[int], dict[str, Any]], rep: Any,
                 title: str) -> None:
    """Produce ``count`` records (acks=all, large batches) as fast as the cluster takes them,
    ``record(i)`` the i-th record's ``produce`` arguments; BenchError unless every one is acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                         "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 18})
    acked = [0]

    def delivered(err: Any, _msg: Any) -> None:
        if err is None:
            acked[0] += 1

    with rep.phase(title, None, lambda: acked[0], "records"):
        for i in range(count):
            while True:
                try:
                    producer.produce(topic, on_delivery=delivered, **record(i))
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
        producer.flush(600)
    if acked[0] != count:
        raise BenchError(f"{count - acked[0]} of {count} records not acknowledged")
