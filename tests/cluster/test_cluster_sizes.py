"""Clusters of 1 to 7 nodes, even sizes too: a majority of the nodes keeps every group serving.

A four-node cluster spreads the 16 ``__consumer_offsets`` partitions four to a node, and goes on
committing with one node killed (a majority is three); one- and two-node Raft clusters serve (with
no node to spare). More than seven nodes are refused at start.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.config import MAX_NODES, ConfigError, NodeConfig
from tests.cluster.cluster_harness import FAST_LEADER_BALANCE, SECRET, Cluster, wait_for

pytestmark = pytest.mark.cluster


def _leaders(admin: AdminClient) -> Counter[int]:
    md = admin.list_topics("__consumer_offsets", timeout=10)
    return Counter(p.leader for p in md.topics["__consumer_offsets"].partitions.values())


def _consume_and_commit(bootstrap: str, topic: str, group: str, records: int) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got, deadline = 0, time.time() + 60
    while got < records and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    assert got == records, f"consumed {got} of {records}"
    c.commit(asynchronous=False)
    return c


def _produce(bootstrap: str, topic: str, records: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(records):
        p.produce(topic, key=str(i).encode(), value=b"v%d" % i)
    assert p.flush(30) == 0


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_a_cluster_of_any_size_up_to_seven_serves_and_spreads_leadership(
        tmp_path: Path, request: pytest.FixtureRequest, nodes: int) -> None:
    c = Cluster(tmp_path, nodes=nodes, settings={"group.initial.rebalance.delay.ms": 0, **FAST_LEADER_BALANCE})
    try:
        c.start()
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        for f in admin.create_topics([NewTopic("sized", 4, nodes)]).values():
            f.result(timeout=30)
        _produce(c.bootstrap, "sized", 200)
        consumer = _consume_and_commit(c.bootstrap, "sized", "sized-group", 200)
        balanced = Counter({i: 16 // nodes for i in range(nodes)})
        seen: list[Counter[int]] = []
        try:
            wait_for(lambda: seen.append(_leaders(admin)) or seen[-1] == balanced, 30, "balanced leadership")
        except AssertionError:
            raise AssertionError(f"offsets partitions led {seen[-1:]}, not {balanced}; alive: "
                                 f"{[c.alive(i) for i in range(nodes)]}") from None
        if nodes >= 3:  # a majority survives the loss of one node
            md = admin.list_topics("__consumer_offsets", timeout=10)
            victim = nodes - 1
            c.kill(victim)
            deadline = time.time() + 30
            while True:  # the group's coordinator may have been on it: committing resumes elsewhere
                try:
                    consumer.commit(offsets=[TopicPartition("sized", p, 50 + p) for p in range(4)],
                                    asynchronous=False)
                    break
                except Exception:  # noqa: BLE001 - retried until the deadline
                    if time.time() > deadline:
                        raise
                    time.sleep(0.5)
            wait_for(lambda: victim not in _leaders(admin) and -1 not in _leaders(admin), 30,
                     "the killed node's offsets partitions to be led by the others")
            assert len(md.brokers) == nodes
            req = ConsumerGroupTopicPartitions("sized-group", [TopicPartition("sized", p) for p in range(4)])
            got = admin.list_consumer_group_offsets([req])["sized-group"].result(timeout=15)
            assert {tp.partition: tp.offset for tp in got.topic_partitions} == {p: 50 + p for p in range(4)}
        consumer.close()
    finally:
        c.kill_all()
        rep = getattr(request.node, "rep_call", None)
        if rep is not None and rep.failed:
            for i in range(c.n):
                print(f"--- node {i} log ---\n{c.log_text(i)[-3000:]}")


def test_more_than_seven_nodes_are_refused() -> None:
    peers = ",".join(f"127.0.0.1:{9092 + i}:{19000 + 1000 * i}" for i in range(MAX_NODES + 1))
    with pytest.raises(ConfigError, match=f"a cluster has 1 to {MAX_NODES} nodes"):
        NodeConfig(peers=peers, cluster_secret=SECRET).validate()
    seven = ",".join(f"127.0.0.1:{9092 + i}:{19000 + 1000 * i}" for i in range(MAX_NODES))
    assert len(NodeConfig(peers=seven, cluster_secret=SECRET).validate().cluster_peers) == MAX_NODES
