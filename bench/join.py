"""``kcoord bench join --start-cluster``: how long a new node takes to catch up and count.

A 3-node cluster is filled with ``--data-mb`` of records in one topic and ``--offsets`` committed
offsets (groups spread over every ``__consumer_offsets`` partition, each committing all the
topic's partitions in one request, sent to its coordinator); then a fourth node joins
(``join = true``) and the figure is the time from its start to its ``event=node_promoted`` line:
it has been added, received every group's log or snapshot as a learner and been promoted in all
of them. Its data directory's size after is reported too.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import time
from pathlib import Path
from typing import Any

from bench.brokers import BenchError
from bench.cluster3 import LocalCluster, _ClusterScenario, _fill, _settings
from bench.common import bulk_produce, create_topic, run_id
from bench.report import Metric, Reporter, rnd
from coordinator.partitioner import partition_for

PROMOTED = re.compile(r"event=node_promoted node=\d+ groups=(\d+) after_s=([0-9.]+)")


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class Join(_ClusterScenario):
    NAME = "join"

    @classmethod
    def add_arguments(cls, p: Any) -> None:
        super().add_arguments(p)
        p.add_argument("--data-mb", type=int, default=1024, help="MB of records in the topic (default 1024)")
        p.add_argument("--offsets", type=int, default=1_000_000, help="committed offsets (default 1000000)")
        p.add_argument("--partitions", type=int, default=12, help="partitions of the topic (default 12)")
        p.add_argument("--record-kb", type=int, default=16, help="record size in KB (default 16)")
        p.add_argument("--connections", type=int, default=16, help="connections committing, per node (default 16)")
        p.add_argument("--timeout", type=float, default=1800.0, help="max seconds for the join (default 1800)")

    @classmethod
    def params(cls, args: Any) -> dict[str, Any]:
        return {"data_mb": args.data_mb, "offsets": args.offsets, "partitions": args.partitions}

    @classmethod
    def metrics(cls, args: Any) -> list[Metric]:
        return [Metric("produce_mb_per_s", "fill: produce rate (acks=all)", "MB/s", "higher"),
                Metric("commit_per_s", "fill: offsets committed per second", "offsets/s", "higher"),
                Metric("join_to_promoted_s", "new node: start -> voter in every group", "s", "lower"),
                Metric("groups", "Raft groups it joined", "", ""),
                Metric("new_node_mb", "its data directory after", "MB", "")]

    @classmethod
    def ok(cls, result: dict[str, Any]) -> bool:
        return result.get("join_to_promoted_s") is not None

    @classmethod
    def run_cluster(cls, args: Any, rep: Reporter) -> dict[str, Any]:
        if args.bootstrap or args.start_kcoord or args.peer or args.start_peer:
            raise BenchError("--start-cluster cannot be combined with --bootstrap/--start-kcoord/--peer")
        cluster = LocalCluster(_settings(args), nodes=4, keep=args.keep)
        cluster.joining = {3}
        rep.note(f"starting a 3-node cluster in {cluster.dir} (a fourth joins later)")
        try:
            cluster.start(0, 1, 2)
            result = cls.drive(cluster, args, rep)
            if args.keep:
                result["cluster_dir"] = str(cluster.dir)
            return result
        finally:
            cluster.stop()

    @classmethod
    def drive(cls, cluster: LocalCluster, args: Any, rep: Reporter) -> dict[str, Any]:
        rid = run_id()
        topic = f"bench-join-{rid}"
        bootstrap = ",".join(f"127.0.0.1:{cluster.layout[i].kafka_port}" for i in range(3))
        create_topic(bootstrap, topic, args.partitions)
        record = os.urandom(args.record_kb * 1024)
        records = args.data_mb * 1024 // args.record_kb
        t0 = time.monotonic()
        bulk_produce(bootstrap, topic, records, lambda i: {"value": record, "partition": i % args.partitions}, rep,
                     f"produce {args.data_mb} MB")
        produce_s = time.monotonic() - t0

        leaders = cluster.agreed_leaders()
        if leaders is None:
            raise BenchError("no agreed leaders of __consumer_offsets")
        groups = [f"J{rid}-{i}" for i in range(math.ceil(args.offsets / args.partitions))]
        by_node: dict[int, list[str]] = {}
        for g in groups:
            by_node.setdefault(leaders[partition_for(g, len(leaders))], []).append(g)
        done = [0]
        errors: dict[int, int] = {}
        t1 = time.monotonic()
        with rep.phase(f"commit {len(groups) * args.partitions:,} offsets", None, lambda: done[0], "groups"):
            async def fill_all() -> None:
                await asyncio.gather(*(_fill(cluster.addr(n), gs, topic, args.connections, done, errors,
                                             args.partitions) for n, gs in by_node.items()))

            asyncio.run(fill_all())
        commit_s = time.monotonic() - t1
        if errors:
            raise BenchError(f"commits failed: error codes {errors}")

        t2 = time.monotonic()
        with rep.phase("node 3 joins", args.timeout):
            cluster.start(3)
            found = None
            while found is None and time.monotonic() - t2 < args.timeout:
                found = PROMOTED.search(cluster.log_text(3))
                time.sleep(0.5)
        if found is None:
            raise BenchError(f"node 3 not promoted everywhere in {args.timeout:.0f}s")
        return {"produce_mb_per_s": rnd(args.data_mb / produce_s, 1),
                "commit_per_s": rnd(len(groups) * args.partitions / commit_s, 0),
                "join_to_promoted_s": rnd(float(found.group(2)), 1), "groups": int(found.group(1)),
                "wall_to_promoted_s": rnd(time.monotonic() - t2, 1),
                "new_node_mb": rnd(_dir_bytes(cluster.layout[3].data_dir) / 1e6, 0),
                "old_node_mb": rnd(_dir_bytes(cluster.layout[0].data_dir) / 1e6, 0)}
