"""A batch header that lies is refused with Kafka's error, and later produces are unaffected."""

from __future__ import annotations

import struct

import pytest

from replication.record_batch import ATTRIBUTES_OFFSET, CRC_OFFSET, build_batch, crc32c, iter_records
from tests.cluster.test_data_plane import _fetch_raw, _produce_raw, create_topic
from tests.wire.raw import RawConn

pytestmark = pytest.mark.cluster


def test_negative_last_offset_delta_is_refused_and_the_log_end_holds(bootstrap) -> None:
    create_topic(bootstrap, "hostile", 1)
    c = RawConn(bootstrap)
    first = _produce_raw(c, "hostile", build_batch([(None, b"a"), (None, b"b"), (None, b"c")]))
    assert first.error_code == 0 and first.base_offset == 0
    hostile = bytearray(build_batch([(None, b"x"), (None, b"y")]))
    struct.pack_into(">i", hostile, 23, -3)  # lastOffsetDelta = -3 ...
    struct.pack_into(">I", hostile, CRC_OFFSET, crc32c(memoryview(hostile)[ATTRIBUTES_OFFSET:]))  # ... correct CRC
    refused = _produce_raw(c, "hostile", bytes(hostile))
    assert refused.error_code == 87  # INVALID_RECORD
    assert "lastOffsetDelta" in (refused.error_message or "")
    after = _produce_raw(c, "hostile", build_batch([(None, b"d")]))
    assert after.error_code == 0 and after.base_offset == 3  # not an offset that already exists
    too_big = _produce_raw(c, "hostile", build_batch([(None, b"z" * 1_100_000)]))
    assert too_big.error_code == 10  # MESSAGE_TOO_LARGE (max.message.bytes 1048588)
    fetched = _fetch_raw(c, "hostile", 0, max_wait_ms=0)
    values = [(r.offset, r.value) for r in iter_records(bytes(fetched.records))]
    assert values == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    c.close()


def test_a_keyless_record_to_a_compacted_topic_is_refused(bootstrap) -> None:
    """Kafka refuses a record without a key on a topic whose cleanup.policy includes compact
    (INVALID_RECORD for that partition); keyed records, tombstones included, are written."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("changelog", 1, 1, config={"cleanup.policy": "compact"})])["changelog"].result(10)
    c = RawConn(bootstrap)
    refused = _produce_raw(c, "changelog", build_batch([(b"k", b"v"), (None, b"no key")]))
    assert refused.error_code == 87  # INVALID_RECORD
    assert refused.error_message == "Compacted topic cannot accept message without key in topic partition changelog-0."
    written = _produce_raw(c, "changelog", build_batch([(b"k", b"v"), (b"k", None)]))
    assert written.error_code == 0 and written.base_offset == 0
    fetched = _fetch_raw(c, "changelog", 0, max_wait_ms=0)
    assert [(r.key, r.value) for r in iter_records(bytes(fetched.records))] == [(b"k", b"v"), (b"k", None)]
    c.close()


def test_a_produce_that_cannot_be_replicated_times_out(tmp_path) -> None:
    """A leader cut off from its followers cannot commit: the producer gets REQUEST_TIMED_OUT
    after its request timeout instead of waiting for ever."""
    import datetime
    import time

    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

    from tests.cluster.cluster_harness import Cluster

    cluster = Cluster(tmp_path, settings={"group.initial.rebalance.delay.ms": 0}).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("stuck", 1, 1)])["stuck"].result(20)
        leader = admin.list_topics("stuck", timeout=10).topics["stuck"].partitions[0].leader
        for i in range(3):
            if i != leader:
                cluster.kill(i)
        c = RawConn(cluster.address(leader), timeout=10)
        started = time.monotonic()
        c.request(0, 9, ProduceRequest(transactional_id=None, acks=-1, timeout=datetime.timedelta(milliseconds=1500),
                                       topic_data=(TopicProduceData(name="stuck", partition_data=(
                                           PartitionProduceData(index=0, records=build_batch([(None, b"x")])),)),)))
        resp = c.response(0, 9).responses[0].partition_responses[0]
        took = time.monotonic() - started
        assert resp.error_code in (7, 6), resp  # REQUEST_TIMED_OUT (or NOT_LEADER if it stepped down first)
        assert took < 8, took
        c.close()
    finally:
        cluster.kill_all()


def test_the_same_idempotent_batch_on_two_connections_is_written_once(tmp_path) -> None:
    """A producer's retry on a new connection while its first attempt is still replicating:
    both used to pass the sequence check (it knows only applied batches) and both were written."""
    import threading

    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

    from tests.cluster.cluster_harness import Cluster

    cluster = Cluster(tmp_path, settings={"group.initial.rebalance.delay.ms": 0}).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("twice", 1, 1)])["twice"].result(20)
        leader = admin.list_topics("twice", timeout=10).topics["twice"].partitions[0].leader
        bs = cluster.address(leader)
        c0 = RawConn(bs)
        c0.request(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout=__import__(
            "datetime").timedelta(seconds=60), producer_id=-1, producer_epoch=-1))
        pid_resp = c0.response(22, 4)
        pid = pid_resp.producer_id
        assert pid_resp.error_code == 0 and pid >= 1 << 36  # from a block the metadata log granted
        for seq in range(0, 60, 3):  # 20 rounds, each batch sent on two connections at once
            batch = build_batch([(None, b"s%d" % (seq + i)) for i in range(3)], producer_id=pid, producer_epoch=0,
                                base_sequence=seq)
            conns = [RawConn(bs), RawConn(bs)]
            answers: list[object] = []
            threads = [threading.Thread(target=lambda c=c, out=answers, b=batch: out.append(
                _produce_raw(c, "twice", b))) for c in conns]
            for t in threads:
                t.start()
            for t in threads:
                t.join(10)
            assert len(answers) == 2 and all(a.error_code == 0 for a in answers), answers  # type: ignore[attr-defined]
            assert len({a.base_offset for a in answers}) == 1  # type: ignore[attr-defined]
            for c in conns:
                c.close()
        fetched = _fetch_raw(c0, "twice", 0, max_wait_ms=0)
        values = [r.value for r in iter_records(bytes(fetched.records))]
        assert values == [b"s%d" % i for i in range(60)], values[:12]
        c0.close()
    finally:
        cluster.kill_all()


def test_an_idle_producers_state_expires(tmp_path) -> None:
    """producer.id.expiration.ms on a live node: a gap in an idempotent producer's sequence is
    refused while its state is held, and accepted (as a new producer's batch) once it expired."""
    import datetime
    import time

    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

    from tests.cluster.harness import NodeProcess

    node = NodeProcess(tmp_path, settings={"producer.id.expiration.ms": 1500,
                                           "producer.id.expiration.check.interval.ms": 200}).start()
    try:
        create_topic(node.bootstrap, "expiring", 1)
        c = RawConn(node.bootstrap)
        c.request(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout=datetime.timedelta(
            seconds=60), producer_id=-1, producer_epoch=-1))
        pid = c.response(22, 4).producer_id

        def batch(seq: int) -> bytes:
            return build_batch([(None, b"s%d" % seq)], timestamp=int(time.time() * 1000), producer_id=pid,
                               producer_epoch=0, base_sequence=seq)

        assert _produce_raw(c, "expiring", batch(0)).error_code == 0
        assert _produce_raw(c, "expiring", batch(5)).error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
        time.sleep(2.5)
        assert _produce_raw(c, "expiring", batch(5)).error_code == 0
        c.close()
        assert "event=producer_ids_expired count=1" in node.log_text()
    finally:
        node.kill()
