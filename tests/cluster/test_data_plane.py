"""The data plane with real clients against a real node process."""

from __future__ import annotations

import asyncio
import datetime
import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from replication.record_batch import build_batch
from tests.wire.raw import RawConn

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]
TD0 = datetime.timedelta(0)


def create_topic(bs: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


def ck_consume_assigned(bs: str, topic: str, partitions: int, expect: int, timeout: float = 20.0) -> list:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": "unused-assign-only", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.time() + timeout
    while len(got) < expect and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        got.append((m.partition(), m.offset(), m.key(), m.value()))
    # nothing extra shows up
    extra = c.poll(0.5)
    c.close()
    assert extra is None or extra.error() is not None, "more messages than produced"
    return got


def test_confluent_produce_acks_all_and_assign_consume(bootstrap) -> None:
    from confluent_kafka import Producer

    create_topic(bootstrap, "ck", 3)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    delivered = []
    for i in range(1000):
        p.produce("ck", key=b"k%d" % i, value=b"v%d" % i, partition=i % 3,
                  on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())))
    assert p.flush(20) == 0
    assert len(delivered) == 1000 and all(err is None for err, _, _ in delivered)
    got = ck_consume_assigned(bootstrap, "ck", 3, 1000)
    assert len(got) == 1000
    for part in range(3):
        mine = [g for g in got if g[0] == part]
        assert [g[1] for g in mine] == list(range(len(mine)))
        assert [g[2] for g in mine] == [b"k%d" % i for i in range(part, 1000, 3)]
        assert [g[3] for g in mine] == [b"v%d" % i for i in range(part, 1000, 3)]
    # delivery reports carried the offsets the consumer saw
    assert sorted((pt, off) for _, pt, off in delivered) == sorted((g[0], g[1]) for g in got)


