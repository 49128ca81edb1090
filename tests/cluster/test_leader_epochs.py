"""Leader epochs on a 3-node cluster, as Kafka's clients use them (KIP-320): Metadata tells each
partition's epoch (its leader's Raft term) once every node stamps batches with it; after the
leader is killed, the next one's epoch is later, OffsetForLeaderEpoch answers the old epoch's end
exactly (where the new leader's first batch is), and a librdkafka consumer that validates its
position across the change (auto.offset.reset=earliest: a wrong answer would rewind it) reads
every record once, in order."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.apis.common import req_mod
from tests.cluster.cluster_harness import Cluster, wait_for
from tests.wire.raw import ask

pytestmark = pytest.mark.cluster
TOPIC = "epochs"


def _leader(bootstrap: str) -> tuple[int, int]:
    """(leader id, leader epoch) of the topic's partition, as Metadata v12 tells it."""
    md = req_mod(3, 12)
    meta = ask(bootstrap.split(",")[0], 3, 12, md.MetadataRequest(
        topics=(md.MetadataRequestTopic(topic_id=None, name=TOPIC),), allow_auto_topic_creation=False,
        include_topic_authorized_operations=False))
    p = meta.topics[0].partitions[0]
    return int(p.leader_id), int(p.leader_epoch)


def test_a_consumer_validates_its_position_across_a_leader_change(tmp_path: Path) -> None:
    c = Cluster(tmp_path).start()
    consumer = None
    try:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
        wait_for(lambda: _leader(c.bootstrap)[1] >= 0, 60, "epochs told (every node registered)",
                 tolerate=(OSError, AttributeError, IndexError))
        leader, epoch = _leader(c.bootstrap)
        producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5})
        for i in range(300):
            producer.produce(TOPIC, value=b"%d" % i)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "validating", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        seen: list[int] = []

        def drain(until: int, timeout: float) -> None:
            deadline = time.monotonic() + timeout
            while len(seen) < until and time.monotonic() < deadline:
                m = consumer.poll(0.2)  # type: ignore[union-attr]
                if m is not None and m.error() is None:
                    seen.append(int(m.value()))

        drain(300, 30)
        c.kill(leader)
        others = ",".join(c.address(i) for i in range(3) if i != leader)
        wait_for(lambda: _leader(others)[0] not in (leader, -1), 30, "a new leader",
                 tolerate=(OSError, AttributeError, IndexError, KafkaException))
        new_leader, new_epoch = _leader(others)
        assert new_epoch > epoch
        for i in range(300, 600):
            producer.produce(TOPIC, value=b"%d" % i)
        assert producer.flush(60) == 0
        drain(600, 60)
        assert seen == list(range(600))  # nothing read twice (a rewind), nothing skipped
        # the old epoch ended where the new leader's first batch is: offset 300
        m = req_mod(23, 4)
        answer = ask(c.address(new_leader), 23, 4, m.OffsetForLeaderEpochRequest(replica_id=-1, topics=(
            m.OffsetForLeaderTopic(topic=TOPIC, partitions=(m.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=new_epoch, leader_epoch=epoch),)),)))
        p = answer.topics[0].partitions[0]
        assert (int(p.error_code.value), int(p.leader_epoch), int(p.end_offset)) == (0, epoch, 300)
    finally:
        if consumer is not None:
            consumer.close()
        c.kill_all()
