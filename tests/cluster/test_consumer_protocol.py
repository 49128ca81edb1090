"""The consumer group protocol (KIP-848) with real clients on a 3-node cluster: confluent-kafka
with ``group.protocol=consumer`` runs the round trip (6 partitions, 1000 messages, 3 consumers,
commits, a new consumer reads nothing); a member joining and one leaving move only the
partitions that must move (seen from the assignment callbacks); the admin client lists and
describes the group as a consumer group; a classic group is upgraded online by a rolling restart
of its members; the Java KafkaConsumer runs the round trip too; a SIGKILL of the group's
coordinator causes no reassignment."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.cli import main as kcoord
from cluster.tools.common import consumer_group_describe
from tests.cluster.cluster_harness import Cluster, running_cluster
from tests.cluster.test_failover import coordinator_of

pytestmark = pytest.mark.cluster
N = 1000
PARTITIONS = 6
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """One cluster for the module (each test has its own topic and group); the SIGKILL test is last."""
    yield from running_cluster(tmp_path_factory.mktemp("cluster"), request,
                               settings={"group.consumer.heartbeat.interval.ms": 500,
                                         "group.consumer.min.heartbeat.interval.ms": 500})


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    """Stops the test's consumers however the test ends."""
    event = threading.Event()
    yield event
    event.set()


def setup_topic(bootstrap: str, n: int = N) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"t-{suffix}", f"g-{suffix}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=3)]).values():
        f.result(timeout=20)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=f"m{i}".encode())
    assert p.flush(30) == 0
    return topic, group


def consumer(bootstrap: str, group: str, protocol: str = "consumer", **extra: object) -> Consumer:
    config: dict[str, object] = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                                 "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra}
    if protocol == "classic":
        config.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
    return Consumer(config)


class Member:
    """A consumer in its own thread, recording what it reads and every assignment change."""

    def __init__(self, bootstrap: str, group: str, topic: str, seen: list[tuple[int, int]], lock: threading.Lock,
                 stop: threading.Event, name: str, protocol: str = "consumer") -> None:
        self.name = name
        self.owned: set[int] = set()
        self.events: list[tuple[str, frozenset[int]]] = []
        self.errors: list[str] = []
        self._c = consumer(bootstrap, group, protocol, **{"client.id": name})
        self._topic, self._seen, self._lock, self._stop = topic, seen, lock, stop
        self.leave = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _assign(self, c: Consumer, parts: list[TopicPartition]) -> None:
        ps = frozenset(tp.partition for tp in parts)
        self.events.append(("assign", ps))
        self.owned |= ps

    def _revoke(self, c: Consumer, parts: list[TopicPartition]) -> None:
        ps = frozenset(tp.partition for tp in parts)
        self.events.append(("revoke", ps))
        self.owned -= ps

    def _run(self) -> None:
        c = self._c
        c.subscribe([self._topic], on_assign=self._assign, on_revoke=self._revoke)
        try:
            while not self._stop.is_set() and not self.leave.is_set():
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error():
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        self.errors.append(str(m.error()))
                    continue
                with self._lock:
                    self._seen.append((m.partition(), m.offset()))
                c.commit(message=m, asynchronous=False)
        finally:
            c.close()


def wait_for(cond: object, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    c = consumer(bootstrap, group)
    try:
        return {tp.partition: tp.offset
                for tp in c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)}
    finally:
        c.close()


