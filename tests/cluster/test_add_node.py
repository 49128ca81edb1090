"""A node joins a running 3-node cluster under load: started with only ``bootstrap`` (the running
nodes' Raft addresses; it is told the cluster's nodes and its id, and the others' ``peers`` are not
edited), it asks to be added (a node asking under another id than the next is refused, and
told), every Raft group's
leader adds it as a learner and promotes it once it has caught up, and leadership spreads over
the four nodes, with no acknowledged produce or commit lost and no consumer-group rebalance.
Then a node of the original three is killed: the four-node groups go on with three (the new
node's vote is one of them). Last, the original node leading the most partitions is removed with
``kcoord cluster remove-node`` (RemoveRaftVoter): it hands its groups over, every group's leader
takes it out, it stops by itself, and the three nodes left share the leadership; nothing
acknowledged is lost and the group never rebalances (3 -> 4 -> 3).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from kio.schema.remove_raft_voter.v0.request import RemoveRaftVoterRequest
from kio.static.primitive import i32

from tests.cluster.cluster_harness import FAST_LEADER_BALANCE, Cluster, wait_for
from tests.cluster.test_rolling_upgrade import PARTITIONS, Load, group_story, offsets_leaders
from tests.wire.raw import ask

pytestmark = pytest.mark.cluster


def test_a_node_joins_under_load_and_takes_its_share_of_leadership(tmp_path: Path) -> None:
    c = Cluster(tmp_path, nodes=5, settings={"group.initial.rebalance.delay.ms": 500, **FAST_LEADER_BALANCE})
    c.joining = {3, 4}
    c.bootstrapping = {3}  # node 4 names its peers (and the wrong id)
    load: Load | None = None
    failed = True
    try:
        c.start(0, 1, 2)
        bootstrap = ",".join(c.address(i) for i in range(3))
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic, group = f"grow-{uuid.uuid4().hex[:6]}", f"grow-{uuid.uuid4().hex[:6]}"
        for f in admin.create_topics([NewTopic(topic, PARTITIONS, 3)]).values():
            f.result(timeout=30)
        load = Load(bootstrap, topic, group)
        load.start()
        wait_for(lambda: len(load.acked_commits) > 20 and len(load.consumed) > 500 and len(load.assigned) == 2, 60,
                 "the load to run, both consumers assigned")
        assignments_before, generation = load.stable()

        c.spawn(4)  # not the next node id: refused, and told so (it never serves)
        wait_for(lambda: "event=join_refused node=4" in c.log_text(4), 30, "node 4's join to be refused")
        assert "next node id, 3" in c.log_text(4)
        c.kill(4)

        running = load

        def rate(seconds: float) -> float:
            """Acknowledged commits per second over the next ``seconds``."""
            n, t = len(running.acked_commits), time.monotonic()
            time.sleep(seconds)
            return (len(running.acked_commits) - n) / (time.monotonic() - t)

        steady = rate(8.0)
        joined_at, commits_at_join = time.monotonic(), len(load.acked_commits)
        load.step = "node 3 joining"
        c.start(3)
        # only a voter leads: the new node leading its share of __consumer_offsets shows it was promoted
        wait_for(lambda: min(offsets_leaders(admin).get(j, 0) for j in range(4)) >= 4, 90,
                 "leadership of __consumer_offsets to spread over the four nodes", tolerate=(KafkaException,))
        took = time.monotonic() - joined_at
        during = (len(load.acked_commits) - commits_at_join) / took
        after = rate(8.0)
        assert "event=bootstrapped node=3" in c.log_text(3) and "event=node_joined node=3" in c.log_text(3)
        promotions = sum(c.log_text(i).count("op=promote member=") for i in range(4))
        learners = sum(c.log_text(i).count("op=add_learner member=") for i in range(4))
        assert promotions == learners >= 1 + 16, (learners, promotions)  # every group: metadata, offsets, ...

        commits = len(load.acked_commits)
        load.step = "node 0 killed"
        c.kill(0)  # three of four voters left
        wait_for(lambda: len(load.acked_commits) > commits + 10, 60, "commits to go on with node 0 down")
        c.start(0)  # back with its peers unedited: it knows node 3 from its data directory and the log
        commits = len(load.acked_commits)
        wait_for(lambda: len(load.acked_commits) > commits + 10, 60, "commits to go on with node 0 back")
        assert all(c.alive(i) for i in range(4)), "a node stopped"
        assert "fatal" not in c.log_text(0)

        # 4 -> 3: the original node that leads the most partitions leaves
        led = led_partitions(admin, topic)
        gone = max((0, 1, 2), key=lambda i: led[i])
        stay = [i for i in range(4) if i != gone]
        refused = [remove_raft_voter(c.address(stay[0]), gone, cluster_id="another-cluster"),
                   remove_raft_voter(c.address(stay[0]), 9),
                   remove_raft_voter(c.address(stay[0]), gone, directory=uuid.uuid4()),
                   remove_raft_voter(c.address(stay[0]), gone, directory=uuid.UUID(int=0))]
        assert [r.error_code for r in refused] == [ErrorCode.inconsistent_cluster_id, ErrorCode.voter_not_found,
                                                   ErrorCode.voter_not_found, ErrorCode.invalid_request], refused
        load.step = f"node {gone} removed"
        removed_at, commits_at_removal = time.monotonic(), len(load.acked_commits)
        out = subprocess.run([sys.executable, "-m", "cluster.cli", "cluster", "remove-node", str(gone),
                              "--bootstrap-server", c.address(stay[0])], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
        wait_for(lambda: not c.alive(gone), 90, f"node {gone} to hand over and stop")
        proc = c.procs[gone]
        assert proc is not None and proc.returncode == 0, c.log_tail(gone)
        assert "event=node_left" in c.log_text(gone)
        admin = AdminClient({"bootstrap.servers": ",".join(c.address(i) for i in stay)})
        wait_for(lambda: all(offsets_leaders(admin).get(j, 0) >= 5 for j in stay), 90,
                 "leadership of __consumer_offsets to spread over the three nodes left", tolerate=(KafkaException,))
        shrink_took = time.monotonic() - removed_at
        during_shrink = (len(load.acked_commits) - commits_at_removal) / shrink_took
        removals = sum(c.log_text(i).count("op=remove member=") for i in range(4))
        assert removals >= learners, (removals, learners)  # every group took it out: metadata, offsets, ...
        brokers = {b.id for b in admin.list_topics(timeout=10).brokers.values()}
        assert gone not in brokers and set(stay) <= brokers, brokers
        after_shrink = rate(8.0)
        # started again on its old data directory: the others tell it it was removed, and it stops
        c.spawn(gone)
        wait_for(lambda: c.log_text(gone).count("event=node_left") >= 2 and not c.alive(gone), 60,
                 f"node {gone}, started again, to learn it was removed and stop")
        time.sleep(2)
        load.stop()

        assert all(c.alive(i) for i in stay), "a node stopped"
        missing = load.produced - load.consumed
        assert load.produced and not missing, f"{len(missing)} acknowledged produces were not consumed"
        req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
        survivors = admin
        final = {tp.partition: tp.offset
                 for tp in survivors.list_consumer_group_offsets([req])[group].result(timeout=30).topic_partitions}
        lost = [(p, o) for p, o in load.acked_commits if o > final.get(p, -1)]
        assert not lost, f"acknowledged commits lost: {lost[:5]}"
        load.check_no_rebalance(assignments_before, generation, lambda: group_story(c, group, survivors))
        print(f"node 3 joined and led its share in {took:.1f}s ({learners} groups); node {gone} removed, the others "
              f"led its share in {shrink_took:.1f}s; {len(load.produced)} produces, {len(load.acked_commits)} commits, "
              f"{len(load.errors)} commit errors; commits/s steady {steady:.0f}, while joining {during:.0f}, after "
              f"{after:.0f}, while shrinking {during_shrink:.0f}, after {after_shrink:.0f}")
        failed = False
    finally:
        if load is not None:
            load.stop_producing.set()
            load.stop_consuming.set()
            for t in load.threads:
                t.join(60)
        c.kill_all()
        if failed:
            for i in range(4):
                print(f"--- node {i} log ---\n{c.log_text(i)[-4000:]}")


def remove_raft_voter(address: str, node: int, cluster_id: str | None = None,
                      directory: uuid.UUID | None = None) -> Any:
    return ask(address, 81, 0, RemoveRaftVoterRequest(cluster_id=cluster_id, voter_id=i32(node),
                                                      voter_directory_id=directory or uuid.uuid4()))


def led_partitions(admin: AdminClient, topic: str) -> Counter[int]:
    """Partitions of ``__consumer_offsets`` and ``topic`` each node leads."""
    return Counter(p.leader for t in ("__consumer_offsets", topic)
                   for p in admin.list_topics(t, timeout=10).topics[t].partitions.values())


@pytest.mark.slow
def test_three_nodes_grow_to_five_and_shrink_to_three_one_at_a_time_under_load(tmp_path: Path) -> None:
    """3 -> 5 -> 3 under load: two nodes join one after the other, each taking its share of
    leadership before the next starts; then two of the original nodes are removed, the one that
    leads the most partitions first, each handing over and stopping before the next goes;
    nothing acknowledged is lost and the group never rebalances."""
    c = Cluster(tmp_path, nodes=5, settings={"group.initial.rebalance.delay.ms": 500, **FAST_LEADER_BALANCE},
                per_node={4: {"controller.quorum.auto.join.enable": "false"}})
    c.joining = {3, 4}
    c.bootstrapping = {4}  # node 3 names its peers; node 4 is told them, node 3 among them
    # node 4 joins as an observer, promoted by kcoord cluster add-node
    load: Load | None = None
    failed = True
    try:
        c.start(0, 1, 2)
        bootstrap = ",".join(c.address(i) for i in range(3))
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic, group = f"grow5-{uuid.uuid4().hex[:6]}", f"grow5-{uuid.uuid4().hex[:6]}"
        for f in admin.create_topics([NewTopic(topic, PARTITIONS, 3)]).values():
            f.result(timeout=30)
        load = Load(bootstrap, topic, group)
        load.start()
        wait_for(lambda: len(load.acked_commits) > 20 and len(load.assigned) == 2, 60, "the load to run")
        assignments_before, generation = load.stable()
        for node in (3, 4):
            load.step = f"node {node} joining"
            started = time.monotonic()
            c.start(node)
            if node == 4:
                wait_for(lambda: "observers=4" in c.log_text(0), 60, "node 4 to join as an observer")
                out = subprocess.run([sys.executable, "-m", "cluster.cli", "cluster", "add-node", "4",
                                      "--bootstrap-server", c.address(0)], capture_output=True, text=True, timeout=60)
                assert out.returncode == 0 and "Node 4 votes" in out.stdout, out.stdout + out.stderr
            share = 16 // (node + 1)  # of the 16 __consumer_offsets partitions, at least
            wait_for(lambda n=node, s=share: min(offsets_leaders(admin).get(j, 0) for j in range(n + 1)) >= s,  # type: ignore[misc]
                     120, f"leadership to spread over {node + 1} nodes", tolerate=(KafkaException,))
            print(f"node {node} joined and led its share in {time.monotonic() - started:.1f}s")
        commits = len(load.acked_commits)
        wait_for(lambda: len(load.acked_commits) > commits + 10, 60, "commits to go on on five nodes")
        stay = list(range(5))
        for _ in range(2):
            led = led_partitions(admin, topic)
            gone = max((i for i in (0, 1, 2) if i in stay), key=lambda i: led[i])
            stay.remove(gone)
            load.step = f"node {gone} removed"
            started, commits = time.monotonic(), len(load.acked_commits)
            out = subprocess.run([sys.executable, "-m", "cluster.cli", "cluster", "remove-node", str(gone),
                                  "--bootstrap-server", c.address(stay[0])], capture_output=True, text=True,
                                  timeout=60)
            assert out.returncode == 0, out.stdout + out.stderr
            wait_for(lambda g=gone: not c.alive(g), 90, f"node {gone} to hand over and stop")  # type: ignore[misc]
            proc = c.procs[gone]
            assert proc is not None and proc.returncode == 0, c.log_tail(gone)
            admin = AdminClient({"bootstrap.servers": ",".join(c.address(i) for i in stay)})
            share = 16 // len(stay)
            wait_for(lambda s=share, a=admin: all(offsets_leaders(a).get(j, 0) >= s for j in stay), 120,  # type: ignore[misc]
                     f"leadership to spread over {stay}", tolerate=(KafkaException,))
            took = time.monotonic() - started
            print(f"node {gone} removed (led {led[gone]} partitions), the others led its share in {took:.1f}s; "
                  f"commits/s meanwhile {(len(load.acked_commits) - commits) / took:.0f}")
        commits = len(load.acked_commits)
        wait_for(lambda: len(load.acked_commits) > commits + 10, 60, "commits to go on on the three nodes left")
        assert all(c.alive(i) for i in stay), "a node stopped"
        load.stop()
        missing = load.produced - load.consumed
        assert load.produced and not missing, f"{len(missing)} acknowledged produces were not consumed"
        req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
        final = {tp.partition: tp.offset
                 for tp in admin.list_consumer_group_offsets([req])[group].result(timeout=30).topic_partitions}
        lost = [(p, o) for p, o in load.acked_commits if o > final.get(p, -1)]
        assert not lost, f"acknowledged commits lost: {lost[:5]}"
        load.check_no_rebalance(assignments_before, generation, lambda: group_story(c, group, admin))
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
