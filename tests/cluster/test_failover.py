"""Three nodes: SIGKILL the coordinator of a group mid-consumption, restart it later.

Two groups whose coordinators are on different nodes — confluent-kafka consumers and
kafka-python consumers (one static) — consume a topic while a producer (acks=all) runs
throughout. Afterwards: every acknowledged produce was consumed by each group, no
acknowledged commit is lost, neither group rebalanced because of the kill, and
leadership is balanced again once the node is back.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from coordinator.partitioner import partition_for
from tests.cluster.cluster_harness import FAST_LEADER_BALANCE, Cluster

pytestmark = pytest.mark.cluster
PARTITIONS = 6


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    c = Cluster(tmp_path, settings={"group.initial.rebalance.delay.ms": 500, **FAST_LEADER_BALANCE}).start()
    yield c
    c.kill_all()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        for i in range(3):
            print(f"--- node {i} log ---\n{c.log_text(i)[-4000:]}")


def coordinator_of(admin: AdminClient, group: str) -> int:
    """The leader of the group's ``__consumer_offsets`` partition, as Metadata reports it."""
    p = partition_for(group, 16)
    for _ in range(100):
        md = admin.list_topics("__consumer_offsets", timeout=10)
        leader = md.topics["__consumer_offsets"].partitions[p].leader
        if leader >= 0:
            return int(leader)
        time.sleep(0.1)
    raise AssertionError(f"no coordinator for {group}")


def pick_groups(admin: AdminClient) -> tuple[str, str]:
    """Two fresh group names whose coordinators are different nodes."""
    first = f"ga-{uuid.uuid4().hex[:6]}"
    node_a = coordinator_of(admin, first)
    for _ in range(200):
        second = f"gb-{uuid.uuid4().hex[:6]}"
        if coordinator_of(admin, second) != node_a:
            return first, second
    raise AssertionError("could not find groups on different coordinators")


def offsets_leader_map(admin: AdminClient) -> dict[int, int]:
    md = admin.list_topics("__consumer_offsets", timeout=10)
    return {p.id: p.leader for p in md.topics["__consumer_offsets"].partitions.values()}


def offsets_leaders(admin: AdminClient) -> Counter[int]:
    return Counter(offsets_leader_map(admin).values())


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.consumed: set[tuple[int, int]] = set()
        self.acked_commits: list[tuple[int, int]] = []
        self.rebalances = 0
        self.errors: list[str] = []


def run_confluent(bootstrap: str, topic: str, group: str, rec: Recorder, stop: threading.Event) -> None:
    def on_assign(c: Consumer, parts: list[TopicPartition]) -> None:
        with rec.lock:
            rec.rebalances += 1

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 30000, "heartbeat.interval.ms": 1000})
    c.subscribe([topic], on_assign=on_assign)
    while not stop.is_set():
        msgs = [m for m in c.consume(num_messages=500, timeout=0.2) if not m.error()]
        if not msgs:
            continue
        positions: dict[int, int] = {}
        for m in msgs:
            positions[m.partition()] = m.offset() + 1
        with rec.lock:
            rec.consumed |= {(m.partition(), m.offset()) for m in msgs}
        try:
            done = c.commit(offsets=[TopicPartition(topic, p, o) for p, o in positions.items()],
                            asynchronous=False)
        except KafkaException as e:
            rec.errors.append(str(e))
            continue  # failed or unknown outcome: not acknowledged
        with rec.lock:
            rec.acked_commits.extend((tp.partition, tp.offset) for tp in done if tp.error is None)
    c.close()


def run_kafka_python(bootstrap: str, topic: str, group: str, rec: Recorder, stop: threading.Event,
                     instance_id: str | None) -> None:
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked) -> None:  # type: ignore[no-untyped-def]
            pass

        def on_partitions_assigned(self, assigned) -> None:  # type: ignore[no-untyped-def]
            with rec.lock:
                rec.rebalances += 1

    c = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, group_instance_id=instance_id, session_timeout_ms=30000,
                      heartbeat_interval_ms=1000)
    c.subscribe([topic], listener=Listener())
    while not stop.is_set():
        batch = c.poll(timeout_ms=200)
        if not batch:
            continue
        got = {(tp.partition, m.offset) for tp, msgs in batch.items() for m in msgs}
        with rec.lock:
            rec.consumed |= got
        positions = {tp: msgs[-1].offset + 1 for tp, msgs in batch.items()}
        try:
            c.commit()
        except Exception:  # noqa: BLE001 - failed or unknown: not acknowledged
            continue
        with rec.lock:
            rec.acked_commits.extend((tp.partition, off) for tp, off in positions.items())
    c.close()


