"""CreatePartitions (37): a client grows a topic, produces to and reads from the new partitions,
and gets Kafka's errors for what is not an increase, a bad assignment, a duplicate or an unknown
topic; ``validate_only`` grows nothing. Asked as clients ask: confluent-kafka's AdminClient,
Producer and Consumer, and a raw request for the errors."""

from __future__ import annotations

import datetime
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kio.schema.errors import ErrorCode

from cluster.apis.common import req_mod
from tests.wire.raw import ask

TEN_S = datetime.timedelta(seconds=10)


def _ask(bootstrap: str, body: Any) -> Any:
    return ask(bootstrap, 37, 3, body)


def test_a_client_grows_a_topic_and_uses_the_new_partitions(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("grow", 2, 1)])["grow"].result(15)
    admin.create_partitions([NewPartitions("grow", 4)], validate_only=True)["grow"].result(15)
    assert len(admin.list_topics("grow", timeout=10).topics["grow"].partitions) == 2
    admin.create_partitions([NewPartitions("grow", 4)])["grow"].result(15)
    assert len(admin.list_topics("grow", timeout=10).topics["grow"].partitions) == 4
    p = Producer({"bootstrap.servers": bootstrap})
    for part in range(4):
        p.produce("grow", value=b"v%d" % part, partition=part)
    assert p.flush(15) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "grow-reader", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition("grow", part, 0) for part in range(4)])
        got: set[bytes] = set()
        for _ in range(40):
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got.add(msg.value() or b"")
            if len(got) == 4:
                break
        assert got == {b"v0", b"v1", b"v2", b"v3"}
    finally:
        c.close()


def test_what_kafka_refuses_grows_nothing(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("keep", 3, 1)])["keep"].result(15)
    m = req_mod(37, 3)

    def grow(name: str, count: int, assignments: list[list[int]] | None = None) -> Any:
        return m.CreatePartitionsTopic(name=name, count=count, assignments=None if assignments is None else tuple(
            m.CreatePartitionsAssignment(broker_ids=tuple(a)) for a in assignments))

    resp = _ask(bootstrap, m.CreatePartitionsRequest(timeout=TEN_S, validate_only=False, topics=(
        grow("keep", 3), grow("no-such-topic", 5), grow("dup", 2), grow("dup", 3),
        grow("__consumer_offsets", 100),
    )))
    codes = [(r.name, r.error_code) for r in resp.results]
    assert codes == [("keep", ErrorCode.invalid_partitions), ("no-such-topic", ErrorCode.unknown_topic_or_partition),
                     ("dup", ErrorCode.invalid_request), ("dup", ErrorCode.invalid_request),
                     ("__consumer_offsets", ErrorCode.invalid_request)], codes
    resp = _ask(bootstrap, m.CreatePartitionsRequest(timeout=TEN_S, validate_only=False, topics=(grow("keep", 2),)))
    assert resp.results[0].error_code == ErrorCode.invalid_partitions
    resp = _ask(bootstrap, m.CreatePartitionsRequest(timeout=TEN_S, validate_only=False, topics=(grow("keep", 5, [[0]]),)))
    assert resp.results[0].error_code == ErrorCode.invalid_replica_assignment  # one list for two partitions
    resp = _ask(bootstrap, m.CreatePartitionsRequest(timeout=TEN_S, validate_only=False, topics=(grow("keep", 4, [[9]]),)))
    assert resp.results[0].error_code == ErrorCode.invalid_replica_assignment  # no node 9
    assert len(admin.list_topics("keep", timeout=10).topics["keep"].partitions) == 3
    resp = _ask(bootstrap, m.CreatePartitionsRequest(timeout=TEN_S, validate_only=False, topics=(grow("keep", 4, [[0]]),)))
    assert resp.results[0].error_code == ErrorCode.none
    assert len(admin.list_topics("keep", timeout=10).topics["keep"].partitions) == 4
