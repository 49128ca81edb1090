"""Network partitions between the nodes of a live 3-node cluster, with real clients on both sides.

Where namespaces are available (root, as in CI) each node runs in its own network namespace and
the cuts are nftables rules that drop every packet between the nodes concerned; elsewhere the
cut is made in the Raft transport (``raft_fault_injection``). Clients always reach every node,
so a cut-off node keeps hearing from its clients: the case where a leader that did not step
down would answer from stale state.

Each scenario runs: a group of two members (session timeout 6 s; each records what it owns,
from assignment to revocation), a client committing every 50 ms in a group on the same
coordinator, a producer with acks=all, and a bystander group whose coordinator is on the
majority side. Each asserts: no partition had two owners at any moment; no acknowledged
commit or produce is lost; a cut-off leader answers Heartbeat with NOT_COORDINATOR and Fetch
with NOT_LEADER_OR_FOLLOWER within 2 s of the cut; the group commits again through the
majority within 3 s; after healing, leadership goes back to where it was (every node names it;
within 3 s of a bridge healing, where nothing moved), and the bystander
group, whose members never lost their coordinator, never rebalances.
"""

from __future__ import annotations

import datetime
import json
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cluster import link_control
from cluster.config import NodeConfig
from cluster.tools import netns, netns_faults
from coordinator.partitioner import partition_for
from tests.cluster.cluster_harness import FAST_LEADER_BALANCE, Cluster
from tests.wire.raw import RawConn

pytestmark = pytest.mark.cluster

# KCOORD_TESTS_NO_NETNS=1 runs the transport-cut variant where namespaces would work
NETNS = (netns.unavailable() is None and netns_faults.unavailable() is None
         and not os.environ.get("KCOORD_TESTS_NO_NETNS"))
OFFSETS_PARTITIONS = NodeConfig().offsets_topic_num_partitions
PARTITIONS = 6
NOT_COORDINATOR, NOT_LEADER_OR_FOLLOWER = 16, 6
# How long each cut lasts. Links that kept unacknowledged data through a cut resume at TCP's
# next retransmission, whose phase depends on the cut's length (KCOORD_NP_CUT_S=9.5 was one
# that took 7.4 s before the hub re-dialled silent peers).
CUT_S = float(os.environ.get("KCOORD_NP_CUT_S", "6.0"))


def _same_partition_group(prefix: str, as_group: str) -> str:
    want = partition_for(as_group, OFFSETS_PARTITIONS)
    return next(f"{prefix}-{i}" for i in range(10_000) if partition_for(f"{prefix}-{i}", OFFSETS_PARTITIONS) == want)


@dataclass(frozen=True)
class Names:
    """A scenario's topic and groups: the three scenarios share one cluster, each with names of its own."""

    topic: str
    commits: str  # the committer's group
    members: str  # the two members' group, on the same coordinator as ``commits``

    @classmethod
    def of(cls, kind: str) -> Names:
        commits = f"np-commits-{kind}"
        return cls(f"np-topic-{kind}", commits, _same_partition_group(f"np-members-{kind}", commits))


