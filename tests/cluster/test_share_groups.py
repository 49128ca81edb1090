"""Share groups (KIP-932) on a 3-node cluster, over the wire as Kafka's share consumer speaks it
(ShareGroupHeartbeat and ShareGroupDescribe v1): members join with ids of their own and get the
topic's partitions at once (balanced, shared when they outnumber them), the group and every
member's epoch survive a SIGKILL of its coordinator, a member that leaves hands its partitions
over, and ListGroups names the group's type. Without ``group.share.enable`` both APIs answer
UNSUPPORTED_VERSION, as Kafka's do while its share.version is 0."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.apis.common import req_mod
from tests.cluster.cluster_harness import Cluster
from tests.cluster.test_group_configs import _coordinator
from tests.wire.raw import ask

pytestmark = pytest.mark.cluster
RETRY = ("not_coordinator", "coordinator_not_available", "coordinator_load_in_progress")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, settings={"group.share.enable": True}).start()
    try:
        yield c
    finally:
        c.kill_all()


def _beat(cluster: Cluster, group: str, member: str, epoch: int, topics: tuple[str, ...] | None = None) -> Any:
    """A heartbeat at the group's coordinator, retried while the group moves."""
    m = req_mod(76, 1)
    for _ in range(100):
        coord = _coordinator(cluster, group)
        try:
            r = ask(cluster.address(coord), 76, 1, m.ShareGroupHeartbeatRequest(
                group_id=group, member_id=member, member_epoch=epoch, rack_id=None,
                subscribed_topic_names=topics))
        except OSError:
            r = None
        if r is not None and r.error_code.name not in RETRY:
            return r
    raise AssertionError(f"no answer for {group}")


def _owned(resp: Any) -> set[int]:
    assert resp.assignment is not None, resp
    return {int(p) for t in resp.assignment.topic_partitions for p in t.partitions}


def _describe(cluster: Cluster, group: str) -> Any:
    m = req_mod(77, 1)
    return ask(cluster.address(_coordinator(cluster, group)), 77, 1, m.ShareGroupDescribeRequest(
        group_ids=(group,), include_authorized_operations=False)).groups[0]


def test_a_share_group_survives_its_coordinators_death(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("queue", 4, 3)])["queue"].result(30)
    group = f"sg-{uuid.uuid4().hex[:8]}"
    a, b = str(uuid.uuid4()), str(uuid.uuid4())

    ja = _beat(cluster, group, a, 0, ("queue",))
    assert ja.error_code.name == "none" and ja.member_id == a and _owned(ja) == {0, 1, 2, 3}
    jb = _beat(cluster, group, b, 0, ("queue",))
    assert jb.error_code.name == "none" and len(_owned(jb)) == 2
    ra = _beat(cluster, group, a, ja.member_epoch)
    assert ra.member_epoch == jb.member_epoch and _owned(ra) == {0, 1, 2, 3} - _owned(jb)

    described = _describe(cluster, group)
    assert (described.error_code.name, described.group_state, described.assignor_name) == ("none", "Stable", "simple")
    assert {m.member_id: m.member_epoch for m in described.members} == {a: ra.member_epoch, b: jb.member_epoch}

    victim = _coordinator(cluster, group)
    cluster.kill(victim)
    again = _beat(cluster, group, b, jb.member_epoch)  # its epoch still stands at the new coordinator
    assert _coordinator(cluster, group) != victim
    assert again.error_code.name == "none" and again.member_epoch == jb.member_epoch and again.assignment is None

    left = _beat(cluster, group, a, -1)
    assert (left.error_code.name, left.member_epoch) == ("none", -1)
    taken = _beat(cluster, group, b, jb.member_epoch)
    assert _owned(taken) == {0, 1, 2, 3} and taken.member_epoch > jb.member_epoch

    m = req_mod(16, 5)  # each node lists the groups it coordinates, as Kafka's brokers do
    listed = ask(cluster.address(_coordinator(cluster, group)), 16, 5, m.ListGroupsRequest(
        states_filter=(), types_filter=("share",)))
    assert [(g.group_id, g.protocol_type, g.group_type, g.group_state) for g in listed.groups] == [
        (group, "share", "share", "Stable")]


def test_share_apis_answer_unsupported_version_unless_enabled(tmp_path: Path) -> None:
    c = Cluster(tmp_path, nodes=1).start()
    try:
        m = req_mod(76, 1)
        r = ask(c.address(0), 76, 1, m.ShareGroupHeartbeatRequest(
            group_id="g", member_id=str(uuid.uuid4()), member_epoch=0, rack_id=None, subscribed_topic_names=("t",)))
        assert r.error_code.name == "unsupported_version"
        d = req_mod(77, 1)
        r = ask(c.address(0), 77, 1, d.ShareGroupDescribeRequest(group_ids=("g",), include_authorized_operations=False))
        assert r.groups[0].error_code.name == "unsupported_version"
    finally:
        c.kill_all()