def test_coordinator_sigkill_loses_nothing_and_causes_no_rebalance(cluster: Cluster) -> None:
    bs = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    topic = f"ft-{uuid.uuid4().hex[:6]}"
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 3)]).values():
        f.result(timeout=30)
    # Let preferred-leader balancing settle before the groups form: __consumer_offsets partition p
    # is Raft slot p + 1, preferred on node (p + 1) % 3 (cluster/raft_cluster.py).
    preferred = {p: (p + 1) % 3 for p in range(16)}
    deadline = time.time() + 30
    while time.time() < deadline and offsets_leader_map(admin) != preferred:
        time.sleep(0.2)
    assert offsets_leader_map(admin) == preferred, offsets_leader_map(admin)
    ga, gb = pick_groups(admin)

    produced: set[tuple[int, int]] = set()
    stop_producing = threading.Event()

    def produce() -> None:
        p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000})

        def cb(err, msg) -> None:  # type: ignore[no-untyped-def]
            if err is None:
                produced.add((msg.partition(), msg.offset()))

        i = 0
        while not stop_producing.is_set():
            # Produce as fast as the cluster acknowledges, but keep at most ~1000 records queued:
            # unbounded, the queue grew to ~27k records and the final flush took ~17 s.
            if len(p) > 1000:
                p.poll(0.05)
                continue
            for _ in range(10):
                p.produce(topic, value=f"m{i}".encode(), key=str(i).encode(), on_delivery=cb)
                i += 1
            p.poll(0.1)
        p.flush(60)

    producer = threading.Thread(target=produce)
    producer.start()
    rec_a, rec_b = Recorder(), Recorder()
    stop = threading.Event()
    threads = [threading.Thread(target=run_confluent, args=(bs, topic, ga, rec_a, stop)) for _ in range(2)]
    threads += [threading.Thread(target=run_kafka_python, args=(bs, topic, gb, rec_b, stop, iid))
                for iid in ("static-1", None)]
    for t in threads:
        t.start()
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not (len(rec_a.consumed) > 200 and len(rec_b.consumed) > 200):
            time.sleep(0.2)
        time.sleep(3)  # both groups stable and consuming
        rebalances_before = (rec_a.rebalances, rec_b.rebalances)
        victim = coordinator_of(admin, ga)
        assert coordinator_of(admin, gb) != victim, "the two groups share a coordinator"
        cluster.kill(victim)
        killed_at = time.time()
        # The group moves to a new coordinator and keeps committing.
        commits_at_kill = len(rec_a.acked_commits)
        while time.time() - killed_at < 30 and len(rec_a.acked_commits) <= commits_at_kill + 5:
            time.sleep(0.05)
        assert len(rec_a.acked_commits) > commits_at_kill + 5, (
            f"group A did not commit again after the kill; errors: {rec_a.errors[-5:]}")
        # The new coordinator started from the image it pre-replayed as a follower (and replayed only
        # the entries after it): the checks below on lost commits cover that path.
        loads = [m for i in range(3) if i != victim for m in re.finditer(
            rf"event=shard_loaded partition={partition_for(ga, 16)} .* prereplayed_entries=(\d+)", cluster.log_text(i))]
        assert loads and int(loads[-1].group(1)) > 0, [m.group(0) for m in loads]
        time.sleep(3)
        cluster.start(victim)
        deadline = time.time() + 30
        while time.time() < deadline and min(offsets_leaders(admin).get(i, 0) for i in range(3)) < 4:
            time.sleep(0.5)
        leaders = offsets_leaders(admin)
        assert min(leaders.get(i, 0) for i in range(3)) >= 4, f"leadership not balanced: {leaders}"
        time.sleep(2)
        stop_producing.set()
        producer.join(90)
        deadline = time.time() + 60
        while time.time() < deadline and not (produced <= rec_a.consumed and produced <= rec_b.consumed):
            time.sleep(0.2)
        rebalances_after = (rec_a.rebalances, rec_b.rebalances)
    finally:
        stop_producing.set()
        stop.set()
        for t in threads:
            t.join(60)
        producer.join(60)

    assert produced, "nothing was produced"
    for name, rec in (("A", rec_a), ("B", rec_b)):
        missing = produced - rec.consumed
        per_part = Counter(p for p, _ in missing)
        print(f"group {name}: consumed {len(rec.consumed)} of {len(produced)}, missing per partition "
              f"{dict(per_part)}, min missing {min(missing, default=None)}, rebalances {rec.rebalances}")
    assert produced <= rec_a.consumed, f"group A missed {len(produced - rec_a.consumed)} acknowledged produces"
    assert produced <= rec_b.consumed, f"group B missed {len(produced - rec_b.consumed)} acknowledged produces"
    assert rebalances_after == rebalances_before, "the coordinator failover caused a rebalance"
    for group, rec in ((ga, rec_a), (gb, rec_b)):
        req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
        final = {tp.partition: tp.offset for tp in
                 admin.list_consumer_group_offsets([req])[group].result(timeout=15).topic_partitions}
        lost = [(p, o) for p, o in rec.acked_commits if o > final.get(p, -1)]
        assert not lost, f"{group}: acknowledged commits lost: {lost[:5]}"
