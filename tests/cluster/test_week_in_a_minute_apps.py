"""A week of compaction and retention in a few minutes, with the real applications: on a 3-node
cluster whose node settings shrink Kafka's time scales (``test_week_in_a_minute.WEEK``: segments
roll after 300 ms, deletes and markers live 1.5 s, time retention is 3 s), a Kafka Streams 4.4
exactly-once word count (its changelog created by Streams, compact) and a Kafka Connect worker
(its config, offset and status topics created by Connect, compact; connectors created,
reconfigured and deleted) run while the cleaner and retention pass hundreds of times. Then the
worker stops, the application is killed, every kcoord node is killed and started again, and
both come back from what compaction left: Streams restores its counts from the changelog into an
empty state directory and goes on counting exactly; the worker finds its two connectors (not the
deleted one) and resumes from its stored offset, no line lost or repeated.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cluster.tools.local_cluster import free_port
from tests.cluster import test_kafka_connect as connect
from tests.cluster import test_kafka_streams as streams
from tests.cluster.cluster_harness import Cluster, report_apis
from tests.cluster.java_client import SLF4J_VERSION, compile_program, maven_classpath
from tests.cluster.test_week_in_a_minute import PASS, WEEK

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FOREVER = {"retention.ms": "-1"}  # the input and output topics: only the applications' own are under test


def _connector(port: int, name: str, config: dict[str, str]) -> None:
    connect._rest(port, "/connectors", {"name": name, "config": config})


def test_streams_and_connect_come_back_from_a_week_of_compaction(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    streams_cp = maven_classpath(f"kafka-streams-{streams.STREAMS_VERSION}", [
        ("org.apache.kafka", "kafka-streams", streams.STREAMS_VERSION), ("org.slf4j", "slf4j-nop", SLF4J_VERSION)])
    app_cp = compile_program(ROOT / "tests/cluster/java/StreamsWordCount.java", tmp_path / "classes", streams_cp)
    connect_cp = maven_classpath("connect-4.3.1", connect.CONNECT)
    cluster = Cluster(tmp_path / "cluster", settings=WEEK, metrics=True).start()
    port = free_port()
    props = connect._worker(tmp_path, "worker", cluster.bootstrap, port, "week")
    app_log, worker_log = tmp_path / "streams.log", tmp_path / "worker.log"
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    app: subprocess.Popen[Any] | None = None
    worker: subprocess.Popen[Any] | None = None
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for name in ("words-in", "counts-out", "week-lines"):
            admin.create_topics([NewTopic(name, 3, 3, config=FOREVER)])[name].result(20)
        source.write_text("")
        app = streams._start(app_cp, cluster.bootstrap, tmp_path / "state-1", app_log)
        worker = connect._start(connect_cp, props, worker_log)
        connect._wait_for(lambda: connect._rest(port, "/connectors") == [], 120, "the worker's REST API")
        file_source = {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                       "tasks.max": "1", "file": str(source), "topic": "week-lines"}
        _connector(port, "src", file_source)
        _connector(port, "snk", {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                                 "tasks.max": "1", "file": str(sink), "topics": "week-lines"})
        sent: Counter[str] = Counter()
        lines = 0
        started = time.monotonic()
        for r in range(12):  # about a minute: weeks at this scale
            sent += streams._produce(cluster.bootstrap, r * 100, 100)
            with source.open("a") as f:
                f.write("".join(f"line-{i}\n" for i in range(lines, lines + 100)))
            lines += 100
            if r % 4 == 1:  # a connector created, then deleted: a tombstone in the config topic
                _connector(port, f"gone-{r}", {**file_source, "file": str(tmp_path / f"none-{r}.txt"),
                                               "topic": "week-gone"})
            if r % 4 == 3:
                connect._rest(port, f"/connectors/gone-{r - 2}", method="DELETE")
            if r % 3 == 2:  # a reconfiguration: a new config record for the same connector
                connect._rest(port, "/connectors/src/config", {**file_source, "batch.size": str(1000 + r)}, method="PUT")
            time.sleep(4)
        connect._wait_for(lambda: len(connect._lines(sink)) >= lines, 120, "every line copied")
        streams._wait_for(lambda: {w: max(v) for w, v in streams._counts(cluster.bootstrap).items()} == dict(sent),
                          120, "every word counted")
        passes = [len(PASS.findall(cluster.log_text(i))) for i in range(3)]
        print(f"{time.monotonic() - started:.0f} s of load, compaction passes per node {passes}")
        assert min(passes) >= 50, passes
        time.sleep(2)  # past an offset flush
        connect._stop(worker)  # a clean stop: its offset is stored
        connect._stop(app, signal.SIGKILL)
        cluster.kill_all()  # every node, with no clean stop
        cluster.start()
        with source.open("a") as f:
            f.write("".join(f"line-{i}\n" for i in range(lines, lines + 100)))
        lines += 100
        app = streams._start(app_cp, cluster.bootstrap, tmp_path / "state-2", app_log)  # restores its counts
        worker = connect._start(connect_cp, props, worker_log)  # its connectors come back from the config topic
        sent += streams._produce(cluster.bootstrap, 10_000, 200)
        streams._wait_for(lambda: {w: max(v) for w, v in streams._counts(cluster.bootstrap).items()} == dict(sent),
                          180, "every word counted once per input after the restart")
        counts = streams._counts(cluster.bootstrap)
        for word, n in sent.items():
            assert counts[word] == list(range(1, n + 1)), (word, counts[word][:20], n)
        connect._wait_for(lambda: len(connect._lines(sink)) >= lines, 120, "the lines after the restart copied")
        time.sleep(2)
        assert connect._lines(sink) == [f"line-{i}" for i in range(lines)]  # none lost, none repeated
        assert sorted(connect._rest(port, "/connectors")) == ["snk", "src"]
        assert connect._rest(port, "/connectors/src/config")["batch.size"] == "1011"  # its last configuration
    except AssertionError:
        for log in (app_log, worker_log):
            print(log.read_text(errors="replace")[-4000:] if log.exists() else f"(no {log.name})")
        raise
    finally:
        connect._stop(worker, signal.SIGKILL)
        connect._stop(app, signal.SIGKILL)
        report_apis(cluster)
        cluster.kill_all()
