"""``kcoord bench compaction --start-cluster``: how fast the nodes compact, and what compacting
costs the clients meanwhile.

A 3-node cluster gets a compacted topic filled with ``--data-mb`` of updates of ``--keys`` keys,
its segments rolled by ``segment.ms``, while a ``min.compaction.lag.ms`` of an hour keeps the
cleaner off it. Then, for ``--duration`` seconds each, a load runs twice: synchronous offset
commits (``--committers`` clients) and a produce every 10 ms (acks=all) to a topic of its own,
first with nothing to compact, then right after the topic's lag is altered to 0, so that every
node's cleaner compacts it meanwhile. The figures: each phase's commit and produce latencies, and
the compaction's rate (bytes read and cleaned per second of pass, from the nodes'
``event=log_compacted`` lines) and what it left.
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any

from bench.brokers import BenchError
from bench.cluster3 import LocalCluster, _ClusterScenario, _Committer
from bench.common import bulk_produce, create_topic, run_id
from bench.report import Metric, Reporter, percentile, rnd

COMPACTED = re.compile(r"event=log_compacted .*records_in=(\d+) records_out=(\d+) bytes_in=(\d+) bytes_out=(\d+) "
                       r"took_ms=(\d+)")
PRODUCE_EVERY_S = 0.01


class _Producing(threading.Thread):
    """A produce every ``PRODUCE_EVERY_S`` (acks=all), each acknowledgement's latency kept."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.latencies: list[float] = []
        self.errors = 0
        self.stop_ev = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 0})

        def acked(sent: float) -> Any:
            def done(err: Any, _msg: Any) -> None:
                if err is None:
                    self.latencies.append(time.monotonic() - sent)
                else:
                    self.errors += 1
            return done

        while not self.stop_ev.is_set():
            sent = time.monotonic()
            p.produce(self.topic, b"x" * 100, on_delivery=acked(sent))
            p.poll(0)
            time.sleep(max(0.0, sent + PRODUCE_EVERY_S - time.monotonic()))
        p.flush(30)


def _latencies(c: _Committer) -> list[float]:
    return [t - c.sent[seq] for t, seq in c.acks if seq in c.sent]


