"""Exactly-once under coordinator and leader crashes (a bounded run; the chaos scenario is the
long one): a confluent-kafka consume-transform-produce worker keeps its input offsets in its
transactions while the test SIGKILLs, in turn, the worker's transaction coordinator, its group's
coordinator and a leader of the output topic, restarting each. Every input record must end up in
the committed output exactly once, and nothing else may."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.cluster.cluster_harness import Cluster, running_cluster
from tests.cluster.test_data_plane import create_topic
from tests.cluster.test_transactions import _ask, _consume, _coordinator

# slow: on a loaded machine (a fresh-clone CI run) the worker still hung once in librdkafka's
# send_offsets_to_transaction after the output leader's kill (librdkafka #5511); until that is
# understood it runs on demand (`pytest -m slow tests/cluster/test_eos_under_kills.py`), not in make test.
pytestmark = [pytest.mark.cluster, pytest.mark.slow]
INPUTS = 300
TXN_ID, GROUP = "eos-worker", "eos-group"


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    yield from running_cluster(tmp_path, request, {"group.initial.rebalance.delay.ms": 0})


class Worker(threading.Thread):
    """The exactly-once loop with the error handling librdkafka documents: retriable errors are
    retried, abortable ones abort and rewind the consumer to its committed offsets, fatal ones
    (a fenced producer) start a new producer and consumer."""

    def __init__(self, bs: str) -> None:
        super().__init__(daemon=True)
        self.bs = bs
        self.stop = threading.Event()
        self.committed_inputs = 0
        self.aborts = 0
        self.restarts = 0
        self.errors: list[str] = []
        self.step = "start"  # what the worker is doing (for a failure's message)

    def _clients(self) -> tuple[Consumer, Producer]:
        consumer = Consumer({"bootstrap.servers": self.bs, "group.id": GROUP, "isolation.level": "read_committed",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "session.timeout.ms": 30000})
        producer = Producer({"bootstrap.servers": self.bs, "transactional.id": TXN_ID, "linger.ms": 5,
                             "transaction.timeout.ms": 30000})
        producer.init_transactions(60)
        consumer.subscribe(["eos-in"])
        return consumer, producer

    def _rewind(self, consumer: Consumer) -> None:
        parts = consumer.assignment()
        if parts:
            for tp in consumer.committed(parts, 30):
                consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))

    def run(self) -> None:
        consumer, producer = self._clients()
        while not self.stop.is_set():
            self.step = "consume"
            msgs = [m for m in consumer.consume(num_messages=20, timeout=0.5) if m.error() is None]
            if not msgs:
                continue
            try:
                self.step = "produce"
                producer.begin_transaction()
                for m in msgs:
                    producer.produce("eos-out", key=m.key(), value=b"T:" + (m.value() or b""))
                self.step = "send_offsets"
                producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                     consumer.consumer_group_metadata(), 60)
                self.step = "commit"
                self._commit(producer)
                self.committed_inputs += len(msgs)
            except KafkaException as e:
                err = e.args[0]
                self.errors.append(err.str())
                if err.fatal():
                    self.restarts += 1
                    consumer.close()
                    consumer, producer = self._clients()
                    continue
                try:
                    producer.abort_transaction(60)
                except KafkaException as e2:
                    self.errors.append("abort: " + e2.args[0].str())
                self.aborts += 1
                try:
                    self._rewind(consumer)
                except KafkaException as e3:
                    self.errors.append("rewind: " + e3.args[0].str())
        consumer.close()

    def _commit(self, producer: Producer) -> None:
        while True:
            try:
                producer.commit_transaction(60)
                return
            except KafkaException as e:
                if not e.args[0].retriable():
                    raise
                self.errors.append("commit retried: " + e.args[0].str())


def _group_coordinator(bs: str) -> int:
    from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest

    for addr in bs.split(","):
        try:
            r = _ask(addr, 10, 3, FindCoordinatorRequest(key=GROUP, key_type=0))
        except OSError:
            continue
        if r.error_code == 0:
            return int(r.node_id)
    return -1


def _victim(cluster: Cluster, bs: str, what: str) -> int:
    """The node to kill: the transaction coordinator, the group coordinator or an output leader."""
    if what == "transaction coordinator":
        return _coordinator(cluster, TXN_ID)
    if what == "group coordinator":
        return _group_coordinator(bs)
    return int(AdminClient({"bootstrap.servers": bs}).list_topics(timeout=10).topics["eos-out"].partitions[0].leader)


def _feed(bs: str, done: threading.Event) -> None:
    """The input, 20 records a second over the whole kill schedule (idempotent, acks=all)."""
    source = Producer({"bootstrap.servers": bs, "enable.idempotence": True})
    for i in range(INPUTS):
        source.produce("eos-in", key=str(i).encode(), value=f"in-{i}".encode(), partition=i % 3)
        source.poll(0)
        time.sleep(0.05)
    source.flush(60)
    done.set()


def test_exactly_once_while_coordinators_and_leaders_are_killed(cluster: Cluster) -> None:
    bs = cluster.bootstrap
    create_topic(bs, "eos-in", 3)
    create_topic(bs, "eos-out", 3)
    worker = Worker(bs)
    worker.start()
    fed = threading.Event()
    feeder = threading.Thread(target=_feed, args=(bs, fed), daemon=True)
    feeder.start()
    killed: list[tuple[str, int, int]] = []  # what, node, inputs committed by then
    try:
        for what in ("transaction coordinator", "group coordinator", "output leader"):
            time.sleep(3.0)
            victim = _victim(cluster, bs, what)
            if victim < 0 or not cluster.alive(victim):
                victim = len(killed) % cluster.n
            cluster.kill(victim)
            killed.append((what, victim, worker.committed_inputs))
            time.sleep(1.5)
            cluster.start(victim)
        deadline = time.monotonic() + 60
        while (worker.committed_inputs < INPUTS or not fed.is_set()) and time.monotonic() < deadline \
                and worker.is_alive():
            time.sleep(0.5)
    finally:
        worker.stop.set()
        worker.join(90)
    assert fed.is_set()
    assert all(0 < n < INPUTS for _, _, n in killed), killed  # the kills fell while work went on
    assert worker.committed_inputs >= INPUTS, (worker.committed_inputs, worker.step, killed, worker.errors[-10:])
    out = _consume(bs, "eos-out", 3, "read_committed", INPUTS, settle_s=3.0)
    dupes = {v for v in out if out.count(v) > 1}
    assert not dupes, (sorted(dupes)[:10], killed, worker.errors[-10:])
    assert sorted(out) == sorted(f"T:in-{i}" for i in range(INPUTS)), (len(out), killed)
    print(f"killed {killed}; aborts {worker.aborts}, producer restarts {worker.restarts}, "
          f"errors {len(worker.errors)}: {worker.errors[:5]}")