def test_kafka_python_idempotent_default(kcoord_node) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    bs = kcoord_node.bootstrap
    p = KafkaProducer(bootstrap_servers=bs)  # 3.x default: enable_idempotence=True
    assert p.config["enable_idempotence"] is True
    futs = [p.send("kp", key=b"%d" % i, value=b"val-%d" % i) for i in range(400)]
    p.flush(20)
    metas = [f.get(timeout=10) for f in futs]
    p.close()
    assert sorted(m.offset for m in metas) == list(range(400))
    assert "event=producer_id_allocated" in kcoord_node.log_text()
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, consumer_timeout_ms=3000)
    tp = TopicPartition("kp", 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    values = [m.value for m in c]
    assert c.end_offsets([tp])[tp] == 400
    c.close()
    assert values == [b"val-%d" % i for i in range(400)]


def test_aiokafka_produce_consume(bootstrap) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await p.start()
        try:
            for i in range(300):
                await p.send("ak", b"a%d" % i, partition=0)
            await p.flush()
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
        await c.start()
        out: list[bytes] = []
        try:
            tp = TopicPartition("ak", 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            deadline = time.time() + 15
            while len(out) < 300 and time.time() < deadline:
                batch = await c.getmany(tp, timeout_ms=500)
                out.extend(m.value for m in batch.get(tp, []))
            assert (await c.end_offsets([tp]))[tp] == 300
        finally:
            await c.stop()
        return out

    assert asyncio.run(run()) == [b"a%d" % i for i in range(300)]


@pytest.mark.skipif(shutil.which("node") is None or not (ROOT / "node_modules" / "kafkajs").is_dir(),
                    reason="node or kafkajs not installed")
def test_kafkajs_produce_and_fetch(bootstrap) -> None:
    out = subprocess.run(["node", str(ROOT / "tests/cluster/js/kjs_produce.js"), bootstrap, "kjs", "300"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["created"] is True and res["acked"] == 300
    assert sorted((o["partition"], o["high"], o["low"]) for o in res["offsets"]) == [(0, "150", "0"), (1, "150", "0")]
    assert sorted(res["fetched"]) == sorted(f"v{i}" for i in range(300))  # KafkaJS's own Fetch path
    got = ck_consume_assigned(bootstrap, "kjs", 2, 300)
    assert sorted(v for *_, v in got) == sorted(b"v%d" % i for i in range(300))


def test_list_offsets_earliest_latest_and_by_time(bootstrap) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    create_topic(bootstrap, "lo", 1)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    base_ts = 1_700_000_000_000
    for i in range(20):
        p.produce("lo", value=b"%d" % i, timestamp=base_ts + i * 1000)
        p.flush(10)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "x"})
    assert c.get_watermark_offsets(TopicPartition("lo", 0), timeout=10) == (0, 20)
    res = c.offsets_for_times([TopicPartition("lo", 0, base_ts + 7500)], timeout=10)
    assert res[0].offset == 8
    res = c.offsets_for_times([TopicPartition("lo", 0, base_ts + 10**9)], timeout=10)
    assert res[0].offset == -1  # no record that late: end
    c.close()


def test_list_offsets_special_timestamps_from_the_version_that_brought_each(bootstrap) -> None:
    """As Kafka 4.4 without tiered storage: EARLIEST_LOCAL (-4, v8+) is the log start, LATEST_TIERED
    (-5, v9+) and EARLIEST_PENDING_UPLOAD (-6, v11+) are no offset; before its version, or
    unknown, a special timestamp is UNSUPPORTED_VERSION."""
    from confluent_kafka import Producer

    from cluster.apis.common import mk, req_mod
    from tests.wire.raw import ask

    create_topic(bootstrap, "special", 1)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(5):
        p.produce("special", value=b"%d" % i, timestamp=1000 + i)
    assert p.flush(10) == 0

    def offsets(version: int, timestamp: int) -> tuple[int, int, int, int]:
        m = req_mod(2, version)
        r = ask(bootstrap, 2, version, mk(m.ListOffsetsRequest, replica_id=-1, isolation_level=0,
                                          timeout=datetime.timedelta(seconds=1), topics=(m.ListOffsetsTopic(
            name="special", partitions=(mk(m.ListOffsetsPartition, partition_index=0, current_leader_epoch=-1,
                                           timestamp=timestamp),)),)))
        part = r.topics[0].partitions[0]
        return int(part.error_code), int(part.timestamp), int(part.offset), int(part.leader_epoch)

    unsupported = (int(ErrorCode.unsupported_version), -1, -1, -1)
    nothing = (0, -1, -1, -1)
    assert offsets(11, -1)[:3] == (0, -1, 5) and offsets(11, -3)[:3] == (0, 1004, 4)
    assert offsets(8, -4)[:3] == offsets(11, -4)[:3] == (0, -1, 0) == offsets(11, -2)[:3]
    assert offsets(9, -5) == offsets(11, -6) == nothing
    assert offsets(6, -3) == offsets(7, -4) == offsets(8, -5) == offsets(10, -6) == unsupported
    assert offsets(11, -7) == offsets(7, -100) == unsupported


def test_restart_keeps_data(kcoord_node) -> None:
    from confluent_kafka import Producer

    bs = kcoord_node.bootstrap
    create_topic(bs, "dur", 2)
    p = Producer({"bootstrap.servers": bs, "acks": "all"})
    for i in range(200):
        p.produce("dur", value=b"d%d" % i, partition=i % 2)
    assert p.flush(10) == 0
    kcoord_node.restart()  # clean stop
    assert len(ck_consume_assigned(bs, "dur", 2, 200)) == 200
    p = Producer({"bootstrap.servers": bs, "acks": "all"})
    for i in range(200, 300):
        p.produce("dur", value=b"d%d" % i, partition=i % 2)
    assert p.flush(10) == 0
    kcoord_node.restart(hard=True)  # kill -9: written data survives a process crash
    got = ck_consume_assigned(bs, "dur", 2, 300)
    assert sorted(v for *_, v in got) == sorted(b"d%d" % i for i in range(300))
    # offsets continue where they were
    for part in range(2):
        assert [o for pt, o, *_ in got if pt == part] == list(range(150))


def create_topics_raw(bs: str, topics: list[tuple[str, int, int]], validate_only: bool = False):
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest

    c = RawConn(bs)
    c.request(19, 7, CreateTopicsRequest(
        topics=tuple(CreatableTopic(name=n, num_partitions=p, replication_factor=rf, assignments=(), configs=())
                     for n, p, rf in topics),
        timeout=datetime.timedelta(seconds=5), validate_only=validate_only))
    resp = c.response(19, 7)
    c.close()
    return {t.name: t for t in resp.topics}


def test_create_topics_errors(bootstrap) -> None:
    from confluent_kafka.admin import AdminClient

    res = create_topics_raw(bootstrap, [("ok1", 2, 1), ("zero", 0, 1), ("neg", -3, 1), ("rf3", 1, 3),
                                        ("rf0", 1, 0), ("bad/name", 1, 1), ("dflt", -1, -1)])
    assert res["ok1"].error_code == ErrorCode.none and res["ok1"].num_partitions == 2
    assert res["zero"].error_code == ErrorCode.invalid_partitions
    assert res["neg"].error_code == ErrorCode.invalid_partitions
    assert res["rf3"].error_code == ErrorCode.invalid_replication_factor
    assert "only 1 broker" in res["rf3"].error_message
    assert res["rf0"].error_code == ErrorCode.invalid_replication_factor
    assert res["bad/name"].error_code == ErrorCode.invalid_topic_exception
    assert res["dflt"].error_code == ErrorCode.none and res["dflt"].num_partitions == 1
    dup = create_topics_raw(bootstrap, [("ok1", 1, 1)])
    assert dup["ok1"].error_code == ErrorCode.topic_already_exists
    v = create_topics_raw(bootstrap, [("vo", 4, 1)], validate_only=True)
    assert v["vo"].error_code == ErrorCode.none
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    assert "ok1" in topics and "dflt" in topics and "vo" not in topics and "zero" not in topics
    assert len(topics["ok1"].partitions) == 2
    # with a real admin client too
    from confluent_kafka.admin import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic("rf3b", 1, 3)])["rf3b"]
    with pytest.raises(Exception) as ei:
        fut.result(10)
    assert "INVALID_REPLICATION_FACTOR" in str(ei.value) or "replication" in str(ei.value).lower()


