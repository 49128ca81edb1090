"""A node whose disk is wiped comes back as a learner: it votes for nobody before it has caught up.

The interleaving that loses an acknowledged write when an empty node rejoins under its old id
(KAFKA-14077), on a live 3-node cluster with the Raft links cut through the fault files:

1. A coordinates a group; C is cut off, so an offset commit is acknowledged by A and B only.
2. B's disk is wiped and B restarts, empty, cut off from A (so it cannot catch up from it).
3. A is killed; C and B are joined again.

C's log lacks the commit and B's is empty: counted as a voter, B would elect C, and the commit
would be gone (and A, back, would find its applied log contradicted and stop). Here B is not its
node's voting replica any more (its directory id is new): C does not count its (pre-)votes, and
nobody leads until A is back. Then B catches up, asks to be the voter again, and is promoted;
its old directory, put back afterwards, is refused.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.data_dir import directory_id
from tests.cluster.cluster_harness import Cluster, running_cluster, wait_for

pytestmark = pytest.mark.cluster

TOPIC, GROUP = "wiped", "wiped-group"
SETTINGS: dict[str, object] = {"raft_fault_injection": "true", "group.initial.rebalance.delay.ms": 0}


def _voters(c: Cluster, i: int) -> dict[str, str]:
    doc: dict[str, dict[str, str]] = json.loads((c.layout[i].data_dir / "voters.json").read_text())
    return doc["voters"]


def _cut(c: Cluster, i: int, *others: int) -> None:
    (c.layout[i].data_dir / "raft-faults.json").write_text(json.dumps({"cut": list(others)}))


def _commit(bootstrap: str, offset: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def _committed(bootstrap: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        return int(consumer.committed([TopicPartition(TOPIC, 0)], timeout=20)[0].offset)
    finally:
        consumer.close()


def _coordinator(bootstrap: str) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return int(admin.describe_consumer_groups([GROUP])[GROUP].result(20).coordinator.id)


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    yield from running_cluster(tmp_path, request, SETTINGS)


def test_a_wiped_node_does_not_vote_before_it_caught_up_and_no_acknowledged_commit_is_lost(cluster: Cluster) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    c = cluster
    wait_for(lambda: all(len(_voters(c, i)) == 3 for i in range(3)), 30, "every node's voter registered",
             tolerate=(FileNotFoundError,))
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(20)
    _commit(c.bootstrap, 100)
    a = _coordinator(c.bootstrap)
    b, cc = (i for i in range(3) if i != a)
    old_b = directory_id(str(c.layout[b].data_dir))

    # 1. C cut off: the commit of 200 is acknowledged by A and B only
    _cut(c, a, cc)
    _cut(c, b, cc)
    _cut(c, cc, a, b)
    time.sleep(1.0)
    _commit(c.address(a), 200)

    # 2. B's disk wiped; B back, empty, and cut off from A
    _cut(c, a, b, cc)
    c.kill(b)
    old_copy = c.layout[b].data_dir.parent / "b-before-the-wipe"
    shutil.copytree(c.layout[b].data_dir, old_copy)
    shutil.rmtree(c.layout[b].data_dir)
    c.layout[b].data_dir.mkdir()
    _cut(c, b, a)
    c.spawn(b)

    # 3. A killed; C and B joined again
    c.kill(a)
    _cut(c, cc, a)
    wait_for(lambda: "event=vote_refused" in c.log_text(b), 30, "the wiped replica refusing C its vote")
    time.sleep(5.0)  # several election timeouts: C must not lead anything it could not lead before
    assert "event=replica_promoted" not in c.log_text(b)

    # A back: it leads, B catches up from it and is promoted
    _cut(c, a)
    _cut(c, b)
    _cut(c, cc)
    c.start(a, b, cc, timeout=60)
    wait_for(lambda: _committed(c.bootstrap) is not None, 60, "the group's coordinator back",
             tolerate=(KafkaException,))
    assert _committed(c.bootstrap) == 200
    wait_for(lambda: "event=replica_promoted" in c.log_text(b), 60, "the new replica promoted")
    new_b = directory_id(str(c.layout[b].data_dir))
    assert new_b != old_b
    wait_for(lambda: all(_voters(c, i).get(str(b)) == new_b for i in range(3)), 30, "every node counting B again")
    for i in range(3):
        assert c.alive(i), c.log_tail(i)
        assert "event=fail_stop" not in c.log_text(i) and "raft_diverged" not in c.log_text(i)

    # The old directory put back (a disk thought dead): refused once it learns it was replaced
    c.kill(b)
    shutil.rmtree(c.layout[b].data_dir)
    shutil.copytree(old_copy, c.layout[b].data_dir)
    _cut(c, b)
    c.spawn(b)
    wait_for(lambda: not c.alive(b), 60, "the old copy refused")
    assert c.procs[b] is not None and c.procs[b].returncode == 2
    assert "event=stale_replica" in c.log_text(b)
    assert _committed(c.bootstrap) == 200
