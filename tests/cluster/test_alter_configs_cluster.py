"""A topic's configs altered through one node hold on every node: each describes them alike, each
partition's leader applies the new ``max.message.bytes`` whichever node it is, two alterations sent
to two nodes at once both take effect, and a node restarted afterwards replays them."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.cluster_harness import Cluster

pytestmark = pytest.mark.cluster

TOPIC, PARTITIONS = "altered", 3


def _describe(address: str) -> dict[str, str | None]:
    """The topic's overrides as the node at ``address`` describes them (raw, so that node answers)."""
    from cluster.apis.common import req_mod
    from cluster.peer_client import PeerClient

    m = req_mod(32, 4)
    host, port = address.rsplit(":", 1)

    async def go() -> Any:
        client = PeerClient("test-alter-configs-cluster", 10.0)
        try:
            return await client.request(host, int(port), 32, 4, m.DescribeConfigsRequest(
                include_synonyms=False, include_documentation=False, resources=(
                    m.DescribeConfigsResource(resource_type=2, resource_name=TOPIC, configuration_keys=None),)))
        finally:
            client.close()

    result = asyncio.run(go()).results[0]
    return {c.name: c.value for c in result.configs if c.config_source == 1}


def _alter(address: str, key: str, value: str) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    res = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": address})  # held until the answer: it is destroyed unreferenced
    admin.incremental_alter_configs([res])[res].result(20)


def _wait_for(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_configs_altered_through_one_node_hold_on_every_node(tmp_path: Path) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    cluster = Cluster(tmp_path, settings={"group.initial.rebalance.delay.ms": 0}).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config={"retention.ms": "3600000"})])[TOPIC].result(20)
        # two alterations of different keys sent to two nodes at once: neither undoes the other
        threads = [threading.Thread(target=_alter, args=(cluster.address(0), "max.message.bytes", "2000")),
                   threading.Thread(target=_alter, args=(cluster.address(1), "retention.bytes", "1000000"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        want = {"retention.ms": "3600000", "max.message.bytes": "2000", "retention.bytes": "1000000"}
        for i in range(3):
            _wait_for(lambda i=i: _describe(cluster.address(i)) == want, 10, f"node {i} to describe the alteration")
        # every partition's leader (one per node with three partitions) refuses what is now too large
        errors: list[Any] = []
        p = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0, "compression.type": "none"})
        for part in range(PARTITIONS):
            p.produce(TOPIC, value=b"x" * 5000, partition=part, on_delivery=lambda err, msg: errors.append(err))
            p.flush(20)
        assert [e.name() if e is not None else None for e in errors] == ["MSG_SIZE_TOO_LARGE"] * PARTITIONS, errors
        # a node restarted afterwards replays the alterations from the metadata log
        cluster.kill(2)
        cluster.start(2)
        _wait_for(lambda: _describe(cluster.address(2)) == want, 20, "the restarted node to describe the alteration")
    finally:
        cluster.kill_all()
