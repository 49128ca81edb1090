"""Log compaction on a 3-node cluster: a topic with ``cleanup.policy=compact`` (segments rolled
by ``segment.ms``, a cleaner run every half second) is compacted by every replica on its own; a
consumer reading it from the start, from the leader and, after the leader is killed, from the
next one, sees each key's latest value at the offset it was acknowledged at, every tombstoned key
gone once ``delete.retention.ms`` passed, and fewer records than were produced."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.cluster_harness import Cluster, wait_for

pytestmark = pytest.mark.cluster

KEYS = 12
ROUNDS = 30


def _read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 30
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append((m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


def test_every_replica_compacts_and_a_reader_sees_each_keys_latest_value(tmp_path: Path) -> None:
    c = Cluster(tmp_path, settings={"log.cleaner.backoff.ms": 500}).start()
    try:
        topic = f"compacted-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        configs = {"cleanup.policy": "compact", "segment.ms": "200", "min.cleanable.dirty.ratio": "0.01",
                   "delete.retention.ms": "1000"}
        for f in admin.create_topics([NewTopic(topic, 1, 3, config=configs)]).values():
            f.result(timeout=30)
        producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5,
                             "enable.idempotence": True})
        acked: dict[bytes, tuple[int, bytes | None]] = {}

        def delivered(err: object, msg: object) -> None:
            assert err is None, err
            key = msg.key()  # type: ignore[attr-defined]
            acked[key] = max(acked.get(key, (-1, None)), (msg.offset(), msg.value()))  # type: ignore[attr-defined]

        produced = 0
        for r in range(ROUNDS):
            for k in range(KEYS):
                tomb = r == ROUNDS - 1 and k < 3  # the last round deletes three keys
                producer.produce(topic, key=b"k%d" % k, value=None if tomb else b"r%d" % r, on_delivery=delivered)
                produced += 1
            producer.flush(10)
            time.sleep(0.03)  # the segments roll on record time
        time.sleep(0.3)  # the tail's records are segment.ms newer: the rounds' last segment rolls
        producer.produce(topic, key=b"tail", value=b"x", on_delivery=delivered)  # the active segment
        producer.flush(10)
        wait_for(lambda: all("event=log_compacted" in c.log_text(i) for i in range(3)), 60,
                 "every replica to compact")

        def check(bootstrap: str, tombstones_gone: bool = True) -> int:
            got = _read_all(bootstrap, topic)
            offsets = [o for o, _, _ in got]
            assert offsets == sorted(set(offsets))
            last = {k: (o, v) for o, k, v in got}
            for key, (offset, value) in acked.items():
                if value is None:  # the delete, until a pass past delete.retention.ms removes it
                    assert (key not in last) if tombstones_gone else last.get(key, (offset, None)) == (offset, None)
                else:
                    assert last[key] == (offset, value), (key, last.get(key), (offset, value))
            return len(got)

        check(c.bootstrap, tombstones_gone=False)
        # past delete.retention.ms a pass is due (dirty or not): the tombstones go
        wait_for(lambda: check(c.bootstrap) > 0, 60, "the tombstones to be removed", tolerate=(AssertionError,))
        seen = check(c.bootstrap)
        assert seen < produced / 2, (seen, produced)
        leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
        c.kill(leader)
        others = ",".join(c.address(i) for i in range(3) if i != leader)
        wait_for(lambda: admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader not in (leader, -1),
                 30, "a new leader", tolerate=(KafkaException,))
        wait_for(lambda: check(others) > 0, 30, "the next leader's own compacted copy", tolerate=(AssertionError,))
        print(f"produced {produced}, read back {seen} after compaction")
    finally:
        c.kill_all()


@pytest.mark.parametrize("codec", ["snappy", "lz4", "zstd"])
def test_compressed_batches_are_compacted_and_read_back_by_librdkafka_and_java(tmp_path: Path, codec: str) -> None:
    """librdkafka writes each codec in its own framing (snappy: raw, not xerial); librdkafka and
    Kafka's Java consumer read what the cleaner wrote back in Kafka's (snappy: xerial)."""
    c = Cluster(tmp_path, settings={"log.cleaner.backoff.ms": 300}).start()
    try:
        topic = f"compacted-{codec}"
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        configs = {"cleanup.policy": "compact", "segment.ms": "200", "min.cleanable.dirty.ratio": "0.01"}
        for f in admin.create_topics([NewTopic(topic, 1, 3, config=configs)]).values():
            f.result(timeout=30)
        producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 20,
                             "compression.type": codec})
        acked: dict[bytes, tuple[int, bytes]] = {}

        def delivered(err: object, msg: object) -> None:
            assert err is None, err
            acked[msg.key()] = max(acked.get(msg.key(), (-1, b"")), (msg.offset(), msg.value()))  # type: ignore[attr-defined]

        for r in range(15):
            for k in range(KEYS):  # a batch of all keys, compressible: the codec is used
                producer.produce(topic, key=b"k%d" % k, value=b"%s-round-%d " % (codec.encode(), r) * 20,
                                 on_delivery=delivered)
            producer.flush(10)
            time.sleep(0.05)
        time.sleep(0.3)
        producer.produce(topic, key=b"tail", value=b"x", on_delivery=delivered)
        producer.flush(10)
        wait_for(lambda: all("event=log_compacted dir=" in c.log_text(i) for i in range(3)), 60,
                 "every replica to compact")
        # every segment but the active one compacted: each key once, at its latest value
        wait_for(lambda: len(_read_all(c.bootstrap, topic)) == len(acked), 60, "every closed segment compacted")
        got = _read_all(c.bootstrap, topic)
        assert {k: (o, v) for o, k, v in got} == acked
        # and Kafka's own Java consumer reads the batches the cleaner wrote
        from tests.cluster.test_kafka_tools import _tool, _tools_classpath

        out = _tool(_tools_classpath(), "consumer.ConsoleConsumer", "--bootstrap-server", c.bootstrap, "--topic",
                    topic, "--partition", "0", "--offset", "earliest", "--max-messages", str(len(got)),
                    "--timeout-ms", "30000",
                    "--property", "print.key=true")
        java = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
        assert java == {k.decode(): v.decode() for k, (_, v) in acked.items()}
    finally:
        c.kill_all()