def test_confluent_kafka_round_trip_with_the_consumer_protocol(cluster: Cluster, stop: threading.Event,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    bootstrap = cluster.bootstrap
    topic, group = setup_topic(bootstrap)
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()
    members = [Member(bootstrap, group, topic, seen, lock, stop, f"m{i}") for i in range(3)]
    wait_for(lambda: len(set(seen)) >= N, 90, "every message")
    wait_for(lambda: sorted(p for m in members for p in m.owned) == list(range(PARTITIONS)), 30,
             "the partitions spread over the three members")
    assert all(len(m.owned) == 2 for m in members), [m.owned for m in members]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(timeout=20)
    assert group in {g.group_id for g in listed.valid}
    desc = admin.describe_consumer_groups([group])[group].result(timeout=20)
    assert desc.type == ConsumerGroupType.CONSUMER
    assert sorted(tp.partition for m in desc.members for tp in m.assignment.topic_partitions) == list(range(PARTITIONS))

    # kcoord groups describe: each member's epoch and assignment against the target (Kafka 4's columns)
    capsys.readouterr()
    assert kcoord(["groups", "describe", "--group", group, "--members", "--verbose", "--bootstrap-server",
                   bootstrap]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
                                "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    rows = [ln.split() for ln in lines[1:] if ln.strip()]
    assert sorted(r[3] for r in rows) == ["m0", "m1", "m2"]
    for _, _, _, _, n, epoch, current, target_epoch, target in rows:
        assert int(n) == 2 and current == target and current.startswith(f"{topic}:")
        assert int(epoch) == int(target_epoch) >= 3  # three joins
    assert kcoord(["groups", "describe", "--group", group, "--state", "--verbose", "--bootstrap-server",
                   bootstrap]) == 0
    state = capsys.readouterr().out.splitlines()
    assert state[0].split()[-3:] == ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
    assert state[1].split()[-4:] == ["Stable", rows[0][5], rows[0][5], "3"]

    stop.set()
    for m in members:
        m.thread.join(30)
    assert not [e for m in members for e in m.errors]
    assert len(seen) == len(set(seen)) == N, "a message was read twice or lost"
    assert sum(committed(bootstrap, group, topic).values()) == N

    late: list[tuple[int, int]] = []
    again = threading.Event()
    newcomer = Member(bootstrap, group, topic, late, threading.Lock(), again, "late")
    wait_for(lambda: len(newcomer.owned) == PARTITIONS, 30, "the newcomer to own every partition")
    time.sleep(2)
    again.set()
    newcomer.thread.join(30)
    assert late == []


def test_joining_and_leaving_move_only_what_must_move(cluster: Cluster, stop: threading.Event) -> None:
    bootstrap = cluster.bootstrap
    topic, group = setup_topic(bootstrap, n=60)
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()
    a = Member(bootstrap, group, topic, seen, lock, stop, "a")
    b = Member(bootstrap, group, topic, seen, lock, stop, "b")
    wait_for(lambda: len(a.owned) == len(b.owned) == 3, 30, "two members with three partitions each")
    before = {"a": set(a.owned), "b": set(b.owned)}
    a.events.clear(), b.events.clear()

    c = Member(bootstrap, group, topic, seen, lock, stop, "c")
    wait_for(lambda: len(a.owned) == len(b.owned) == len(c.owned) == 2, 30, "three members with two each")
    # each old member gave up exactly one partition and got nothing new; nobody else lost any
    for m in (a, b):
        assert m.owned < before[m.name]
        assert [e for e in m.events if e[0] == "assign" and e[1]] == [], m.events
        assert sum(len(ps) for kind, ps in m.events if kind == "revoke") == 1, m.events
    assert c.owned == (before["a"] | before["b"]) - a.owned - b.owned

    kept = {"a": set(a.owned), "c": set(c.owned)}
    a.events.clear(), c.events.clear()
    b.leave.set()
    b.thread.join(30)
    wait_for(lambda: len(a.owned) == len(c.owned) == 3, 30, "b's partitions shared by the other two")
    for m in (a, c):
        assert m.owned > kept[m.name]  # kept everything, gained one
        assert [e for e in m.events if e[0] == "revoke" and e[1]] == [], m.events
    stop.set()
    for m in (a, c):
        m.thread.join(30)


def test_a_regex_subscription_reaches_a_topic_created_later(cluster: Cluster) -> None:
    bootstrap = cluster.bootstrap
    suffix = uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def create(name: str) -> None:
        for f in admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=3)]).values():
            f.result(timeout=20)

    create(f"rx-{suffix}-a")
    create(f"other-{suffix}")
    c = consumer(bootstrap, f"g-{suffix}")
    got: set[tuple[str, int]] = set()
    c.subscribe([f"^rx-{suffix}-.*"], on_assign=lambda _c, ps: got.update((tp.topic, tp.partition) for tp in ps))
    try:
        deadline = time.time() + 30
        while len(got) < 2 and time.time() < deadline:
            c.poll(0.2)
        assert got == {(f"rx-{suffix}-a", 0), (f"rx-{suffix}-a", 1)}
        coordinator = admin.describe_consumer_groups([f"g-{suffix}"])[f"g-{suffix}"].result(timeout=20).coordinator
        described = consumer_group_describe(coordinator.host, coordinator.port, f"g-{suffix}", 10)
        # librdkafka sends its regexes joined as "(a)|(b)"; the coordinator resolves them
        assert described.members[0].subscribed_topic_regex == f"(^rx-{suffix}-.*)"
        create(f"rx-{suffix}-b")
        deadline = time.time() + 30
        while len(got) < 4 and time.time() < deadline:
            c.poll(0.2)
        assert {t for t, _ in got} == {f"rx-{suffix}-a", f"rx-{suffix}-b"}, got
    finally:
        c.close()


