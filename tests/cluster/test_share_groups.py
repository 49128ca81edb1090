"""Share groups (KIP-932) on a 3-node cluster, over the wire as Kafka's share consumer speaks it
(ShareGroupHeartbeat and ShareGroupDescribe v1): members join with ids of their own and get the
topic's partitions at once (balanced, shared when they outnumber them), the group and every
member's epoch survive a SIGKILL of its coordinator, a member that leaves hands its partitions
over, and ListGroups names the group's type. Without ``group.share.enable`` both APIs answer
UNSUPPORTED_VERSION, as Kafka's do while its share.version is 0."""

from __future__ import annotations

import datetime
import time
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
_MS = datetime.timedelta(milliseconds=1)


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


def _leaders(cluster: Cluster, topic: str) -> tuple[uuid.UUID, dict[int, int]]:
    """The topic's id and each partition's leader (node id), from Metadata."""
    m = req_mod(3, 12)
    node = next(i for i in range(cluster.n) if cluster.alive(i))
    r = ask(cluster.address(node), 3, 12, m.MetadataRequest(
        topics=(m.MetadataRequestTopic(topic_id=None, name=topic),), allow_auto_topic_creation=False,
        include_topic_authorized_operations=False))
    t = r.topics[0]
    return t.topic_id, {int(p.partition_index): int(p.leader_id) for p in t.partitions}


def _share_fetch(cluster: Cluster, node: int, group: str, member: str, epoch: int, topic_id: uuid.UUID,
                 partitions: list[int], acks: dict[int, list[tuple[int, int, list[int]]]] | None = None,
                 max_records: int = 500, wait_ms: int = 2000) -> Any:
    m = req_mod(78, 2)
    acks = acks or {}
    return ask(cluster.address(node), 78, 2, m.ShareFetchRequest(
        group_id=group, member_id=member, share_session_epoch=epoch, max_wait=wait_ms * _MS, min_bytes=1,
        max_bytes=1 << 20, max_records=max_records, batch_size=max_records, share_acquire_mode=0,
        is_renew_ack=False, topics=(m.FetchTopic(topic_id=topic_id, partitions=tuple(
            m.FetchPartition(partition_index=p, acknowledgement_batches=tuple(
                m.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=tuple(types))
                for f, last, types in acks.get(p, ()))) for p in partitions)),), forgotten_topics_data=()))


def _acquired(resp: Any) -> dict[int, list[tuple[int, int, int]]]:
    assert resp.error_code.name == "none", resp
    return {int(p.partition_index): [(int(a.first_offset), int(a.last_offset), int(a.delivery_count))
                                     for a in p.acquired_records]
            for t in resp.responses for p in t.partitions}


def test_share_fetch_acquires_acknowledges_and_redelivers(cluster: Cluster) -> None:
    """One partition, two members on its leader: records are acquired by one member at a time;
    ACCEPT finishes them, RELEASE delivers them again (delivery count 2) to the other member;
    acknowledging what one does not hold is INVALID_RECORD_STATE; the state (what is done)
    survives a SIGKILL of the group's coordinator and of the partition's leader."""
    from confluent_kafka import Producer
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("q1", 1, 3)])["q1"].result(30)
    group = f"sf-{uuid.uuid4().hex[:8]}"
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    assert _beat(cluster, group, a, 0, ("q1",)).error_code.name == "none"
    assert _beat(cluster, group, b, 0, ("q1",)).error_code.name == "none"
    topic_id, leaders = _leaders(cluster, "q1")
    leader = leaders[0]
    # the first fetch loads the share partition at the log's end (share.auto.offset.reset latest)
    assert _acquired(_share_fetch(cluster, leader, group, a, 0, topic_id, [0], wait_ms=0)) == {0: []}
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce("q1", value=f"v{i}".encode())
    assert producer.flush(30) == 0

    assert _acquired(_share_fetch(cluster, leader, group, a, 1, topic_id, [0])) == {0: [(0, 9, 1)]}
    assert _acquired(_share_fetch(cluster, leader, group, b, 0, topic_id, [0], wait_ms=200)) == {0: []}
    # b cannot acknowledge what it does not hold; a accepts 0-4 and releases 5-9
    r = _share_fetch(cluster, leader, group, b, 1, topic_id, [0], {0: [(0, 0, [1])]}, wait_ms=0)
    assert [int(p.acknowledge_error_code) for t in r.responses for p in t.partitions] == [121]
    m = req_mod(79, 2)
    acked = ask(cluster.address(leader), 79, 2, m.ShareAcknowledgeRequest(
        group_id=group, member_id=a, share_session_epoch=2, is_renew_ack=False, topics=(m.AcknowledgeTopic(
            topic_id=topic_id, partitions=(m.AcknowledgePartition(partition_index=0, acknowledgement_batches=(
                m.AcknowledgementBatch(first_offset=0, last_offset=4, acknowledge_types=(1,)),
                m.AcknowledgementBatch(first_offset=5, last_offset=9, acknowledge_types=(2,)))),)),)))
    assert acked.error_code.name == "none" and [int(p.error_code) for t in acked.responses for p in t.partitions] == [0]
    assert _acquired(_share_fetch(cluster, leader, group, b, 2, topic_id, [0])) == {0: [(5, 9, 2)]}
    # DescribeShareGroupOffsets: the start offset, and the lag (end 10 - start 5 - none done past it)
    d = req_mod(90, 1)
    described = ask(cluster.address(_coordinator(cluster, group)), 90, 1, d.DescribeShareGroupOffsetsRequest(
        groups=(d.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None),
                d.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=(
                    d.DescribeShareGroupOffsetsRequestTopic(topic_name="nope", partitions=(0,)),)))))
    whole, unknown = described.groups
    assert [(t.topic_name, [(int(p.partition_index), int(p.start_offset), int(p.lag)) for p in t.partitions])
            for t in whole.topics] == [("q1", [(0, 5, 5)])]
    assert [(t.topic_name, [int(p.start_offset) for p in t.partitions]) for t in unknown.topics] == [("nope", [-1])]

    coordinator = _coordinator(cluster, group)
    cluster.kill(coordinator)
    if leader != coordinator:  # one node down at a time: two of three would leave no majority
        assert _coordinator(cluster, group) != coordinator
        cluster.start(coordinator)
        cluster.kill(leader)
    topic_id, leaders = None, {}
    for _ in range(100):
        topic_id, leaders = _leaders(cluster, "q1")
        if leaders.get(0, -1) >= 0 and cluster.alive(leaders[0]):
            break
        time.sleep(0.2)
    c2 = str(uuid.uuid4())
    assert _beat(cluster, group, c2, 0, ("q1",)).error_code.name == "none"
    again: dict[int, list[tuple[int, int, int]]] = {}
    for _ in range(50):  # the new leader loads the state; b's lock did not outlive the old leader
        try:
            again = _acquired(_share_fetch(cluster, leaders[0], group, c2, 0, topic_id, [0]))
        except AssertionError:
            time.sleep(0.2)
            continue
        if again.get(0):
            break
    assert again == {0: [(5, 9, 2)]}, again  # 0-4 stay done; 5-9 come back (count from the stored state)
