"""Transactions on a real 3-node cluster: the coordinator found through FindCoordinator (key type
1), driven over the wire, by confluent-kafka (transactional producer, read_committed consumers,
the consume-transform-produce loop) and by KafkaJS, and surviving the SIGKILL of its node, also
between deciding a commit and writing its markers.
"""

from __future__ import annotations

import datetime
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from cluster.tools.local_cluster import LocalCluster
from tests.cluster.cluster_harness import Cluster, running_cluster
from tests.cluster.test_data_plane import create_topic
from tests.wire.raw import RawConn

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    yield from running_cluster(tmp_path, request, {"group.initial.rebalance.delay.ms": 0})


def _ask(bs: str, api_key: int, version: int, body: Any) -> Any:
    c = RawConn(bs)
    try:
        c.request(api_key, version, body)
        return c.response(api_key, version)
    finally:
        c.close()


def _coordinator(cluster: LocalCluster, tid: str, timeout: float = 20.0) -> int:
    """The node id FindCoordinator names for ``tid`` (asking the live nodes in turn)."""
    from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for i in range(cluster.n):
            if not cluster.alive(i):
                continue
            try:
                r = _ask(cluster.address(i), 10, 3, FindCoordinatorRequest(key=tid, key_type=1))
            except OSError:
                continue
            if r.error_code == 0 and cluster.alive(r.node_id):
                return int(r.node_id)
        time.sleep(0.1)
    raise AssertionError(f"no transaction coordinator for {tid!r}")


def _until_ok(cluster: LocalCluster, tid: str, api_key: int, version: int, body: Any, ok: Any) -> Any:
    """Send to the coordinator until ``ok(response)`` (a coordinator moving or loading is retried)."""
    deadline = time.monotonic() + 30
    while True:
        r = _ask(cluster.address(_coordinator(cluster, tid)), api_key, version, body)
        if ok(r) or time.monotonic() > deadline:
            return r
        time.sleep(0.1)


def _init(cluster: LocalCluster, tid: str) -> tuple[int, int]:
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

    r = _until_ok(cluster, tid, 22, 4, InitProducerIdRequest(
        transactional_id=tid, transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1, producer_epoch=-1),
        lambda r: r.error_code == 0)
    assert r.error_code == 0
    return int(r.producer_id), int(r.producer_epoch)


def _describe(cluster: LocalCluster, tid: str) -> Any:
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest

    (state,) = _until_ok(cluster, tid, 65, 0, DescribeTransactionsRequest(transactional_ids=(tid,)),
                         lambda r: r.transaction_states[0].error_code == 0).transaction_states
    return state


def test_a_transaction_over_the_wire_and_its_coordinator_moving(cluster: Cluster) -> None:
    from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
    from kio.schema.end_txn.v3.request import EndTxnRequest
    from kio.schema.list_transactions.v1.request import ListTransactionsRequest

    create_topic(cluster.bootstrap, "out", 2)
    tid = "wire-txn"
    pid, epoch = _init(cluster, tid)
    assert epoch == 0
    add = _until_ok(cluster, tid, 24, 3, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(AddPartitionsToTxnTopic(name="out", partitions=(0, 1)),)), lambda r: True)
    assert {(t.name, p.partition_index, p.partition_error_code) for t in add.results_by_topic_v3_and_below
            for p in t.results_by_partition} == {("out", 0, 0), ("out", 1, 0)}
    ongoing = _describe(cluster, tid)
    assert (ongoing.transaction_state, ongoing.producer_id, ongoing.producer_epoch) == ("Ongoing", pid, 0)
    assert {(t.topic, tuple(t.partitions)) for t in ongoing.topics} == {("out", (0, 1))}
    # an unknown partition: nothing is added; it says why, the others were not attempted
    bad = _until_ok(cluster, tid, 24, 3, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(AddPartitionsToTxnTopic(name="out", partitions=(0, 7)),)), lambda r: True)
    assert sorted((p.partition_index, p.partition_error_code) for t in bad.results_by_topic_v3_and_below
                  for p in t.results_by_partition) == [(0, 55), (7, 3)]
    end = _until_ok(cluster, tid, 26, 3, EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                                       committed=True), lambda r: True)
    assert end.error_code == 0
    deadline = time.monotonic() + 10
    while _describe(cluster, tid).transaction_state != "CompleteCommit":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    listed = {(t.transactional_id, t.transaction_state) for i in range(cluster.n)
              for t in _ask(cluster.address(i), 66, 1, ListTransactionsRequest(
                  state_filters=(), producer_id_filters=(), duration_filter=-1)).transaction_states}
    assert listed == {(tid, "CompleteCommit")}
    # kafka-transactions.sh's list and describe, as `kcoord transactions`
    tool = [sys.executable, "-m", "cluster.cli", "transactions", "--bootstrap-server", cluster.bootstrap]
    out = subprocess.run([*tool, "list"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:4] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert tid in out.stdout and "CompleteCommit" in out.stdout
    out = subprocess.run([*tool, "describe", "--transactional-id", tid], capture_output=True, text=True, timeout=60,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert f"{tid}" in out.stdout and f"{pid}" in out.stdout and "CompleteCommit" in out.stdout
    missing = subprocess.run([*tool, "describe", "--transactional-id", "nope"], capture_output=True, text=True,
                             timeout=60, cwd=ROOT)
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr.upper()

    # The coordinator's node dies: another takes the partition over from the replicated log.
    old = _coordinator(cluster, tid)
    cluster.kill(old)
    assert _coordinator(cluster, tid) != old
    assert _describe(cluster, tid).transaction_state == "CompleteCommit"
    assert _init(cluster, tid) == (pid, 1)  # the epoch moves on from what was replicated


def test_a_second_confluent_producer_with_the_same_id_fences_the_first(cluster: Cluster) -> None:
    conf = {"bootstrap.servers": cluster.bootstrap, "transactional.id": "ck-txn", "transaction.timeout.ms": 30_000}
    first = Producer(conf)
    first.init_transactions(30)
    second = Producer(conf)
    second.init_transactions(30)  # bumps the epoch: the first producer is now a zombie
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "ck-txn-group"})
    try:
        first.begin_transaction()
        with pytest.raises(KafkaException) as raised:
            first.send_offsets_to_transaction([TopicPartition("in", 0, 5)], consumer.consumer_group_metadata(), 30)
        err = raised.value.args[0]
        assert err.fatal(), err
        assert "fenced" in err.str().lower() or "epoch" in err.str().lower(), err.str()
    finally:
        consumer.close()


