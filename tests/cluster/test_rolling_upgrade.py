"""A rolling upgrade: a 3-node cluster of the previous release, under load, has its nodes replaced
by this checkout's build one at a time (a clean stop, a start on the same data directory).

The previous release is the newest one the CHANGELOG names (``Release **v0.N**: commit <sha>``);
its tree is taken from this clone's history with ``git archive`` and run with this checkout's
virtualenv. Through the upgrade an idempotent producer (acks=all) and a committing consumer group
run: every acknowledged produce is consumed, no acknowledged commit is lost, the group does not
rebalance, and every node ends on this build with leadership balanced.
"""

from __future__ import annotations

import io
import logging
import re
import subprocess
import tarfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.release import RELEASE
from cluster.tools.local_cluster import REPO_ROOT
from coordinator.partitioner import partition_for
from tests.cluster.cluster_harness import FAST_LEADER_BALANCE, Cluster, wait_for

pytestmark = pytest.mark.cluster
PARTITIONS = 6
RELEASE_LINE = re.compile(r"^Release \*\*(v\d+\.\d+)\*\*: commit ([0-9a-f]{40})", re.M)


def previous_release() -> tuple[str, str]:
    """(name, commit) of the newest release the CHANGELOG names."""
    found = RELEASE_LINE.findall((REPO_ROOT / "CHANGELOG.md").read_text(encoding="utf-8"))
    assert found, "the CHANGELOG names no release (a line 'Release **v0.N**: commit <sha>')"
    name, commit = found[0]
    return str(name), str(commit)


def release_tree(commit: str, dest: Path) -> Path:
    """The source tree of ``commit``, extracted into ``dest``."""
    known = subprocess.run(["git", "-C", str(REPO_ROOT), "cat-file", "-e", f"{commit}^{{commit}}"],
                           capture_output=True, check=False)
    if known.returncode != 0:
        pytest.skip(f"release commit {commit} is not in this clone's history (a shallow clone?)")
    archive = subprocess.run(["git", "-C", str(REPO_ROOT), "archive", "--format=tar", commit],
                             capture_output=True, check=True).stdout
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest


class GroupLog(logging.Handler):
    """librdkafka's group debug lines that say why a consumer (re)joined: the JoinGroup responses
    (with the generation), the rejoins and their reasons, failed heartbeats and commits."""

    KEEP = re.compile(r"JoinGroup response|^REJOIN|Heartbeat.*(?:error|fail)|OffsetCommit.*(?:error|fail)", re.I)

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        if self.KEEP.search(line):
            self.lines.append(f"{time.strftime('%H:%M:%S')} {line[:300]}")

    def generation(self) -> int:
        """The latest generation a JoinGroup response gave (-1: none yet)."""
        found = [int(g) for g in re.findall(r"GenerationId (-?\d+)", "\n".join(self.lines))]
        return max(found, default=-1)