def _produce_raw(c: RawConn, topic: str, batch: bytes, acks: int = -1):
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

    c.request(0, 9, ProduceRequest(transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=5),
                                   topic_data=(TopicProduceData(name=topic, partition_data=(
                                       PartitionProduceData(index=0, records=batch),)),)))
    if acks == 0:
        return None
    return c.response(0, 9).responses[0].partition_responses[0]


def test_idempotent_duplicates_and_gaps_raw(bootstrap) -> None:
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

    create_topic(bootstrap, "idem", 1)
    c = RawConn(bootstrap)
    c.request(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
                                           producer_id=-1, producer_epoch=-1))
    init = c.response(22, 4)
    assert init.error_code == ErrorCode.none and init.producer_id >= 0
    pid = init.producer_id

    def batch(seq: int, n: int = 2) -> bytes:
        return build_batch([(None, b"s%d" % (seq + i)) for i in range(n)], timestamp=1, producer_id=pid,
                           producer_epoch=0, base_sequence=seq)

    r0 = _produce_raw(c, "idem", batch(0))
    r1 = _produce_raw(c, "idem", batch(2))
    assert (r0.error_code, r0.base_offset, r1.error_code, r1.base_offset) == (ErrorCode.none, 0, ErrorCode.none, 2)
    again = _produce_raw(c, "idem", batch(0))  # a retry of an acked batch: same offset, not re-appended
    assert again.error_code == ErrorCode.none and again.base_offset == 0
    gap = _produce_raw(c, "idem", batch(10))
    assert gap.error_code == ErrorCode.out_of_order_sequence_number
    nxt = _produce_raw(c, "idem", batch(4))
    assert nxt.error_code == ErrorCode.none and nxt.base_offset == 4
    # a transactional id goes to its transaction coordinator (this single node): epoch 0, then 1
    for epoch in (0, 1):
        c.request(22, 4, InitProducerIdRequest(transactional_id="tx", transaction_timeout=datetime.timedelta(seconds=60),
                                               producer_id=-1, producer_epoch=-1))
        got = c.response(22, 4)
        assert (got.error_code, got.producer_epoch) == (ErrorCode.none, epoch) and got.producer_id >= 0
    # acks=0: no response at all, but the data is written; the next request's answer comes next
    assert _produce_raw(c, "idem", build_batch([(None, b"fire-and-forget")]), acks=0) is None
    last = _produce_raw(c, "idem", build_batch([(None, b"after")]))
    assert last.error_code == ErrorCode.none and last.base_offset == 7
    # corrupt batch
    bad = bytearray(build_batch([(None, b"x")]))
    bad[-1] ^= 1
    assert _produce_raw(c, "idem", bytes(bad)).error_code == ErrorCode.corrupt_message
    c.close()


