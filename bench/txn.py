"""``txn``: one confluent-kafka transactional producer committing every ``--batch`` records.

For ``--duration`` seconds: begin, produce ``--batch`` records of ``--size`` bytes over the
topic's partitions, commit; transactions/s, records/s and the commit_transaction() latency
(flush of the batch, EndTxn, the coordinator's PrepareCommit) p50/p99. Then a read_committed
consumer reads the topic back: every committed record exactly once (``missing``, ``duplicates``).
The data topic is replicated like the offsets topic (3 replicas on a 3-broker peer; every kcoord
partition is a Raft group over all its nodes).
"""

from __future__ import annotations

import time
from typing import Any

from bench.brokers import BenchError
from bench.common import CLIENT_DEFAULTS, broker_count, create_topic, run_id
from bench.report import Metric, Reporter, percentile, rnd

METRICS = [
    Metric("txns_per_s", "transactions committed per second", "", "higher"),
    Metric("records_per_s", "records committed per second", "", "higher"),
    Metric("commit_p50_ms", "commit_transaction() p50", "ms", "lower"),
    Metric("commit_p99_ms", "commit_transaction() p99", "ms", "lower"),
    Metric("init_ms", "init_transactions()", "ms", "lower"),
    Metric("transactions", "transactions committed", "", ""),
    Metric("missing", "committed records not read back (read_committed)", "", ""),
    Metric("duplicates", "records read back twice", "", ""),
]


def add_arguments(p: Any) -> None:
    p.add_argument("--batch", type=int, default=100, help="records per transaction (default 100)")
    p.add_argument("--partitions", "-p", type=int, default=3, help="partitions of the topic (default 3)")
    p.add_argument("--size", type=int, default=100, help="value size in bytes (default 100)")
    p.add_argument("--duration", "-d", type=float, default=10.0, help="seconds of committing (default 10)")


def params(args: Any) -> dict[str, Any]:
    return {"batch": args.batch, "partitions": args.partitions, "size": args.size, "duration_s": args.duration}


def metrics(args: Any) -> list[Metric]:
    return METRICS


def ok(result: dict[str, Any]) -> bool:
    return result.get("missing") == 0 and result.get("duplicates") == 0 and result.get("transactions", 0) > 0


def run_one(name: str, bootstrap: str, args: Any, rep: Reporter) -> dict[str, Any]:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    rid = run_id()
    topic = f"bench-txn-{rid}"
    create_topic(bootstrap, topic, args.partitions, replication_factor=min(3, broker_count(bootstrap)))
    producer = Producer({**CLIENT_DEFAULTS, "bootstrap.servers": bootstrap, "transactional.id": f"bench-txn-{rid}",
                         "linger.ms": 1})
    t0 = time.perf_counter()
    try:
        producer.init_transactions(30)
    except KafkaException as e:
        raise BenchError(f"{bootstrap}: init_transactions: {e}") from e
    init_ms = (time.perf_counter() - t0) * 1000
    pad = b"x" * max(args.size - 12, 0)
    commits: list[float] = []
    sent = 0
    done = 0
    with rep.phase(f"{name} txn", args.duration, lambda: done, "txns"):
        start = time.perf_counter()
        end = start + args.duration
        while time.perf_counter() < end:
            producer.begin_transaction()
            for _ in range(args.batch):
                producer.produce(topic, value=b"%012d" % sent + pad, partition=sent % args.partitions)
                sent += 1
            c0 = time.perf_counter()
            try:
                producer.commit_transaction(30)
            except KafkaException as e:
                raise BenchError(f"{bootstrap}: commit_transaction: {e}") from e
            commits.append(time.perf_counter() - c0)
            done += 1
        elapsed = time.perf_counter() - start
    producer.flush(10)
    seen = _read_committed(Consumer, TopicPartition, bootstrap, topic, args.partitions, sent)
    values = [int(v[:12]) for v in seen]
    ms = [c * 1000 for c in commits]
    result = {
        "txns_per_s": rnd(done / elapsed), "records_per_s": rnd(sent / elapsed),
        "commit_p50_ms": rnd(percentile(ms, 50)), "commit_p99_ms": rnd(percentile(ms, 99)),
        "init_ms": rnd(init_ms), "transactions": done,
        "missing": len(set(range(sent)) - set(values)), "duplicates": len(values) - len(set(values)),
    }
    return result


def _read_committed(consumer_cls: Any, tp_cls: Any, bootstrap: str, topic: str, partitions: int,
                    want: int, timeout: float = 60.0) -> list[bytes]:
    c = consumer_cls({**CLIENT_DEFAULTS, "bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                      "isolation.level": "read_committed", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest"})
    c.assign([tp_cls(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < want and time.monotonic() < deadline:
            for m in c.consume(num_messages=10_000, timeout=0.5):
                if m.error() is None:
                    got.append(m.value() or b"")
    finally:
        c.close()
    return got
