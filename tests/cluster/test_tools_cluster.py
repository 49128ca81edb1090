"""Every operators' tool against a live 3-node cluster (the single-node versions are in test_tools.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster import test_tools as single
from tests.cluster.cluster_harness import Cluster

pytestmark = pytest.mark.cluster


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    c = Cluster(tmp_path, settings={"group.initial.rebalance.delay.ms": 0}).start()
    yield c
    c.kill_all()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        for i in range(3):
            print(f"--- node {i} log ---\n{c.log_text(i)[-3000:]}")


def test_groups_list_and_describe_on_a_cluster(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    single.test_groups_list_and_describe_match_describe_groups_and_offset_fetch(cluster, capsys)  # type: ignore[arg-type]


def test_reset_offsets_on_a_cluster(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    single.test_reset_offsets_dry_run_changes_nothing_and_execute_commits_what_it_printed(
        cluster, capsys)  # type: ignore[arg-type]


def test_delete_offsets_and_group_on_a_cluster(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    single.test_delete_offsets_and_delete_group(cluster, capsys)  # type: ignore[arg-type]


def test_topics_on_a_cluster(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    single.test_topics_create_list_describe_delete(cluster, capsys)  # type: ignore[arg-type]


def test_status_shows_three_nodes_and_a_dead_one(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    bs = cluster.bootstrap
    topic = single.make_topic(bs, partitions=6)
    single.produce(bs, topic, per_partition=1, partitions=6)
    rc, out, err = single.tool(capsys, bs, "status")
    assert rc == 0, err
    nodes = {r[0]: r for r in single.table(out, "NODE")}
    assert sorted(nodes) == ["0", "1", "2"]
    assert all(r[2] == "up" for r in nodes.values())
    assert sum(int(r[4]) for r in nodes.values()) == 16  # every __consumer_offsets partition has a leader
    assert sum(int(r[3]) for r in nodes.values()) >= 6
    # The metadata quorum, as kafka-metadata-quorum describes it: three voters with their directories.
    quorum = out[out.index("Metadata quorum: leader"):]
    replicas = {r[0]: r for r in single.table(quorum, "NODE")}
    assert sorted(replicas) == ["0", "1", "2"], quorum
    assert sorted(r[5] for r in replicas.values()) == ["Follower", "Follower", "Leader"], quorum
    assert all(len(r[1]) == 36 for r in replicas.values()), quorum  # directory ids (UUIDs)
    cluster.kill(1)
    rc, out, err = single.tool(capsys, cluster.address(0), "status", "--probe-timeout", "1000")
    assert rc == 1
    nodes = {r[0]: r for r in single.table(out, "NODE")}
    assert nodes["1"][2] == "down" and nodes["0"][2] == "up" and nodes["2"][2] == "up"
