"""A group's coordinator cut off from the other nodes while a new member joins through the majority.

The cut is made in the Raft transport (``raft_fault_injection``: every Raft message to and
from the node dropped, both ways, connections kept). Before check-quorum and the lease, the
isolated node kept its members for 30 s while the majority's new coordinator handed the
newcomer partitions they still held. ``test_network_partitions.py`` has the isolate, majority
and bridge scenarios with real packet filters.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from tests.cluster.cluster_harness import Cluster
from tests.cluster.test_network_partitions import overlaps
from tests.wire.raw import RawConn

pytestmark = pytest.mark.cluster

GROUP, TOPIC = "g-cut", "cut-topic"


def _cut(cluster: Cluster, k: int, on: bool) -> None:
    for i, n in enumerate(cluster.layout):
        spec = ({"cut": [j for j in range(len(cluster.layout)) if j != k]} if i == k else {"cut": [k]}) if on else {}
        (n.data_dir / "raft-faults.json").write_text(json.dumps(spec))


def _member(bootstrap: str, name: str, stop: threading.Event, events: list[tuple[float, str, str, tuple[int, ...]]]) -> None:
    """A consumer of TOPIC in group g-owners recording (time, member, assign|revoke, partitions)."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-owners", "enable.auto.commit": False,
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
                  "partition.assignment.strategy": "range"})

    def on_assign(_c: object, parts: list[object]) -> None:
        events.append((time.monotonic(), name, "assign", tuple(p.partition for p in parts)))  # type: ignore[attr-defined]

    def on_revoke(_c: object, parts: list[object]) -> None:
        events.append((time.monotonic(), name, "revoke", tuple(p.partition for p in parts)))  # type: ignore[attr-defined]

    c.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke)
    while not stop.is_set():
        c.poll(0.1)
    c.close()


def test_members_of_an_isolated_coordinator_never_share_a_partition(tmp_path: Path) -> None:
    """Two members consume while their coordinator is cut off for 8 s; a third joins 2 s into
    the cut (through the majority's new coordinator). At no moment do two members hold the same
    partition, and every member ends with partitions."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    cluster = Cluster(tmp_path, settings={"group.initial.rebalance.delay.ms": 0, "raft_fault_injection": "true"}).start()
    stop = threading.Event()
    events: list[tuple[float, str, str, tuple[int, ...]]] = []
    threads: list[threading.Thread] = []
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 6, 1)])[TOPIC].result(20)
        for name in ("m1", "m2"):
            threads.append(threading.Thread(target=_member, args=(cluster.bootstrap, name, stop, events), daemon=True))
            threads[-1].start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and {e[1] for e in events if e[2] == "assign" and e[3]} != {"m1", "m2"}:
            time.sleep(0.1)
        time.sleep(2.0)
        from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

        c = RawConn(cluster.address(0))
        c.request(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=("g-owners",)))
        k = int(c.response(10, 4).coordinators[0].node_id)
        c.close()
        _cut(cluster, k, True)
        time.sleep(2.0)
        threads.append(threading.Thread(target=_member, args=(cluster.bootstrap, "m3", stop, events), daemon=True))
        threads[-1].start()
        time.sleep(6.0)
        _cut(cluster, k, False)
        healed = time.monotonic()
        # Watch on after the heal (it was a fixed 12 s) until every member holds partitions and
        # nothing was assigned or revoked for 3 s (three heartbeats) since the heal and the last
        # change: the group usually settles during the cut, and then nothing happens after it.
        deadline = healed + 12.0
        while time.monotonic() < deadline:
            evs = sorted(events)
            held: dict[str, tuple[int, ...]] = {}
            for _t, name, kind, parts in evs:
                held[name] = parts if kind == "assign" else ()
            if all(held.get(m) for m in ("m1", "m2", "m3")) and time.monotonic() - max(healed, evs[-1][0]) > 3.0:
                break
            time.sleep(0.1)
        stop.set()
        end = time.monotonic()
        for t in threads:
            t.join(15)
        bad = overlaps(events, end)
        assert not bad, bad
        last: dict[str, tuple[int, ...]] = {}
        for t, name, kind, parts in sorted(events):
            if t < end:  # closing revokes everything
                last[name] = parts if kind == "assign" else ()
        assert all(last.get(m) for m in ("m1", "m2", "m3")), (last, sorted(events))
    finally:
        stop.set()
        cluster.kill_all()
