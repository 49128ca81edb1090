"""Named listeners (Kafka's ``listeners`` / ``advertised.listeners``) on a live 3-node cluster.

Every node listens on INTERNAL (its main port, the one in ``peers``) and on EXTERNAL, which
advertises ``localhost`` instead of ``127.0.0.1``. A client that came in through EXTERNAL must
be told every node's EXTERNAL address, in Metadata and FindCoordinator alike (each node
registers its further listeners in the cluster's metadata log), and a client bootstrapped from
the EXTERNAL addresses alone consumes, commits and reads its offsets back end to end.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cluster.tools.local_cluster import free_low_port
from tests.cluster.cluster_harness import Cluster
from tests.wire.raw import RawConn

pytestmark = pytest.mark.cluster


def _metadata_brokers(address: str) -> set[tuple[int, str, int]]:
    from kio.schema.metadata.v12.request import MetadataRequest

    c = RawConn(address)
    c.request(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                     include_topic_authorized_operations=False))
    r = c.response(3, 12)
    c.close()
    return {(int(b.node_id), str(b.host), int(b.port)) for b in r.brokers}


def _coordinator(address: str, group: str) -> tuple[int, str, int]:
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

    c = RawConn(address)
    c.request(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)))
    r = c.response(10, 4).coordinators[0]
    c.close()
    assert r.error_code == 0, r
    return int(r.node_id), str(r.host), int(r.port)


def test_each_listener_advertises_its_own_addresses_for_every_node(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    ext = [free_low_port() for _ in range(3)]
    cluster = Cluster(tmp_path, settings={"group.initial.rebalance.delay.ms": 0})
    cluster.per_node = {i: {"listeners": f"INTERNAL://127.0.0.1:{n.kafka_port},EXTERNAL://127.0.0.1:{ext[i]}",
                            "advertised.listeners": f"EXTERNAL://localhost:{ext[i]}"}
                        for i, n in enumerate(cluster.layout)}
    cluster.start()
    try:
        internal = {(i, "127.0.0.1", n.kafka_port) for i, n in enumerate(cluster.layout)}
        external = {(i, "localhost", ext[i]) for i in range(3)}
        deadline = time.monotonic() + 20
        # The registrations are still being applied: a follower applies an entry when it learns
        # the commit index, at the leader's next heartbeat, so every node is waited for.
        while time.monotonic() < deadline and any(_metadata_brokers(f"127.0.0.1:{ext[i]}") != external
                                                  for i in range(3)):
            time.sleep(0.2)
        for i in range(3):
            assert _metadata_brokers(cluster.address(i)) == internal
            assert _metadata_brokers(f"127.0.0.1:{ext[i]}") == external
        node, host, port = _coordinator(f"127.0.0.1:{ext[1]}", "g-ext")
        assert (host, port) == ("localhost", ext[node])
        node_i, host_i, port_i = _coordinator(cluster.address(1), "g-ext")
        assert (node_i, host_i, port_i) == (node, "127.0.0.1", cluster.layout[node].kafka_port)

        boot = ",".join(f"localhost:{p}" for p in ext)
        admin = AdminClient({"bootstrap.servers": boot})
        admin.create_topics([NewTopic("ext-topic", 3, 3)])["ext-topic"].result(20)
        p = Producer({"bootstrap.servers": boot, "acks": "all"})
        for n in range(30):
            p.produce("ext-topic", value=b"%d" % n, partition=n % 3)
        assert p.flush(20) == 0
        c = Consumer({"bootstrap.servers": boot, "group.id": "g-ext", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.subscribe(["ext-topic"])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 30 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        assert sorted(got) == sorted(b"%d" % n for n in range(30))
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition("ext-topic", q) for q in range(3)], timeout=10)
        assert sum(tp.offset for tp in committed) == 30
        c.close()
    finally:
        cluster.kill_all()
