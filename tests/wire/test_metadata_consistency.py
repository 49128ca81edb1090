"""Metadata never names a leader missing from its broker list.

Liveness (the metadata Raft group's connections) and leadership (each partition's own group)
are observed separately and can disagree for a moment around a crash. A client that finds a
leader id it cannot resolve fails its send; kafka-python 3.0.12 then keeps that node marked as
having a fetch in flight and never fetches the partition again (seen in chaos runs).
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from cluster.apis import metadata
from cluster.metadata import OFFSETS_TOPIC


class _Topology:
    """Brokers 0 and 1 are live; node 2 still leads partition 1 and offsets partition 0."""

    def brokers(self) -> list[Any]:
        return [SimpleNamespace(node_id=i, host="127.0.0.1", port=9092 + i, rack=None) for i in (0, 1)]

    def replica_ids(self) -> list[int]:
        return [0, 1, 2]

    def partition_leader(self, topic: str, p: int) -> tuple[int, int]:
        return (0, -1) if p == 0 else (2, -1)

    def offsets_leader(self, p: int) -> Any:
        return SimpleNamespace(node_id=2 if p == 0 else 1)

    def controller_id(self) -> int:
        return 0


class _Node:
    offsets_partitions = 2
    cluster_id = "c"
    config = SimpleNamespace(auto_create_topics=False)
    topology = _Topology()

    def topic(self, name: str) -> Any:
        return SimpleNamespace(topic_id=uuid.UUID(int=7), partitions=2) if name == "t" else None


def test_a_leader_that_is_not_a_live_broker_is_reported_unavailable() -> None:
    req = MetadataRequest(topics=(MetadataRequestTopic(topic_id=uuid.UUID(int=0), name="t"),
                                  MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=OFFSETS_TOPIC)),
                          allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    resp = metadata.build(_Node(), req)
    live = {b.node_id for b in resp.brokers}
    assert live == {0, 1}
    got = {(t.name, p.partition_index): (p.error_code, p.leader_id, p.isr_nodes, p.offline_replicas)
           for t in resp.topics for p in t.partitions}
    assert got[("t", 0)] == (ErrorCode.none, 0, (0, 1), (2,))
    assert got[("t", 1)] == (ErrorCode.leader_not_available, -1, (0, 1), (2,))
    assert got[(OFFSETS_TOPIC, 0)][:2] == (ErrorCode.leader_not_available, -1)
    assert got[(OFFSETS_TOPIC, 1)][:2] == (ErrorCode.none, 1)
    for t in resp.topics:
        for p in t.partitions:
            assert p.leader_id == -1 or p.leader_id in live
