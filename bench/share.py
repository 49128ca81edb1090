"""``share``: a share group (KIP-932) of C Kafka 4.4 Java share consumers drains M records.

The records are produced first (acks=all) to a topic of P partitions; the group is told to start
from the earliest offset (its ``share.auto.offset.reset`` config, IncrementalAlterConfigs on the
GROUP resource); then C ``KafkaShareConsumer`` processes (``bench/java/ShareBench.java``, implicit
acknowledgement: each poll accepts the previous poll's records) subscribe together. Measured:
records acknowledged per second over the whole group (M / the time from the consumers' start to
the last record counted), and the time until the first record arrives (the group formed, its
partitions assigned and loaded; Kafka assigns a new group's partitions at the heartbeat after its
share coordinator created their state, 5 s later by default), and the rate from that first record
on. ``received`` over M counts redeliveries (it should be 1.0).

kcoord needs ``group.share.enable=true`` (``--kcoord-set group.share.enable=true``); Kafka 4.4
serves share groups by default.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import kafka_peer
from bench.brokers import BenchError
from bench.common import bulk_produce, create_topic, run_id
from bench.report import Metric, Reporter, rnd

JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "ShareBench.java"
GROUP_RESOURCE, SET = 32, 0
METRICS = [
    Metric("acks_per_s", "records acknowledged/s, whole group", "", "higher"),
    Metric("steady_acks_per_s", "... from the first record on", "", "higher"),
    Metric("first_record_s", "consumers started -> first record", "s", "lower"),
    Metric("received_ratio", "records received / produced", "", ""),
]


def add_arguments(p: Any) -> None:
    p.add_argument("--consumers", "-c", type=int, default=3, help="share consumer processes (default 3)")
    p.add_argument("--partitions", "-p", type=int, default=3, help="partitions (default 3)")
    p.add_argument("--messages", "-m", type=int, default=30_000, help="records to drain (default 30,000)")
    p.add_argument("--size", type=int, default=100, help="value size in bytes (default 100)")
    p.add_argument("--replication-factor", type=int, default=1, help="of the topic (default 1)")
    p.add_argument("--timeout", type=float, default=180.0, help="give up after (s)")


def params(args: Any) -> dict[str, Any]:
    return {"consumers": args.consumers, "partitions": args.partitions, "messages": args.messages,
            "size": args.size}


def metrics(args: Any) -> list[Metric]:
    return METRICS


def ok(result: dict[str, Any]) -> bool:
    return bool(result) and result.get("received_ratio", 0) >= 1.0


def _earliest(bootstrap: str, group: str) -> None:
    """The group's share.auto.offset.reset, set to earliest before it exists."""
    from cluster.apis.common import mk, req_mod
    from cluster.peer_client import PeerClient

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    m = req_mod(44, 1)
    body = mk(m.IncrementalAlterConfigsRequest, validate_only=False, resources=(mk(
        m.AlterConfigsResource, resource_type=GROUP_RESOURCE, resource_name=group, configs=(mk(
            m.AlterableConfig, name="share.auto.offset.reset", config_operation=SET, value="earliest"),)),))

    async def ask() -> Any:
        client = PeerClient("kcoord-bench-share")
        try:
            return await client.request(host, int(port), 44, 1, body)
        finally:
            client.close()
    resp = asyncio.run(ask())
    code = int(resp.responses[0].error_code)
    if code != 0:
        raise BenchError(f"{bootstrap}: cannot set the group's share.auto.offset.reset: error {code}")


def _compile(out_dir: Path) -> str:
    """ShareBench compiled against Kafka's own jars (they hold kafka-clients); the classpath."""
    libs = str(kafka_peer.kafka_libs(kafka_peer.KAFKA_VERSION) / "*")
    javac = shutil.which("javac")
    if javac is None:
        raise BenchError("the share bench needs a JDK (javac)")
    out_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([javac, "-cp", libs, "-d", str(out_dir), str(JAVA_SOURCE)], capture_output=True,
                          text=True, timeout=300)
    if proc.returncode != 0:
        raise BenchError(f"javac: {proc.stderr[-2000:]}")
    return os.pathsep.join([str(out_dir), libs])


def run_one(name: str, bootstrap: str, args: Any, rep: Reporter) -> dict[str, Any]:
    rid = run_id()
    topic, group = f"share-bench-{rid}", f"share-bench-{rid}"
    create_topic(bootstrap, topic, args.partitions, replication_factor=args.replication_factor)
    _earliest(bootstrap, group)
    value = b"x" * args.size
    bulk_produce(bootstrap, topic, args.messages, lambda i: {"value": value, "partition": i % args.partitions}, rep,
                 f"{name}: produce")
    classes = Path(tempfile.mkdtemp(prefix="kcoord-bench-share-"))
    try:
        return _drain(name, bootstrap, topic, group, _compile(classes), args, rep)
    finally:
        shutil.rmtree(classes, ignore_errors=True)


def _drain(name: str, bootstrap: str, topic: str, group: str, cp: str, args: Any, rep: Reporter) -> dict[str, Any]:
    counts = [0] * args.consumers
    first: list[float] = []

    def read(i: int, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("COUNT "):
                counts[i] = int(line.split()[1])
                if counts[i] and not first:
                    first.append(time.monotonic())

    start = time.monotonic()
    procs = [subprocess.Popen(["java", "-cp", cp, "ShareBench", bootstrap, topic, group, "5", str(int(args.timeout))],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for _ in range(args.consumers)]
    readers = [threading.Thread(target=read, args=(i, p), daemon=True) for i, p in enumerate(procs)]
    for t in readers:
        t.start()
    done_at = None
    try:
        with rep.phase(f"{name}: drain", None, lambda: sum(counts), "records"):
            while time.monotonic() - start < args.timeout:
                if sum(counts) >= args.messages:
                    done_at = time.monotonic()
                    break
                time.sleep(0.02)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
    if done_at is None or not first:
        raise BenchError(f"{name}: {sum(counts)} of {args.messages} records received in {args.timeout}s")
    return {"acks_per_s": rnd(args.messages / (done_at - start)),
            "steady_acks_per_s": rnd(args.messages / max(done_at - first[0], 1e-3)),
            "first_record_s": rnd(first[0] - start),
            "received_ratio": rnd(sum(counts) / args.messages)}