def _fetch_raw(c: RawConn, topic: str, offset: int, max_wait_ms: int, min_bytes: int = 1):
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

    c.request(1, 12, FetchRequest(
        cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=min_bytes,
        max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=(), rack_id=""))
    return c.response(1, 12).responses[0].partitions[0]


def test_fetch_long_poll_and_errors(bootstrap) -> None:
    create_topic(bootstrap, "lp", 1)
    c = RawConn(bootstrap, timeout=10)
    t0 = time.monotonic()
    pd = _fetch_raw(c, "lp", 0, 800)
    waited = time.monotonic() - t0
    assert pd.error_code == ErrorCode.none and not pd.records and pd.high_watermark == 0
    assert 0.7 <= waited < 3, waited
    # a produce while a fetch is parked wakes it well before max_wait
    def produce_later() -> None:
        time.sleep(0.3)
        p = RawConn(bootstrap)
        _produce_raw(p, "lp", build_batch([(None, b"wake")]))
        p.close()

    th = threading.Thread(target=produce_later)
    th.start()
    t0 = time.monotonic()
    pd = _fetch_raw(c, "lp", 0, 5000)
    waited = time.monotonic() - t0
    th.join()
    assert pd.records and pd.high_watermark == 1 and waited < 3, waited
    assert _fetch_raw(c, "lp", 5, 0).error_code == ErrorCode.offset_out_of_range
    assert _fetch_raw(c, "nope", 0, 0).error_code == ErrorCode.unknown_topic_or_partition
    c.close()


def test_find_coordinator_and_metadata(bootstrap, kcoord_node) -> None:
    from kio.schema.find_coordinator.v2.request import FindCoordinatorRequest as FC2
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest as FC4

    c = RawConn(bootstrap)
    c.request(10, 4, FC4(key_type=0, coordinator_keys=("g1", "g2")))
    r = c.response(10, 4)
    assert [(x.key, x.error_code, x.node_id, x.port) for x in r.coordinators] == [
        ("g1", ErrorCode.none, 0, kcoord_node.port), ("g2", ErrorCode.none, 0, kcoord_node.port)]
    c.request(10, 4, FC4(key_type=1, coordinator_keys=("tx",)))
    r = c.response(10, 4).coordinators[0]
    assert (r.error_code, r.node_id, r.port) == (ErrorCode.none, 0, kcoord_node.port)  # the transaction coordinator
    c.request(10, 2, FC2(key="g", key_type=2))
    assert c.response(10, 2).error_code == ErrorCode.invalid_request
    c.close()
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics("auto-made", timeout=10)
    assert "auto-made" in md.topics and md.topics["auto-made"].error is None
    assert md.controller_id == 0 and [b.id for b in md.brokers.values()] == [0]


def test_delete_topics(bootstrap) -> None:
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient

    create_topic(bootstrap, "gone", 2)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        p.produce("gone", b"%d" % i, partition=0)
    assert p.flush(10) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics(["gone"])["gone"].result(10)
    assert "gone" not in admin.list_topics(timeout=10).topics
    with pytest.raises(KafkaException) as ei:
        admin.delete_topics(["never-existed"])["never-existed"].result(10)
    assert ei.value.args[0].code() == 3  # UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(KafkaException) as ei:
        admin.delete_topics(["__consumer_offsets"])["__consumer_offsets"].result(10)
    assert ei.value.args[0].code() == 17  # INVALID_TOPIC_EXCEPTION
    create_topic(bootstrap, "gone", 1)  # the name can be reused, starting empty
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "x"})
    assert c.get_watermark_offsets(TopicPartition("gone", 0), timeout=10) == (0, 0)
    c.close()
