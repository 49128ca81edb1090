"""Kafka Connect 4.3.1 in distributed mode (``connect-runtime`` with ``connect-file``'s file
connectors) on a 3-node cluster: a worker forms its group, keeps its connectors in its config
topic and copies a file through a topic exactly, resumes from its stored offsets after a restart
with no line repeated, and keeps copying while a kcoord node is killed; a worker whose config topic
is not compacted refuses to start, as Kafka's does (it reads the topic's cleanup.policy through
DescribeConfigs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from cluster.tools.local_cluster import free_port
from tests.cluster.cluster_harness import Cluster, report_apis, wait_for
from tests.cluster.java_client import maven_classpath

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# connect-file is served up to 4.3.1, and its connectors name a class kafka-clients 4.4 moved:
# the runtime of the same release
CONNECT = [("org.apache.kafka", "connect-runtime", "4.3.1"), ("org.apache.kafka", "connect-file", "4.3.1"),
           ("org.slf4j", "slf4j-simple", "1.7.36")]


def _worker(tmp: Path, name: str, bootstrap: str, port: int, group: str) -> Path:
    props = tmp / f"{name}.properties"
    props.write_text("\n".join([
        f"bootstrap.servers={bootstrap}", f"group.id={group}",
        f"config.storage.topic={group}-configs", f"offset.storage.topic={group}-offsets",
        f"status.storage.topic={group}-status",
        "config.storage.replication.factor=3", "offset.storage.replication.factor=3",
        "status.storage.replication.factor=3",
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        "value.converter=org.apache.kafka.connect.storage.StringConverter",
        f"listeners=http://127.0.0.1:{port}", "offset.flush.interval.ms=500"]) + "\n")
    return props


def _start(cp: str, props: Path, log: Path) -> subprocess.Popen[Any]:
    return subprocess.Popen(["java", "-cp", cp, "org.apache.kafka.connect.cli.ConnectDistributed", str(props)],
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)  # noqa: SIM115


def _rest(port: int, path: str, body: dict[str, Any] | None = None, method: str | None = None) -> Any:
    method = method or ("POST" if body is not None else "GET")
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310 - our own worker on loopback
        return json.loads(r.read() or b"null")




def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _stop(proc: subprocess.Popen[Any] | None, sig: int = signal.SIGTERM) -> None:
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _wait_for(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    wait_for(cond, timeout, what, every=0.5, tolerate=(OSError,))


def test_a_connect_worker_copies_a_file_exactly_through_restarts_and_a_node_kill(tmp_path: Path) -> None:
    cp = maven_classpath("connect-4.3.1", CONNECT)
    cluster = Cluster(tmp_path / "cluster", settings={"group.initial.rebalance.delay.ms": 0}, metrics=True).start()
    port = free_port()
    props = _worker(tmp_path, "worker", cluster.bootstrap, port, "connect-a")
    log = tmp_path / "worker.log"
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    worker: subprocess.Popen[Any] | None = None
    try:
        source.write_text("".join(f"line-{i}\n" for i in range(1000)))
        worker = _start(cp, props, log)
        _wait_for(lambda: _rest(port, "/connectors") == [], 120, "the worker's REST API")
        _rest(port, "/connectors", {"name": "src", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max": "1",
            "file": str(source), "topic": "connect-lines"}})
        _rest(port, "/connectors", {"name": "snk", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "tasks.max": "1",
            "file": str(sink), "topics": "connect-lines"}})
        _wait_for(lambda: len(_lines(sink)) >= 1000, 120, "the first 1000 lines copied")
        time.sleep(2)  # past an offset flush
        _stop(worker)  # a clean stop: the source's offset is stored
        with source.open("a") as f:
            f.write("".join(f"line-{i}\n" for i in range(1000, 1500)))
        worker = _start(cp, props, log)  # its connectors come back from the config topic
        _wait_for(lambda: len(_lines(sink)) >= 1500, 120, "the next 500 lines copied after the restart")
        cluster.kill(1)  # a kcoord node goes; the worker keeps copying
        with source.open("a") as f:
            f.write("".join(f"line-{i}\n" for i in range(1500, 2000)))
        _wait_for(lambda: len(_lines(sink)) >= 2000, 120, "the last 500 lines copied with a node down")
        time.sleep(2)
        assert _lines(sink) == [f"line-{i}" for i in range(2000)]  # in order, none lost, none repeated
        assert sorted(_rest(port, "/connectors")) == ["snk", "src"]
    except AssertionError:
        print(log.read_text(errors="replace")[-6000:] if log.exists() else "(no worker log)")
        raise
    finally:
        _stop(worker, signal.SIGKILL)
        report_apis(cluster)
        cluster.kill_all()


def test_a_worker_refuses_a_config_topic_that_is_not_compacted(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    cp = maven_classpath("connect-4.3.1", CONNECT)
    cluster = Cluster(tmp_path / "cluster", settings={"group.initial.rebalance.delay.ms": 0}, metrics=True).start()
    port = free_port()
    props = _worker(tmp_path, "worker", cluster.bootstrap, port, "connect-b")
    log = tmp_path / "worker.log"
    worker: subprocess.Popen[Any] | None = None
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("connect-b-configs", 1, 3, config={"cleanup.policy": "delete"})])[
            "connect-b-configs"].result(20)
        worker = _start(cp, props, log)
        # the herder gives up ("exiting"); the process then takes Connect's own time to stop (its
        # REST server's graceful stop alone may wait 60 s), which is not what this test is about
        _wait_for(lambda: worker.poll() is not None or "Uncaught exception in herder work thread, exiting"
                  in log.read_text(errors="replace"), 120, "the worker to refuse its config topic")
        text = log.read_text(errors="replace")
        assert worker.poll() in (None, *range(1, 256)), worker.returncode  # not a clean exit
        assert "'connect-b-configs'" in text and "required to have 'cleanup.policy=compact'" in text, text[-4000:]
    finally:
        _stop(worker, signal.SIGKILL)
        report_apis(cluster)
        cluster.kill_all()