class Load:
    """An idempotent producer and a group of two committing consumers, recorded."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.lock = threading.Lock()
        self.produced: set[tuple[int, int]] = set()
        self.consumed: set[tuple[int, int]] = set()
        self.acked_commits: list[tuple[int, int]] = []
        self.assignments = 0
        self.assigned: set[str] = set()  # the consumers (threads) assigned partitions so far
        self.step = "start"  # what the test was doing (told when an assignment is unexpected)
        self.generation_at_stop: int | None = None  # the group's generation when stop() began closing consumers
        self.assignments_at_stop: int | None = None
        self.assigned_during: list[str] = []
        self.errors: list[str] = []
        self.group_log = GroupLog()
        self._rdkafka_log = logging.getLogger(f"rdkafka-{uuid.uuid4().hex[:8]}")
        self._rdkafka_log.addHandler(self.group_log)
        self._rdkafka_log.setLevel(logging.DEBUG)
        self._rdkafka_log.propagate = False
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.threads = [threading.Thread(target=self._produce, name="upgrade-producer")]
        self.threads += [threading.Thread(target=self._consume, name=f"upgrade-consumer-{i}") for i in range(2)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        self.stop_producing.set()
        self.threads[0].join(90)
        deadline = time.time() + 60
        while time.time() < deadline and not self.produced <= self.consumed:
            time.sleep(0.2)
        # What the group went through ends here: the consumers close one after the other, and the
        # first one's LeaveGroup rebalances the group for the other (a new generation that is the
        # test's doing, not the cluster's).
        with self.lock:
            self.generation_at_stop = self.group_log.generation()
            self.assignments_at_stop = self.assignments
        self.stop_consuming.set()
        for t in self.threads[1:]:
            t.join(60)

    def stable(self) -> tuple[int, int]:
        """(assignments, generation) once the group is stable: no assignment for 3 s."""
        before = -1
        while before != self.assignments:
            before = self.assignments
            time.sleep(3)
        return before, self.group_log.generation()

    def check_no_rebalance(self, assignments: int, generation: int, coordinators: Callable[[], str]) -> None:
        """The group kept ``generation``: no rebalance since. A consumer that rejoined on its own
        into the same generation (librdkafka does on some client-side events) reassigns only
        itself, not the group; it is reported, with librdkafka's reason. ``coordinators``: what
        the nodes logged of the group, told when it did rebalance."""
        at_stop = self.group_log.generation() if self.generation_at_stop is None else self.generation_at_stop
        upto = self.assignments if self.assignments_at_stop is None else self.assignments_at_stop
        extra = self.assigned_during[assignments:upto]
        assert generation >= 0 and at_stop == generation, (
            f"the group rebalanced: generation {generation} -> {at_stop} "
            f"({upto - assignments} assignments: {extra}); coordinators:\n{coordinators()}\n"
            f"librdkafka: {self.group_log.lines[-30:]}")
        if extra:
            print(f"a consumer rejoined generation {generation} on its own: {extra}; librdkafka: "
                  f"{[ln for ln in self.group_log.lines if 'REJOIN' in ln or 'fail' in ln.lower()][-10:]}")

    def _produce(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 120000})

        def acked(err, msg) -> None:  # type: ignore[no-untyped-def]
            if err is None:
                with self.lock:
                    self.produced.add((msg.partition(), msg.offset()))

        i = 0
        while not self.stop_producing.is_set():
            if len(p) > 500:  # keep the queue short: the final flush stays quick
                p.poll(0.05)
                continue
            for _ in range(10):
                p.produce(self.topic, value=f"v{i}".encode(), key=str(i).encode(), on_delivery=acked)
                i += 1
            p.poll(0.05)
        p.flush(90)

    def _consume(self) -> None:
        def on_assign(_c: Consumer, _parts: list[TopicPartition]) -> None:
            with self.lock:
                self.assignments += 1
                self.assigned.add(threading.current_thread().name)
                self.assigned_during.append(f"{time.strftime('%H:%M:%S')} {threading.current_thread().name}: "
                                            f"{self.step}")

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "session.timeout.ms": 30000, "heartbeat.interval.ms": 1000,
                      "debug": "cgrp", "logger": self._rdkafka_log})
        c.subscribe([self.topic], on_assign=on_assign)
        while not self.stop_consuming.is_set():
            msgs = [m for m in c.consume(num_messages=500, timeout=0.2) if not m.error()]
            if not msgs:
                continue
            positions = {m.partition(): m.offset() + 1 for m in msgs}
            with self.lock:
                self.consumed |= {(m.partition(), m.offset()) for m in msgs}
            try:
                done = c.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in positions.items()],
                                asynchronous=False)
            except KafkaException as e:
                self.errors.append(str(e))  # failed or unknown outcome: not acknowledged
                continue
            with self.lock:
                self.acked_commits.extend((tp.partition, tp.offset) for tp in done if tp.error is None)
        c.close()


def offsets_leaders(admin: AdminClient) -> Counter[int]:
    md = admin.list_topics("__consumer_offsets", timeout=10)
    return Counter(p.leader for p in md.topics["__consumer_offsets"].partitions.values())


def group_story(c: Cluster, group: str, admin: AdminClient) -> str:
    """Each node's log lines about ``group`` and its coordinator partition's leadership."""
    try:
        p = partition_for(group, len(admin.list_topics("__consumer_offsets", timeout=10)
                                     .topics["__consumer_offsets"].partitions))
    except KafkaException as e:
        return f"(no metadata: {e})"
    wanted = (f"group={group}", f"partition=__consumer_offsets-{p} ", f"partition={p} ")
    out = [f"node {i}: {ln}" for i in range(c.n) for ln in c.log_text(i).splitlines()
           if any(w in ln + " " for w in wanted)]
    return "\n".join(out[-80:])


def started_releases(c: Cluster, i: int) -> list[str]:
    """The release each start of node ``i`` logged ("" for a build that logged none)."""
    return [m.group(1) or "" for m in re.finditer(r"event=node_started [^\n]*?(?:release=(\S+))?$",
                                                   c.log_text(i), re.M)]


def test_a_cluster_of_the_previous_release_upgrades_one_node_at_a_time_under_load(tmp_path: Path) -> None:
    name, commit = previous_release()
    old = release_tree(commit, tmp_path / f"release-{name}")
    c = Cluster(tmp_path / "cluster", settings={"group.initial.rebalance.delay.ms": 500, **FAST_LEADER_BALANCE})
    c.roots = {i: old for i in range(c.n)}
    load: Load | None = None
    failed = True
    try:
        c.start()
        for i in range(c.n):
            assert started_releases(c, i)[-1] != RELEASE, f"node {i} did not start from {name}'s tree"
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        topic, group = f"up-{uuid.uuid4().hex[:6]}", f"upg-{uuid.uuid4().hex[:6]}"
        for f in admin.create_topics([NewTopic(topic, PARTITIONS, 3)]).values():
            f.result(timeout=30)
        load = Load(c.bootstrap, topic, group)
        load.start()
        wait_for(lambda: len(load.acked_commits) > 20 and len(load.consumed) > 500 and len(load.assigned) == 2, 60,
                 "the load to run, both consumers assigned")
        assignments_before, generation = load.stable()

        for i in range(c.n):
            load.step = f"upgrading node {i}"
            assert c.terminate(i), f"node {i} was not running"
            c.roots.pop(i)
            c.start(i)
            assert started_releases(c, i)[-1] == RELEASE, f"node {i} did not start on this build"
            commits = len(load.acked_commits)
            wait_for(lambda n=commits: len(load.acked_commits) > n + 10, 60,  # type: ignore[misc]
                     f"commits to go on after node {i} was upgraded")
            wait_for(lambda: min(offsets_leaders(admin).get(j, 0) for j in range(c.n)) >= 4, 60,
                     f"leadership to be balanced again after node {i} was upgraded",
                     tolerate=(KafkaException,))
        time.sleep(2)
        load.stop()

        assert all(c.alive(i) for i in range(c.n)), "a node stopped during the upgrade"
        assert load.produced, "nothing was produced"
        missing = load.produced - load.consumed
        assert not missing, f"{len(missing)} acknowledged produces were not consumed: {sorted(missing)[:5]}"
        load.check_no_rebalance(assignments_before, generation, lambda: group_story(c, group, admin))
        req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
        final = {tp.partition: tp.offset
                 for tp in admin.list_consumer_group_offsets([req])[group].result(timeout=15).topic_partitions}
        lost = [(p, o) for p, o in load.acked_commits if o > final.get(p, -1)]
        assert not lost, f"acknowledged commits lost: {lost[:5]}"
        print(f"upgraded {name} -> {RELEASE}: {len(load.produced)} produces, {len(load.acked_commits)} commits, "
              f"{len(load.errors)} commit errors")
        failed = False
    finally:
        if load is not None:
            load.stop_producing.set()
            load.stop_consuming.set()
            for t in load.threads:
                t.join(60)
        c.kill_all()
        if failed:
            for i in range(c.n):
                print(f"--- node {i} log ---\n{c.log_text(i)[-4000:]}")