def _committed(bs: str, group: str, topic: str, partition: int) -> int:
    """The offset ``group`` has committed for one partition (negative: none)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": group})
    try:
        (tp,) = c.committed([TopicPartition(topic, partition)], 10)
    finally:
        c.close()
    return int(tp.offset)


def _consume(bs: str, topic: str, partitions: int, isolation: str, want: int, settle_s: float = 2.0) -> list[str]:
    """Every value a consumer with ``isolation`` reads from the start: until ``want`` values, then
    ``settle_s`` more to see that nothing else comes."""
    c = Consumer({"bootstrap.servers": bs, "group.id": f"reader-{isolation}", "isolation.level": isolation,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[str] = []
    deadline = time.monotonic() + 30
    settle_until: float | None = None
    try:
        while time.monotonic() < (settle_until or deadline):
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append((m.value() or b"").decode())
            if settle_until is None and len(got) >= want:
                settle_until = time.monotonic() + settle_s
    finally:
        c.close()
    return got


def test_read_committed_consumers_see_committed_output_only(cluster: Cluster) -> None:
    bs = cluster.bootstrap
    create_topic(bs, "eos-out", 3)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "eos-1", "linger.ms": 5})
    p.init_transactions(30)
    for label, finish in (("aborted", p.abort_transaction), ("committed", p.commit_transaction)):
        p.begin_transaction()
        for i in range(30):
            p.produce("eos-out", key=str(i).encode(), value=f"{label}-{i}".encode())
        p.flush(30)
        finish(30)
    p.begin_transaction()
    for i in range(10):
        p.produce("eos-out", key=str(i).encode(), value=f"open-{i}".encode())
    p.flush(30)  # written, not yet committed

    committed = {f"committed-{i}" for i in range(30)}
    assert sorted(_consume(bs, "eos-out", 3, "read_committed", 30)) == sorted(committed)
    everything = _consume(bs, "eos-out", 3, "read_uncommitted", 70)
    assert len(everything) == 70 and committed <= set(everything)
    p.commit_transaction(30)
    later = _consume(bs, "eos-out", 3, "read_committed", 40)
    assert set(later) == committed | {f"open-{i}" for i in range(10)} and len(later) == 40


def _input_and_output(bs: str, source_topic: str, output_topic: str, n: int) -> None:
    """Two two-partition topics, the first holding ``n`` records ``in-<i>`` keyed ``<i>``."""
    create_topic(bs, source_topic, 2)
    create_topic(bs, output_topic, 2)
    source = Producer({"bootstrap.servers": bs})
    for i in range(n):
        source.produce(source_topic, key=str(i).encode(), value=f"in-{i}".encode(), partition=i % 2)
    assert source.flush(30) == 0


def test_a_consume_transform_produce_loop_is_exactly_once(cluster: Cluster) -> None:
    """confluent-kafka's exactly-once loop: input offsets go into the producer's transaction
    (send_offsets_to_transaction); an aborted round leaves neither output nor offsets, and the
    consumer rewinds to the committed offsets."""
    from confluent_kafka import OFFSET_BEGINNING

    bs = cluster.bootstrap
    _input_and_output(bs, "ctp-in", "ctp-out", 40)
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "ctp", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": bs, "transactional.id": "ctp-1", "linger.ms": 5})
    producer.init_transactions(30)
    consumer.subscribe(["ctp-in"])
    done: set[str] = set()
    rounds = aborted = 0
    deadline = time.monotonic() + 60
    try:
        while len(done) < 40 and time.monotonic() < deadline:
            msgs = [m for m in consumer.consume(num_messages=8, timeout=1.0) if m.error() is None]
            if not msgs:
                continue
            rounds += 1
            producer.begin_transaction()
            for m in msgs:
                producer.produce("ctp-out", key=m.key(), value=b"T:" + (m.value() or b""))
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            if rounds == 2:  # abort one round: no output, no offsets; read it again
                producer.abort_transaction(30)
                aborted += 1
                for tp in consumer.committed(consumer.assignment(), 10):
                    consumer.seek(TopicPartition(tp.topic, tp.partition,
                                                 tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
                continue
            producer.commit_transaction(30)
            done |= {(m.value() or b"").decode() for m in msgs}
        committed = {tp.partition: tp.offset for tp in consumer.committed(
            [TopicPartition("ctp-in", 0), TopicPartition("ctp-in", 1)], 10)}
    finally:
        consumer.close()
    assert aborted == 1 and len(done) == 40
    assert committed == {0: 20, 1: 20}
    out = _consume(bs, "ctp-out", 2, "read_committed", 40)
    assert sorted(out) == sorted(f"T:in-{i}" for i in range(40))  # each exactly once
    assert len(_consume(bs, "ctp-out", 2, "read_uncommitted", 41, settle_s=1.0)) > 40  # the aborted round is there


def test_a_new_coordinator_completes_a_transaction_its_predecessor_left_in_prepare_commit(cluster: Cluster) -> None:
    """The markers cannot reach the data partition's leader (paused) when the coordinator dies
    right after deciding to commit: the next coordinator finds PrepareCommit in the log, writes
    the markers and completes the transaction."""
    import signal

    from confluent_kafka.admin import AdminClient

    bs = cluster.bootstrap
    create_topic(bs, "fo-out", 3)
    tid = "fo-txn"
    p = Producer({"bootstrap.servers": bs, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(30)
    coordinator = _coordinator(cluster, tid)
    leaders = {pid: part.leader for pid, part in AdminClient({"bootstrap.servers": bs}).list_topics(
        "fo-out", timeout=10).topics["fo-out"].partitions.items()}
    partition = next(i for i, leader in leaders.items() if leader != coordinator)
    paused = leaders[partition]
    p.begin_transaction()
    for i in range(20):
        p.produce("fo-out", value=f"fo-{i}".encode(), partition=partition)
    assert p.flush(30) == 0
    cluster.signal(paused, signal.SIGSTOP)  # its marker cannot be written now
    try:
        p.commit_transaction(30)  # answered once PrepareCommit is durable
        state = _describe_on(cluster.address(coordinator), tid)
        assert state.transaction_state == "PrepareCommit", state
        cluster.kill(coordinator)
    finally:
        cluster.signal(paused, signal.SIGCONT)
    deadline = time.monotonic() + 30
    while _describe(cluster, tid).transaction_state != "CompleteCommit":
        assert time.monotonic() < deadline, "the new coordinator did not complete the transaction"
        time.sleep(0.2)
    survivors = [i for i in range(cluster.n) if i != coordinator]
    assert any(f"event=txn_markers_written transactional_id='{tid}'" in cluster.log_text(i) for i in survivors)
    got = _consume(bs, "fo-out", 3, "read_committed", 20)
    assert sorted(got) == sorted(f"fo-{i}" for i in range(20))


def _describe_on(address: str, tid: str) -> Any:
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest

    (state,) = _ask(address, 65, 0, DescribeTransactionsRequest(transactional_ids=(tid,))).transaction_states
    return state


@pytest.mark.skipif(shutil.which("node") is None or not (ROOT / "node_modules" / "kafkajs").is_dir(),
                    reason="node or kafkajs not installed")
def test_kafkajs_transactions_with_offsets(cluster: Cluster) -> None:
    bs = cluster.bootstrap
    create_topic(bs, "kjs-txn", 2)
    out = subprocess.run(["node", str(ROOT / "tests/cluster/js/kjs_txn.js"), bs, "kjs-txn", "kjs-eos"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"aborted": 10, "committed": 10}
    got = _consume(bs, "kjs-txn", 2, "read_committed", 10)
    assert sorted(got) == sorted(f"kjs-committed-{i}" for i in range(10))
    assert _committed(bs, "kjs-eos", "kjs-txn", 0) == 7


def _txn_requests(c: Cluster) -> dict[tuple[str, str], int]:
    """``kcoord_transaction_requests_total`` summed over the nodes: (api, protocol) -> count."""
    from tests.cluster.cluster_harness import scrape

    counts: dict[tuple[str, str], int] = {}
    for port in c.metrics_ports.values():
        for (name, labels), value in scrape(port).items():
            if name == "kcoord_transaction_requests_total":
                key = (dict(labels)["api"], dict(labels)["protocol"])
                counts[key] = counts.get(key, 0) + int(value)
    return counts


@pytest.fixture
def metered(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A cluster whose nodes serve Prometheus metrics."""
    yield from running_cluster(tmp_path / "cluster", request, {"group.initial.rebalance.delay.ms": 0}, metrics=True)