def test_an_online_upgrade_of_a_classic_group_by_a_rolling_restart(cluster: Cluster, stop: threading.Event) -> None:
    """Three classic consumers are replaced one by one by consumer-protocol ones: the first of
    these converts the group, the classic members go on inside it until their turn, and no
    message is lost on the way."""
    bootstrap = cluster.bootstrap
    topic, group = setup_topic(bootstrap, n=300)
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    members = [Member(bootstrap, group, topic, seen, lock, stop, f"classic{i}", "classic") for i in range(3)]
    wait_for(lambda: len(set(seen)) >= 300 and sum(len(m.owned) for m in members) == PARTITIONS, 60,
             "the classic group to read everything")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert admin.describe_consumer_groups([group])[group].result(timeout=20).type == ConsumerGroupType.CLASSIC
    total = 300
    for i in range(3):
        # a consumer-protocol member joins (the first converts the group); the classic members learn
        # from their heartbeats that they must rejoin, and give it its share
        modern = Member(bootstrap, group, topic, seen, lock, stop, f"modern{i}")
        wait_for(lambda: sorted(len(m.owned) for m in [*members, modern]) == [1, 1, 2, 2], 60,  # noqa: B023
                 f"four members sharing the partitions at step {i}")
        described = admin.describe_consumer_groups([group])[group].result(timeout=20)
        assert described.type == ConsumerGroupType.CONSUMER and len(described.members) == 4
        members[i].leave.set()
        members[i].thread.join(30)
        members[i] = modern
        for k in range(100):
            p.produce(topic, key=str(k).encode(), value=f"step{i}".encode())
        assert p.flush(30) == 0
        total += 100
        wait_for(lambda: len(set(seen)) >= total, 60, f"the messages of step {i}")  # noqa: B023
        wait_for(lambda: [len(m.owned) for m in members] == [2, 2, 2], 60, f"a balanced group after step {i}")
    wait_for(lambda: sorted(p for m in members for p in m.owned) == list(range(PARTITIONS)), 60,
             "the consumer-protocol members to share every partition")
    assert len(set(seen)) == total
    assert not [e for m in members for e in m.errors]
    stop.set()
    for m in members:
        m.thread.join(30)
    assert sum(committed(bootstrap, group, topic).values()) == total


def test_java_kafka_consumer_round_trip_with_the_consumer_protocol(cluster: Cluster, tmp_path: Path) -> None:
    from tests.cluster.java_client import compile_program

    bootstrap = cluster.bootstrap
    topic, group = setup_topic(bootstrap)
    cp = compile_program(ROOT / "tests/cluster/java/ConsumerProtocol.java", tmp_path / "classes")
    out = subprocess.run(["java", "-cp", cp, "ConsumerProtocol", bootstrap, topic, group, str(N), str(PARTITIONS)],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["unique"] == N and result["consumed"] == N, result  # every message once
    assert result["owned"] == [2, 2, 2], result
    assert (result["late_assigned"], result["late_read"]) == (PARTITIONS, 0), result
    assert sum(committed(bootstrap, group, topic).values()) == N
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(timeout=20)
    assert group in {g.group_id for g in listed.valid}  # the Java client spoke the consumer protocol


def test_a_coordinator_sigkill_causes_no_reassignment(cluster: Cluster, stop: threading.Event) -> None:
    bootstrap = cluster.bootstrap
    topic, group = setup_topic(bootstrap, n=60)
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()
    members = [Member(bootstrap, group, topic, seen, lock, stop, f"m{i}") for i in range(2)]
    wait_for(lambda: all(len(m.owned) == 3 for m in members), 30, "a stable group")
    time.sleep(1)
    for m in members:
        m.events.clear()
    victim = coordinator_of(AdminClient({"bootstrap.servers": bootstrap}), group)
    owned = [set(m.owned) for m in members]
    cluster.kill(victim)
    # members keep heartbeating through the new coordinator: no revocation, no new assignment
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(60):
        p.produce(topic, key=str(i).encode(), value=b"after")
    p.flush(30)
    wait_for(lambda: len(set(seen)) >= 120, 60, "the messages produced after the kill")
    time.sleep(3)
    assert [m.events for m in members] == [[], []]
    assert [m.owned for m in members] == owned
    stop.set()
    for m in members:
        m.thread.join(30)