class Compaction(_ClusterScenario):
    NAME = "compaction"

    @classmethod
    def add_arguments(cls, p: Any) -> None:
        super().add_arguments(p)
        p.add_argument("--data-mb", type=int, default=200, help="MB of updates in the compacted topic (default 200)")
        p.add_argument("--keys", type=int, default=10_000, help="distinct keys (default 10000)")
        p.add_argument("--record-bytes", type=int, default=1000, help="value size (default 1000)")
        p.add_argument("--partitions", type=int, default=3, help="partitions of the compacted topic (default 3)")
        p.add_argument("--committers", type=int, default=2, help="clients committing synchronously (default 2)")
        p.add_argument("--duration", "-d", type=float, default=20.0, help="seconds of load per phase (default 20)")

    @classmethod
    def params(cls, args: Any) -> dict[str, Any]:
        return {"data_mb": args.data_mb, "keys": args.keys, "record_bytes": args.record_bytes,
                "duration": args.duration}

    @classmethod
    def metrics(cls, args: Any) -> list[Metric]:
        out = [Metric("compact_mb_per_s", "compaction: MB read and cleaned per second of pass", "MB/s", "higher"),
               Metric("compacted_mb_left", "compacted topic after, per replica", "MB", ""),
               Metric("passes", "passes that changed something, all nodes", "", "")]
        for phase in ("steady", "compacting"):
            out += [Metric(f"{phase}_commit_p50_ms", f"{phase}: sync commit p50", "ms", "lower"),
                    Metric(f"{phase}_commit_p99_ms", f"{phase}: sync commit p99", "ms", "lower"),
                    Metric(f"{phase}_commits_per_s", f"{phase}: commits/s", "/s", "higher"),
                    Metric(f"{phase}_produce_p50_ms", f"{phase}: produce p50 (acks=all)", "ms", "lower"),
                    Metric(f"{phase}_produce_p99_ms", f"{phase}: produce p99 (acks=all)", "ms", "lower")]
        return out

    @classmethod
    def ok(cls, result: dict[str, Any]) -> bool:
        return bool(result.get("passes")) and not result.get("errors")

    @classmethod
    def run_cluster(cls, args: Any, rep: Reporter) -> dict[str, Any]:
        # a cleaner round every second, not Kafka's 15 s: the pass starts early in the phase
        args.kcoord_set = ["log.cleaner.backoff.ms=1000", *args.kcoord_set]
        return super().run_cluster(args, rep)

    @classmethod
    def drive(cls, cluster: LocalCluster, args: Any, rep: Reporter) -> dict[str, Any]:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # type: ignore[attr-defined]

        rid = run_id()
        bootstrap = cluster.bootstrap
        compacted, other, offsets_topic = f"bench-compacted-{rid}", f"bench-produce-{rid}", f"bench-commit-{rid}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        configs = {"cleanup.policy": "compact", "segment.ms": "1000", "min.cleanable.dirty.ratio": "0.1",
                   "min.compaction.lag.ms": "3600000"}
        for f in admin.create_topics([NewTopic(compacted, args.partitions, 3, config=configs)]).values():
            f.result(timeout=30)
        create_topic(bootstrap, other, 1, replication_factor=3)
        create_topic(bootstrap, offsets_topic, 1, replication_factor=3)
        value = os.urandom(args.record_bytes)
        records = args.data_mb * (1 << 20) // (args.record_bytes + 30)
        bulk_produce(bootstrap, compacted, records, lambda i: {"value": value, "key": b"key-%d" % (i % args.keys)},
                     rep, f"fill {args.data_mb} MB of updates of {args.keys} keys")
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        time.sleep(1.5)  # past segment.ms: the next produce rolls the last segment of each partition
        for p in range(args.partitions):
            producer.produce(compacted, b"tail", key=b"tail", partition=p)
        producer.flush(30)

        result: dict[str, Any] = {"errors": 0}
        for phase in ("steady", "compacting"):
            if phase == "compacting":  # the cleaner may take it from its next round on
                res = ConfigResource("topic", compacted, set_config={**configs, "min.compaction.lag.ms": "0"})
                admin.alter_configs([res])[res].result(timeout=30)
            committers = [_Committer(bootstrap, f"bench-c-{rid}-{phase}-{i}", offsets_topic)
                          for i in range(args.committers)]
            producing = _Producing(bootstrap, other)
            threads: list[Any] = [*committers, producing]
            with rep.phase(f"{phase}: load for {args.duration:.0f}s", args.duration):
                for t in threads:
                    t.start()
                time.sleep(args.duration)
                for t in threads:
                    t.stop_ev.set()
                for t in threads:
                    t.join(60)
            commits = [x for c in committers for x in _latencies(c)]
            result[f"{phase}_commit_p50_ms"] = rnd((percentile(commits, 50) or 0) * 1000, 2)
            result[f"{phase}_commit_p99_ms"] = rnd((percentile(commits, 99) or 0) * 1000, 2)
            result[f"{phase}_commits_per_s"] = rnd(len(commits) / args.duration, 1)
            result[f"{phase}_produce_p50_ms"] = rnd((percentile(producing.latencies, 50) or 0) * 1000, 2)
            result[f"{phase}_produce_p99_ms"] = rnd((percentile(producing.latencies, 99) or 0) * 1000, 2)
            result["errors"] += producing.errors + sum(len(c.errors) for c in committers)
            failures = [c.failure for c in committers if c.failure]
            if failures:
                raise BenchError(f"a committer failed: {failures[0]}")

        passes = [tuple(int(x) for x in m.groups()) for i in range(3)
                  for m in COMPACTED.finditer(cluster.log_text(i))]
        cleaned = [p for p in passes if p[2]]
        took = sum(p[4] for p in cleaned) / 1000
        result["passes"] = len([p for p in cleaned if p[0] != p[1]])
        result["compact_mb_per_s"] = rnd(sum(p[2] for p in cleaned) / (1 << 20) / took, 1) if took else None
        result["compacted_mb_left"] = rnd(sum(
            f.stat().st_size for f in (cluster.layout[0].data_dir / "topics").rglob("*.log")
            if compacted in str(f)) / (1 << 20), 1)
        return result
