"""DeleteRecords (21): a partition's log start moves forward as Kafka's does, asked through
confluent-kafka's AdminClient (the Java Admin's path) and raw requests for the edge cases."""

from __future__ import annotations

import datetime

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from cluster.apis.common import req_mod
from tests.wire.raw import ask as _ask


def _fill(bootstrap: str, topic: str, n: int, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs or {})])[topic].result(15)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0)
        p.flush(10)  # a batch per record: offsets fall in many batches


def _delete(bootstrap: str, topic: str, parts: list[tuple[int, int]], version: int = 2) -> list[tuple[int, int, int]]:
    m = req_mod(21, version)
    resp = _ask(bootstrap, 21, version, m.DeleteRecordsRequest(topics=(m.DeleteRecordsTopic(name=topic, partitions=tuple(
        m.DeleteRecordsPartition(partition_index=i, offset=o) for i, o in parts)),), timeout=datetime.timedelta(seconds=5)))
    return [(int(p.partition_index), int(p.low_watermark), int(p.error_code)) for t in resp.topics for p in t.partitions]


def test_records_before_the_new_log_start_are_gone_for_every_reader(bootstrap: str) -> None:
    _fill(bootstrap, "dr", 20)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition("dr", 0, 7)])
    deleted = futures[TopicPartition("dr", 0, 7)].result(15)
    assert deleted.low_watermark == 7
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dr-reader", "auto.offset.reset": "earliest"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition("dr", 0), timeout=10)
        assert (low, high) == (7, 20)
        c.assign([TopicPartition("dr", 0, 0)])  # before the log start: reset to the earliest, 7
        got = []
        while len(got) < 13:
            msg = c.poll(5)
            assert msg is not None, got
            if msg.error() is None:
                got.append(msg.offset())
        assert got == list(range(7, 20))
    finally:
        c.close()
    # an earlier offset than the log start changes nothing; -1 is the high watermark
    assert _delete(bootstrap, "dr", [(0, 3)]) == [(0, 7, 0)]
    assert _delete(bootstrap, "dr", [(0, -1)], version=0) == [(0, 20, 0)]
    assert _delete(bootstrap, "dr", [(0, 21), (0, -5)]) == [
        (0, -1, ErrorCode.offset_out_of_range.value), (0, -1, ErrorCode.offset_out_of_range.value)]
    assert _delete(bootstrap, "dr", [(3, 1)]) == [(3, -1, ErrorCode.unknown_topic_or_partition.value)]
    assert _delete(bootstrap, "nope", [(0, 1)]) == [(0, -1, ErrorCode.unknown_topic_or_partition.value)]


def test_a_compacted_topic_refuses_deletion(bootstrap: str) -> None:
    _fill(bootstrap, "dr-compact", 3, configs={"cleanup.policy": "compact"})
    assert _delete(bootstrap, "dr-compact", [(0, 1)]) == [(0, -1, ErrorCode.policy_violation.value)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.delete_records([TopicPartition("dr-compact", 0, 1)])[TopicPartition("dr-compact", 0, 1)].result(15)
        raise AssertionError("deleted records of a compacted topic")
    except KafkaException as e:
        assert e.args[0].code() == ErrorCode.policy_violation.value