class Cutter:
    """Cuts between nodes: nftables in the nodes' namespaces, or the Raft transport's fault files."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        # Acknowledgements this soon after the cut may be of requests that got through before it
        # (a fault file is read within POLL_S; an nft rule holds once loaded, but a response can
        # be on its way).
        self.lag = 0.05 if cluster.net is not None else link_control.POLL_S + 0.05

    def apply(self, cuts: dict[int, list[int]]) -> None:
        if self.cluster.net is not None:
            netns_faults.apply_plan(self.cluster.net, netns_faults.cut_plan(self.cluster.net, cuts))
            return
        for i, n in enumerate(self.cluster.layout):
            (n.data_dir / "raft-faults.json").write_text(json.dumps({"cut": cuts.get(i, [])}))


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p.id: p.leader for p in md.topics[topic].partitions.values()}


def _leaders_seen_by(address: str, topic: str) -> dict[int, int]:
    """``topic``'s partition leaders as the node at ``address`` itself names them (a client's
    Metadata goes to any node it knows: this asks one)."""
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    c = RawConn(address)
    try:
        c.request(3, 12, MetadataRequest(topics=(MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=topic),),
                                         allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        return {p.partition_index: p.leader_id for p in c.response(3, 12).topics[0].partitions}
    finally:
        c.close()


def _coordinator(address: str, group: str) -> int:
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

    for _ in range(100):
        c = RawConn(address)
        c.request(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)))
        r = c.response(10, 4).coordinators[0]
        c.close()
        if r.error_code == 0:
            return int(r.node_id)
        time.sleep(0.1)
    raise AssertionError(f"no coordinator for {group}")


def _heartbeat_error(c: RawConn, group: str) -> int:
    """A heartbeat of an unknown member: UNKNOWN_MEMBER_ID when served, NOT_COORDINATOR when refused."""
    from kio.schema.heartbeat.v4.request import HeartbeatRequest

    c.request(12, 4, HeartbeatRequest(group_id=group, generation_id=1, member_id="probe", group_instance_id=None))
    return int(c.response(12, 4).error_code)


def _fetch_error(c: RawConn, topic: str, partition: int) -> int:
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

    c.request(1, 12, FetchRequest(
        cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(milliseconds=0), min_bytes=0,
        max_bytes=1 << 16, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=1 << 16),)),),
        forgotten_topics_data=(), rack_id=""))
    return int(c.response(1, 12).responses[0].partitions[0].error_code)


@dataclass
class Recorder:
    names: Names
    stop: threading.Event = field(default_factory=threading.Event)
    owners: list[tuple[float, str, str, tuple[int, ...]]] = field(default_factory=list)  # t, member, kind, parts
    commits: list[tuple[float, int]] = field(default_factory=list)  # t acknowledged, offset
    produced: dict[tuple[int, int], bytes] = field(default_factory=dict)  # (partition, offset) -> value
    produce_acks: list[float] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def spawn(self, fn: Any, *args: Any) -> None:
        t = threading.Thread(target=fn, args=args, daemon=True)
        t.start()
        self.threads.append(t)

    def member(self, bootstrap: str, group: str, name: str) -> None:
        from confluent_kafka import Consumer

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
                      "partition.assignment.strategy": "range", "auto.offset.reset": "earliest"})

        def on_assign(_c: object, parts: list[Any]) -> None:
            self.owners.append((time.monotonic(), name, "assign", tuple(p.partition for p in parts)))

        def on_revoke(_c: object, parts: list[Any]) -> None:
            self.owners.append((time.monotonic(), name, "revoke", tuple(p.partition for p in parts)))

        c.subscribe([self.names.topic], on_assign=on_assign, on_revoke=on_revoke)
        while not self.stop.is_set():
            c.poll(0.1)
        c.close()

    def committer(self, bootstrap: str) -> None:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": self.names.commits, "enable.auto.commit": False})
        n = 0
        while not self.stop.is_set():
            n += 1
            try:
                c.commit(offsets=[TopicPartition(self.names.topic, 0, n)], asynchronous=False)
                self.commits.append((time.monotonic(), n))
            except Exception:  # noqa: BLE001 - not acknowledged
                pass
            time.sleep(0.05)
        c.close()

    def producer(self, bootstrap: str) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": 20000})
        n = 0

        def acked(err: Any, msg: Any) -> None:
            if err is None:
                self.produced[(msg.partition(), msg.offset())] = msg.value()
                self.produce_acks.append(time.monotonic())

        while not self.stop.is_set():
            n += 1
            p.produce(self.names.topic, value=f"v{n}".encode(), partition=n % PARTITIONS, on_delivery=acked)
            p.poll(0.02)
        p.flush(30)

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(40)


def overlaps(events: list[tuple[float, str, str, tuple[int, ...]]], end: float) -> list[str]:
    """Moments when two members held one partition (each holds from its assign to its revoke)."""
    spans: dict[int, list[tuple[float, float, str]]] = {}
    held: dict[tuple[str, int], float] = {}
    for t, name, kind, parts in sorted(events):
        for p in parts:
            if kind == "assign":
                held[(name, p)] = t
            elif (name, p) in held:
                spans.setdefault(p, []).append((held.pop((name, p)), t, name))
    for (name, p), t in held.items():
        spans.setdefault(p, []).append((t, end, name))
    bad = []
    for p, ss in spans.items():
        for i, (a0, a1, an) in enumerate(ss):
            for b0, b1, bn in ss[i + 1:]:
                if an != bn and a0 < b1 and b0 < a1:
                    bad.append(f"partition {p}: {an} held it {a0:.2f}-{a1:.2f}, {bn} {b0:.2f}-{b1:.2f}")
    return bad


def _read_all(bootstrap: str, topic: str, want: dict[tuple[int, int], bytes]) -> dict[tuple[int, int], bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "np-reader", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + 60
    while not set(want) <= set(got) and time.monotonic() < deadline:
        for m in c.consume(500, 1.0):
            if m.error() is None:
                got[(m.partition(), m.offset())] = m.value()
    c.close()
    return got


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Cluster]]:
    """One cluster for the module's three scenarios (starting one and waiting for its preferred
    leaders took ~10 s of each): a scenario that fails kills it, and the next starts a fresh one."""
    held: dict[str, Cluster] = {}
    yield held
    if "cluster" in held:
        held.pop("cluster").kill_all()


def _scenario(shared: dict[str, Cluster], tmp_path: Path, kind: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    if "cluster" not in shared:
        shared["cluster"] = Cluster(tmp_path, settings={"group.initial.rebalance.delay.ms": 0,
                                                        "raft_fault_injection": "true", **FAST_LEADER_BALANCE},
                                    netns=NETNS).start()
    cluster = shared["cluster"]
    names = Names.of(kind)
    topic, members = names.topic, names.members
    rec = Recorder(names)
    cutter = Cutter(cluster)
    passed = False
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(20)
        # __consumer_offsets partition p is Raft slot p + 1, preferred on node (p + 1) % 3
        # (cluster/raft_cluster.py): wait until the preferred leaders lead; and the topic's, on six
        # consecutive slots, two on each node (on a running cluster they move a second or two after
        # the topic is created: they must not move during the scenario)
        preferred = {p: (p + 1) % 3 for p in range(OFFSETS_PARTITIONS)}

        def balanced() -> bool:
            data = Counter(_leaders(cluster.bootstrap, topic).values())
            return _leaders(cluster.bootstrap, "__consumer_offsets") == preferred and data == {0: 2, 1: 2, 2: 2}

        deadline = time.monotonic() + 30
        while not balanced() and time.monotonic() < deadline:
            time.sleep(0.5)
        offsets_before = _leaders(cluster.bootstrap, "__consumer_offsets")
        assert offsets_before == preferred, offsets_before
        assert balanced(), _leaders(cluster.bootstrap, topic)
        k = _coordinator(cluster.address(0), members)
        others = [j for j in range(3) if j != k]
        bystander_p = next(p for p, leader in sorted(offsets_before.items()) if leader in others)
        bystander = next(f"np-bystander-{kind}-{i}" for i in range(10_000)
                         if partition_for(f"np-bystander-{kind}-{i}", OFFSETS_PARTITIONS) == bystander_p)
        if kind == "majority":
            # clients on both sides: each bootstrapped from one side's nodes only
            minority_side, majority_side = cluster.address(k), ",".join(cluster.address(j) for j in others)
            member_boots = [minority_side, majority_side]
            commit_boot, produce_boot = minority_side, majority_side
        else:
            member_boots = [cluster.bootstrap, cluster.bootstrap]
            commit_boot, produce_boot = cluster.address(k), cluster.bootstrap
        rec.spawn(rec.producer, produce_boot)
        rec.spawn(rec.member, member_boots[0], members, "m1")
        rec.spawn(rec.member, member_boots[1], members, "m2")
        rec.spawn(rec.member, cluster.address(others[0]), bystander, "bystander")
        rec.spawn(rec.committer, commit_boot)
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and {e[1] for e in rec.owners if e[2] == "assign" and e[3]} != {
                "m1", "m2", "bystander"}:
            time.sleep(0.1)
        time.sleep(2.0)
        assert rec.commits and rec.produce_acks, "no commit or produce acknowledged before the cut"
        data_led = sorted(p for p, leader in _leaders(cluster.bootstrap, topic).items() if leader == k)
        probe = RawConn(cluster.address(k))
        assert _heartbeat_error(probe, members) != NOT_COORDINATOR
        if data_led:
            assert _fetch_error(probe, topic, data_led[0]) == 0

        far = others[1]  # bridge: cut off from the coordinator; others[0] sees both
        cuts = {k: [far], far: [k]} if kind == "bridge" else {k: others, **{j: [k] for j in others}}
        cutter.apply(cuts)
        cut_at = time.monotonic()  # in force from here (one node after another, ~10 ms each)
        hb_refused = fetch_refused = None
        while time.monotonic() - cut_at < CUT_S:  # refused: by when the refusal arrived
            if hb_refused is None and _heartbeat_error(probe, members) == NOT_COORDINATOR:
                hb_refused = time.monotonic() - cut_at
            if fetch_refused is None and data_led and _fetch_error(probe, topic, data_led[0]) == NOT_LEADER_OR_FOLLOWER:
                fetch_refused = time.monotonic() - cut_at
            time.sleep(0.02)
        after = [t - cut_at for t, _n in rec.commits if t > cut_at + cutter.lag]
        produced_after = [t - cut_at for t in rec.produce_acks if t > cut_at + cutter.lag]
        # what the cut-off node tells a client that asks it (it is still reachable) about the topic
        cut_view = _leaders_seen_by(cluster.address(k), topic)
        cutter.apply({})
        healed_at = time.monotonic()
        probe.close()
        # leadership goes back where it was (the preferred leaders take their partitions back),
        # and every node names it (a node still waiting to hear from a leader names none)
        def views() -> list[dict[int, int]]:
            return [_leaders_seen_by(cluster.address(i), "__consumer_offsets") for i in range(3)]

        while time.monotonic() - healed_at < 30 and views() != [offsets_before] * 3:
            time.sleep(0.2)
        agreed = time.monotonic() - healed_at
        offsets_after = views()
        time.sleep(3.0)
        end = time.monotonic()
        rec.finish()
        print(f"{kind} ({'netns' if NETNS else 'transport'}): heartbeat refused {hb_refused}s, fetch refused "
              f"{fetch_refused}s after the cut; first commit after it at {after[0] if after else None}s, "
              f"first produce at {produced_after[0] if produced_after else None}s; all nodes named the leaders "
              f"{agreed:.2f}s after healing")

        bad = overlaps([e for e in rec.owners if e[1] != "bystander" and e[0] < end], end)
        assert not bad, bad
        committer_last = max(n for _t, n in rec.commits)
        from confluent_kafka import Consumer, TopicPartition

        reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": names.commits,
                           "enable.auto.commit": False})
        committed = reader.committed([TopicPartition(topic, 0)], timeout=20)[0].offset
        reader.close()
        assert committed >= committer_last, (committed, committer_last)  # no acknowledged commit lost
        got = _read_all(cluster.bootstrap, topic, rec.produced)
        lost = {k_: v for k_, v in rec.produced.items() if got.get(k_) != v}
        assert not lost, f"{len(lost)} acknowledged records lost or changed, e.g. {sorted(lost.items())[:3]}"
        bystander_assigns = [e for e in rec.owners if e[1] == "bystander" and e[2] == "assign" and e[0] < end]
        assert len(bystander_assigns) == 1, f"the bystander group rebalanced: {bystander_assigns}"
        assert offsets_after == [offsets_before] * 3, (offsets_before, offsets_after)
        if kind == "bridge":
            # nobody lost a majority: the coordinator kept serving, nothing was refused
            gaps = [b - a for a, b in zip([cut_at, *[t for t, _ in rec.commits if t > cut_at]],
                                          [t for t, _ in rec.commits if t > cut_at], strict=False)]
            assert hb_refused is None and fetch_refused is None, (hb_refused, fetch_refused)
            assert gaps and max(gaps) < 1.0, f"the coordinator stopped serving for {max(gaps or [0]):.2f}s"
            m_assigns = [e for e in rec.owners if e[1] in ("m1", "m2") and e[2] == "assign" and cut_at < e[0] < end]
            assert not m_assigns, f"the group rebalanced during a bridge: {m_assigns}"
            # nothing moved, so every node names the leaders again as soon as the links are back
            assert agreed < 3.0, f"the nodes named the leaders again only {agreed:.2f}s after healing"
        else:
            assert hb_refused is not None and hb_refused < 2.0, hb_refused
            # it names a leader on the other side for every partition (its best guess, listed among
            # its brokers), never itself and never none: a client that asks only it (librdkafka
            # after a NOT_LEADER_OR_FOLLOWER) would otherwise wait for the heal
            assert k not in cut_view.values() and -1 not in cut_view.values(), (k, cut_view)
            if data_led:
                assert fetch_refused is not None and fetch_refused < 2.0, fetch_refused
            # Typically 1.5 s: the cut-off leader's pending commit fails at its step-down (1.4 s)
            # and it names the node that took over (replication/raft.py likely_leader) at once
            # (cluster/apis/find_coordinator.py: no election hold on a node that is cut off).
            assert after and after[0] < 3.0, after[:3]
            assert produced_after and produced_after[0] < 3.0, produced_after[:3]
        passed = True
    finally:
        rec.stop.set()
        if not passed:  # what a failed scenario leaves behind must not fail the next one
            shared.pop("cluster").kill_all()


def test_isolating_a_groups_coordinator(shared: dict[str, Cluster], tmp_path: Path) -> None:
    _scenario(shared, tmp_path, "isolate")


def test_a_majority_minority_split_with_clients_on_both_sides(shared: dict[str, Cluster], tmp_path: Path) -> None:
    _scenario(shared, tmp_path, "majority")


def test_a_bridge_partition_leaves_the_coordinator_serving(shared: dict[str, Cluster], tmp_path: Path) -> None:
    _scenario(shared, tmp_path, "bridge")
