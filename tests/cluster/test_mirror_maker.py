"""MirrorMaker 2 (``connect-mirror`` 4.3.1, dedicated mode) from one 3-node kcoord cluster to
another: the remote topic gets every partition and every record of the source topic, a partition
added on the source is added to the remote topic (CreatePartitions on the target), and a config
changed on the source is synced to it (DescribeConfigs on the source, IncrementalAlterConfigs on
the target). MirrorMaker creates remote topics from the source topic's configs, so without those
APIs it mirrored one partition of three."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.cluster_harness import Cluster, report_apis, wait_for
from tests.cluster.java_client import maven_classpath

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

MIRROR = [("org.apache.kafka", "connect-mirror", "4.3.1"), ("org.apache.kafka", "connect-runtime", "4.3.1"),
          ("org.slf4j", "slf4j-simple", "1.7.36")]




def _partitions(bootstrap: str, topic: str) -> int:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=5)
    t = md.topics[topic]
    return 0 if t.error is not None else len(t.partitions)


def _records(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "counter"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                   for p in range(_partitions(bootstrap, topic)))
    finally:
        c.close()


def _config(bootstrap: str, topic: str, key: str) -> str | None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([res])[res].result(10)[key].value  # type: ignore[no-any-return]


def _wait_for(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    wait_for(cond, timeout, what, every=1.0, tolerate=(Exception,))


def test_mirror_maker_2_mirrors_a_topic_its_partitions_and_its_configs(tmp_path: Path) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,  # type: ignore[attr-defined]
    )

    cp = maven_classpath("connect-mirror-4.3.1", MIRROR)
    source = Cluster(tmp_path / "source", settings={"group.initial.rebalance.delay.ms": 0}, metrics=True).start()
    target = Cluster(tmp_path / "target", settings={"group.initial.rebalance.delay.ms": 0}, metrics=True).start()
    mm: subprocess.Popen[Any] | None = None
    log = tmp_path / "mm2.log"
    try:
        admin = AdminClient({"bootstrap.servers": source.bootstrap})
        admin.create_topics([NewTopic("orders", 3, 3, config={"retention.ms": "86400000"})])["orders"].result(20)
        p = Producer({"bootstrap.servers": source.bootstrap, "acks": "all"})
        for i in range(3000):
            p.produce("orders", value=b"o-%d" % i, partition=i % 3)
        assert p.flush(30) == 0
        props = tmp_path / "mm2.properties"
        props.write_text("\n".join([
            "clusters=A,B", f"A.bootstrap.servers={source.bootstrap}", f"B.bootstrap.servers={target.bootstrap}",
            "A->B.enabled=true", "A->B.topics=orders", "B->A.enabled=false", "replication.factor=3",
            "checkpoints.topic.replication.factor=3", "heartbeats.topic.replication.factor=3",
            "offset-syncs.topic.replication.factor=3", "offset.storage.replication.factor=3",
            "status.storage.replication.factor=3", "config.storage.replication.factor=3",
            "refresh.topics.interval.seconds=2", "sync.topic.configs.interval.seconds=2",
            "emit.checkpoints.interval.seconds=2"]) + "\n")
        mm = subprocess.Popen(["java", "-cp", cp, "org.apache.kafka.connect.mirror.MirrorMaker", str(props)],
                              stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)  # noqa: SIM115
        _wait_for(lambda: _partitions(target.bootstrap, "A.orders") == 3 and _records(target.bootstrap, "A.orders")
                  == 3000, 180, "every partition and record mirrored")
        assert _config(target.bootstrap, "A.orders", "retention.ms") == "86400000"
        # a partition added and a config changed on the source reach the remote topic
        admin.create_partitions([NewPartitions("orders", 4)])["orders"].result(20)
        res = ConfigResource(ConfigResource.Type.TOPIC, "orders", incremental_configs=[
            ConfigEntry("retention.ms", "43200000", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(20)
        _wait_for(lambda: _partitions(target.bootstrap, "A.orders") == 4, 120, "the new partition mirrored")
        _wait_for(lambda: _config(target.bootstrap, "A.orders", "retention.ms") == "43200000", 120,
                  "the config change synced")
        late = Producer({"bootstrap.servers": source.bootstrap, "acks": "all"})  # it knows the fourth partition
        late.produce("orders", value=b"late", partition=3)
        assert late.flush(30) == 0
        _wait_for(lambda: _records(target.bootstrap, "A.orders") == 3001, 60, "a record of the new partition")
    except AssertionError:
        print(log.read_text(errors="replace")[-6000:] if log.exists() else "(no MirrorMaker log)")
        raise
    finally:
        if mm is not None and mm.poll() is None:
            os.killpg(mm.pid, signal.SIGKILL)
        report_apis(source, "source")
        source.kill_all()
        report_apis(target, "target")
        target.kill_all()