def test_java_producers_run_transaction_version_2_and_librdkafka_version_1_side_by_side(
        metered: Cluster, tmp_path: Path) -> None:
    """The 4.4 Java client sees ``transaction.version`` 2 finalized and stops sending
    AddPartitionsToTxn and AddOffsetsToTxn: every end bumps its epoch (EndTxn v5), its partitions
    and its group's offsets partition are added by their leaders, and its exactly-once loop, an
    aborted round and a fenced zombie included, still reads back exactly once. librdkafka, on
    transaction version 1, runs on the same cluster as before."""
    from tests.cluster.java_client import compile_program

    c = metered
    bs = c.bootstrap
    _input_and_output(bs, "tv2-in", "tv2-out", 50)
    cp = compile_program(ROOT / "tests/cluster/java/TxnEos.java", tmp_path / "classes")
    out = subprocess.run(["java", "-cp", cp, "TxnEos", bs, "tv2-in", "tv2-out", "50"], capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["aborted"] > 0 and res["fenced"] is True, res
    assert (res["consumed"], res["output"], res["unique"]) == (50, 50, 50), res  # each input once, read_committed
    java = _txn_requests(c)
    assert java.get(("AddPartitionsToTxn", "1"), 0) == 0 and java.get(("AddOffsetsToTxn", "1"), 0) == 0, java
    assert java.get(("EndTxn", "1"), 0) == 0 and java.get(("TxnOffsetCommit", "1"), 0) == 0, java
    assert java[("EndTxn", "2")] >= 3 and java[("TxnOffsetCommit", "2")] >= 2, java
    assert java[("LeaderAdd", "2")] >= 3, java  # the output partitions and the group's offsets partition

    p = Producer({"bootstrap.servers": bs, "transactional.id": "tv1-rdkafka"})
    p.init_transactions(30)
    for commit in (False, True):
        p.begin_transaction()
        for i in range(10):
            p.produce("tv2-out", key=b"k", value=f"rd-{commit}-{i}".encode(), partition=i % 2)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    both = _txn_requests(c)
    assert both.get(("AddPartitionsToTxn", "1"), 0) > 0 and both.get(("EndTxn", "1"), 0) >= 1, both
    got = _consume(bs, "tv2-out", 2, "read_committed", 60)
    assert sorted(got) == sorted([f"J:in-{i}" for i in range(50)] + [f"rd-True-{i}" for i in range(10)])


def test_aiokafka_transactions_on_version_0_of_every_transactional_api(cluster: Cluster) -> None:
    """aiokafka sends only v0 of InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
    TxnOffsetCommit: an aborted and a committed transaction, offsets in the committed one."""
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTP

    bs = cluster.bootstrap
    create_topic(bs, "aio-txn", 2)

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bs, transactional_id="aio-txn")
        await producer.start()
        try:
            await producer.begin_transaction()
            for i in range(10):
                await producer.send_and_wait("aio-txn", f"aio-aborted-{i}".encode())
            await producer.abort_transaction()
            async with producer.transaction():
                for i in range(10):
                    await producer.send_and_wait("aio-txn", f"aio-committed-{i}".encode())
                await producer.send_offsets_to_transaction({AioTP("aio-txn", 1): 3}, "aio-eos")
        finally:
            await producer.stop()

    asyncio.run(run())
    assert sorted(_consume(bs, "aio-txn", 2, "read_committed", 10)) == sorted(f"aio-committed-{i}" for i in range(10))
    assert _committed(bs, "aio-eos", "aio-txn", 1) == 3
