"""The Prometheus endpoint of a node: a rebalance and commits with real consumers, then a scrape."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.cluster_harness import Samples, scrape
from tests.cluster.harness import NodeProcess, free_port

pytestmark = pytest.mark.cluster


@pytest.fixture
def metered(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[NodeProcess, int]]:
    port = free_port()
    n = NodeProcess(tmp_path, settings={"group.initial.rebalance.delay.ms": 0, "metrics_port": port}).start()
    yield n, port
    n.kill()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print(f"--- node log ---\n{n.log_text()[-5000:]}")


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum over all label sets that include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def test_metrics_endpoint_after_a_rebalance_and_commits(metered: tuple[NodeProcess, int]) -> None:
    node, port = metered
    bs = node.bootstrap
    before = scrape(port)
    assert value(before, "kcoord_groups", state="Stable") == 0
    assert total(before, "kcoord_shard_load_seconds_count") >= 1  # shards were loaded at start

    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)]).values():
        f.result(timeout=15)
    group = f"g-{uuid.uuid4().hex[:8]}"

    def consumer() -> Consumer:
        c = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "session.timeout.ms": 10000, "heartbeat.interval.ms": 300})
        c.subscribe([topic])
        return c

    def stable(members: int) -> bool:
        d = admin.describe_consumer_groups([group])[group].result(timeout=15)
        return str(d.state.name) == "STABLE" and len(d.members) == members

    cs = [consumer()]
    try:
        deadline = time.time() + 30
        while not stable(1):
            assert time.time() < deadline
            cs[0].poll(0.2)
        cs.append(consumer())  # the second member forces a second rebalance
        deadline = time.time() + 30
        while not (stable(2) and all(c.assignment() for c in cs)):
            assert time.time() < deadline
            for c in cs:
                c.poll(0.2)
        for i, c in enumerate(cs):
            for _ in range(3):
                c.commit(offsets=[TopicPartition(tp.topic, tp.partition, i + 1) for tp in c.assignment()],
                         asynchronous=False)

        s = scrape(port)
        assert value(s, "kcoord_groups", state="Stable") >= 1
        assert value(s, "kcoord_group_members") >= 2
        assert value(s, "kcoord_coordinator_shards", state="active") >= 1
        assert value(s, "kcoord_rebalances_total") >= 2
        assert value(s, "kcoord_rebalance_duration_seconds_count") == value(s, "kcoord_rebalances_total")
        assert 0 <= value(s, "kcoord_rebalance_duration_seconds_sum") < 60
        assert value(s, "kcoord_commit_latency_seconds_count", outcome="committed") >= 6
        assert value(s, "kcoord_commit_latency_seconds_bucket", outcome="committed", le="+Inf") >= 6
        assert value(s, "kcoord_requests_total", api="JoinGroup") >= 2
        assert value(s, "kcoord_requests_total", api="SyncGroup") >= 2
        assert value(s, "kcoord_requests_total", api="OffsetCommit") >= 6
        assert value(s, "kcoord_requests_total", api="ApiVersions") >= 1
        assert value(s, "kcoord_request_duration_seconds_count", api="OffsetCommit") >= 6
        # librdkafka's first JoinGroup (v4+) is answered MEMBER_ID_REQUIRED, as Kafka does.
        assert value(s, "kcoord_request_errors_total", api="JoinGroup", error="member_id_required") >= 1
        assert total(s, "kcoord_request_errors_total", api="OffsetCommit") == 0
        assert total(s, "kcoord_shard_load_seconds_count") >= 1
        assert all(v < 60 for (n, _), v in s.items() if n == "kcoord_shard_last_load_seconds")
        assert value(s, "process_resident_memory_bytes") > 0
    finally:
        for c in cs:
            c.close()

    deadline = time.time() + 20
    while True:
        s = scrape(port)
        if value(s, "kcoord_groups", state="Empty") >= 1 and value(s, "kcoord_groups", state="Stable") == 0:
            break
        assert time.time() < deadline, "group never reported Empty"
        time.sleep(0.2)
    assert value(s, "kcoord_group_members") == 0
    assert value(s, "kcoord_requests_total", api="LeaveGroup") >= 2


def test_metrics_port_zero_disables_the_endpoint(tmp_path: Path) -> None:
    from cluster.config import load_config

    assert load_config(None, env={}).metrics_port == 0
    assert load_config(None, env={"KCOORD_METRICS_PORT": "9404"}).metrics_port == 9404
    cfg_file = tmp_path / "n.toml"
    cfg_file.write_text("metrics_port = 9555\n")
    assert load_config(str(cfg_file), env={}).metrics_port == 9555
    from cluster import metrics_http

    assert metrics_http.start_server(load_config(None, env={})) is None


def test_set_partition_leadership_is_exported() -> None:
    from prometheus_client import generate_latest

    from cluster import metrics

    metrics.set_partition_leadership("__consumer_offsets-3", True, 7)
    metrics.set_partition_leadership("__consumer_offsets-4", False, 2)
    text = generate_latest(metrics.REGISTRY).decode()
    assert 'kcoord_partition_leader{partition="__consumer_offsets-3"} 1.0' in text
    assert 'kcoord_partition_term{partition="__consumer_offsets-3"} 7.0' in text
    assert 'kcoord_partition_leader{partition="__consumer_offsets-4"} 0.0' in text


def test_raft_leadership_and_terms_are_exported_on_a_cluster(tmp_path: Path) -> None:
    """Each node of a 3-node cluster reports the Raft leader flag and term of every partition it hosts."""
    from tests.cluster.cluster_harness import Cluster

    ports = [free_port() for _ in range(3)]
    c = Cluster(tmp_path, per_node={i: {"metrics_port": ports[i]} for i in range(3)}).start()
    try:
        deadline = time.time() + 30
        while True:
            samples = [scrape(p) for p in ports]
            leaders = {name: sum(s[(n, lbl)] for s in samples for (n, lbl) in s
                                 if n == "kcoord_partition_leader" and dict(lbl).get("partition") == name)
                       for name in (f"__consumer_offsets-{i}" for i in range(16))}
            if all(v == 1 for v in leaders.values()) or time.time() > deadline:
                break
            time.sleep(0.5)
        assert all(v == 1 for v in leaders.values()), leaders  # exactly one node leads each partition
        terms = [v for s in samples for (n, _), v in s.items() if n == "kcoord_partition_term"]
        assert terms and all(t >= 1 for t in terms)
    finally:
        c.kill_all()
