"""The differential scenarios (``tests/diff/harness.py``): each a few raw requests, their answers
recorded. Names of groups and topics come from the scenario, so both servers see the same ones."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from cluster.apis.common import mk, req_mod
from tests.diff.harness import Session, scenario
from tests.wire.raw import api_versions_v0

MS = datetime.timedelta(milliseconds=1)
NO_TOPIC_ID = uuid.UUID(int=0)


def _create_topic(s: Session, name: str, partitions: int = 1) -> None:
    m = req_mod(19, 7)
    s.ask(f"create.{name}", 19, 7, m.CreateTopicsRequest(topics=(m.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=3, assignments=(), configs=()),),
        timeout=30000 * MS, validate_only=False))
    _wait_for_leaders(s, name)


def _wait_for_leaders(s: Session, topic: str, at: str | None = None) -> None:
    """Until node ``at`` (the bootstrap node) knows ``topic`` and its leaders: a Kafka broker learns
    of a new topic a moment after it was created, each in its own time."""
    import time

    m = req_mod(3, 12)
    for _ in range(100):
        r = s.conn(at or s.bootstrap).call(3, 12, m.MetadataRequest(
            topics=(m.MetadataRequestTopic(topic_id=NO_TOPIC_ID, name=topic),), allow_auto_topic_creation=False,
            include_topic_authorized_operations=False))
        if r.topics and int(r.topics[0].error_code) == 0 and all(p.leader_id >= 0 for p in r.topics[0].partitions):
            return
        time.sleep(0.2)
    raise AssertionError(f"no leaders for {topic}")


def _leader(s: Session, topic: str, partition: int = 0) -> str:
    m = req_mod(3, 12)
    r = s.conn(s.bootstrap).call(3, 12, m.MetadataRequest(
        topics=(m.MetadataRequestTopic(topic_id=NO_TOPIC_ID, name=topic),), allow_auto_topic_creation=False,
        include_topic_authorized_operations=False))
    leader = next(p.leader_id for p in r.topics[0].partitions if p.partition_index == partition)
    b = next(b for b in r.brokers if b.node_id == leader)
    return f"{b.host}:{b.port}"


def _join(s: Session, label: str, group: str, member_id: str = "", version: int = 5, to: str | None = None,
          instance: str | None = None, rebalance_ms: int = 10000, via: Any = None) -> Any:
    m = req_mod(11, version)
    fields: dict[str, Any] = {"group_id": group, "session_timeout": 10000 * MS, "member_id": member_id,
                              "protocol_type": "consumer",
                              "protocols": (m.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01"),)}
    if version >= 1:
        fields["rebalance_timeout"] = rebalance_ms * MS
    if version >= 5:
        fields["group_instance_id"] = instance
    if version >= 8:
        fields["reason"] = None
    return s.ask(label, 11, version, m.JoinGroupRequest(**fields), to=to, via=via)


def _joined(s: Session, group: str) -> tuple[str, Any]:
    """The group's coordinator and a member's JoinGroup v5 answer (asked for a member id, then joined)."""
    coord = s.coordinator(group)
    first = _join(s, "join0", group, to=coord)
    return coord, _join(s, "join", group, member_id=first.member_id, to=coord)


def _sync(s: Session, group: str, joined: Any, coord: str, assignment: bytes) -> Any:
    """SyncGroup v3 by the leader ``joined``, assigning ``assignment`` to itself."""
    sync = req_mod(14, 3)
    return s.ask("sync", 14, 3, sync.SyncGroupRequest(
        group_id=group, generation_id=joined.generation_id, member_id=joined.member_id, group_instance_id=None,
        assignments=(sync.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=assignment),)), to=coord)


@scenario
def api_versions(s: Session) -> None:
    """Which versions each side advertises, per API key (v0's list: every key either serves)."""
    corr, err, apis = api_versions_v0(s.conn(s.bootstrap))
    s.answers["api_versions.error"] = err
    for key, lo, hi in apis:
        s.answers[f"api_versions.{key}"] = f"{lo}-{hi}"


@scenario
def find_coordinator_batch(s: Session) -> None:
    m = req_mod(10, 4)
    s.ask("groups", 10, 4, m.FindCoordinatorRequest(key_type=0, coordinator_keys=(f"{s.name}-a", f"{s.name}-b")))
    s.ask_settled("transactions", 10, 4, m.FindCoordinatorRequest(key_type=1, coordinator_keys=(f"{s.name}-tx",)))
    s.ask("bad_key_type", 10, 4, m.FindCoordinatorRequest(key_type=7, coordinator_keys=(f"{s.name}-c",)))


@scenario
def join_without_member_id_is_asked_for_one(s: Session) -> None:
    group = f"{s.name}-g"
    coord = s.coordinator(group)
    first = _join(s, "first", group, to=coord)
    _join(s, "second", group, member_id=first.member_id, to=coord)


@scenario
def join_sync_heartbeat_leave(s: Session) -> None:
    group = f"{s.name}-g"
    coord, joined = _joined(s, group)
    _sync(s, group, joined, coord, b"\x00\x01\x02")
    hb = req_mod(12, 3)
    s.ask("heartbeat", 12, 3, hb.HeartbeatRequest(group_id=group, generation_id=joined.generation_id,
                                                  member_id=joined.member_id, group_instance_id=None), to=coord)
    s.ask("heartbeat_old_generation", 12, 3, hb.HeartbeatRequest(
        group_id=group, generation_id=joined.generation_id - 1, member_id=joined.member_id, group_instance_id=None),
        to=coord)
    s.ask("heartbeat_unknown_member", 12, 3, hb.HeartbeatRequest(
        group_id=group, generation_id=joined.generation_id, member_id="nobody", group_instance_id=None), to=coord)
    leave = req_mod(13, 3)
    s.ask("leave", 13, 3, leave.LeaveGroupRequest(group_id=group, members=(
        leave.MemberIdentity(member_id=joined.member_id, group_instance_id=None),)), to=coord)
    s.ask("leave_again", 13, 3, leave.LeaveGroupRequest(group_id=group, members=(
        leave.MemberIdentity(member_id=joined.member_id, group_instance_id=None),)), to=coord)


@scenario
def a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_removed(s: Session) -> None:
    group = f"{s.name}-g"
    coord = s.coordinator(group)
    first = _join(s, "a_asked", group, to=coord, rebalance_ms=2000)
    a = _join(s, "a_joined", group, member_id=first.member_id, to=coord, rebalance_ms=2000)
    _sync(s, group, a, coord, b"\x00")
    other = s.connect(coord)
    asked = _join(s, "b_asked", group, via=other, rebalance_ms=2000)
    # answered once the rebalance ends: a never rejoined, so after 2 s it is out and b leads alone
    _join(s, "b_joined", group, member_id=asked.member_id, via=other, rebalance_ms=2000)
    hb = req_mod(12, 3)
    s.ask("a_heartbeat", 12, 3, hb.HeartbeatRequest(group_id=group, generation_id=a.generation_id,
                                                    member_id=a.member_id, group_instance_id=None), to=coord)


@scenario
def join_v0_leads_at_once(s: Session) -> None:
    group = f"{s.name}-g"
    _join(s, "join", group, version=0, to=s.coordinator(group))


@scenario
def sync_with_a_wrong_generation(s: Session) -> None:
    group = f"{s.name}-g"
    coord, joined = _joined(s, group)
    sync = req_mod(14, 3)
    s.ask("sync", 14, 3, sync.SyncGroupRequest(group_id=group, generation_id=joined.generation_id + 5,
                                               member_id=joined.member_id, group_instance_id=None, assignments=()),
          to=coord)


@scenario
def offsets_committed_without_a_group_and_fetched(s: Session) -> None:
    topic, group = f"{s.name}-t", f"{s.name}-g"
    _create_topic(s, topic, 2)
    coord = s.coordinator(group)
    oc = req_mod(8, 8)
    s.ask("commit", 8, 8, oc.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(oc.OffsetCommitRequestTopic(name=topic, partitions=(
            oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                            committed_metadata="m"),)),)), to=coord)
    s.ask("commit_unknown_topic", 8, 8, oc.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(oc.OffsetCommitRequestTopic(name=f"{s.name}-missing", partitions=(
            oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                            committed_metadata=None),)),)), to=coord)
    of = req_mod(9, 8)
    s.ask_settled("fetch_all", 9, 8, of.OffsetFetchRequest(groups=(of.OffsetFetchRequestGroup(
        group_id=group, topics=None),), require_stable=False), to=coord, done=lambda r: bool(r.groups[0].topics))
    s.ask("fetch_named", 9, 8, of.OffsetFetchRequest(groups=(of.OffsetFetchRequestGroup(group_id=group, topics=(
        of.OffsetFetchRequestTopics(name=topic, partition_indexes=(0, 1)),)),), require_stable=True), to=coord)


@scenario
def offsets_of_a_group_never_seen(s: Session) -> None:
    group = f"{s.name}-g"
    of = req_mod(9, 8)
    s.ask("fetch", 9, 8, of.OffsetFetchRequest(groups=(of.OffsetFetchRequestGroup(group_id=group, topics=None),),
                                               require_stable=False), to=s.coordinator(group))


def _describe_a_group_and_an_unknown_one(s: Session, version: int) -> tuple[str, str, str]:
    """(group, unknown group, the group's coordinator), both described at ``version``."""
    group, gone = f"{s.name}-g", f"{s.name}-never"
    coord, joined = _joined(s, group)
    # synced first: Kafka 4 describes a group as its last committed records say, so a group still
    # completing its rebalance reads differently from one moment to the next there
    _sync(s, group, joined, coord, b"\x00\x01")
    dg = req_mod(15, version)
    s.ask("describe", 15, version, dg.DescribeGroupsRequest(groups=(group,), include_authorized_operations=False),
          to=coord)
    s.ask("describe_unknown", 15, version, dg.DescribeGroupsRequest(groups=(gone,),
                                                                    include_authorized_operations=False),
          to=s.coordinator(gone))
    return group, gone, coord


@scenario
def describe_and_delete_groups(s: Session) -> None:
    group, gone, coord = _describe_a_group_and_an_unknown_one(s, 5)
    dl = req_mod(42, 2)
    s.ask("delete_non_empty", 42, 2, dl.DeleteGroupsRequest(groups_names=(group,)), to=coord)
    s.ask("delete_unknown", 42, 2, dl.DeleteGroupsRequest(groups_names=(gone,)), to=s.coordinator(gone))


@scenario
def metadata_of_an_unknown_topic(s: Session) -> None:
    m = req_mod(3, 12)
    s.ask("metadata", 3, 12, m.MetadataRequest(
        topics=(m.MetadataRequestTopic(topic_id=NO_TOPIC_ID, name=f"{s.name}-missing"),),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False))


@scenario
def topics_that_cannot_be_created(s: Session) -> None:
    topic = f"{s.name}-t"
    _create_topic(s, topic)
    m = req_mod(19, 7)

    def create(label: str, name: str, partitions: int, replicas: int, validate_only: bool = False) -> None:
        s.ask(label, 19, 7, m.CreateTopicsRequest(topics=(m.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=replicas, assignments=(), configs=()),),
            timeout=30000 * MS, validate_only=validate_only))

    create("exists", topic, 1, 3)
    create("no_partitions", f"{s.name}-zero", 0, 3)
    create("too_many_replicas", f"{s.name}-rf", 1, 5)
    create("bad_name", "bad/name", 1, 3)
    create("validate_only", f"{s.name}-v", 2, 3, validate_only=True)


@scenario
def an_idempotent_producer_id(s: Session) -> None:
    m = req_mod(22, 4)
    s.ask_settled("init", 22, 4, m.InitProducerIdRequest(transactional_id=None, transaction_timeout=60000 * MS,
                                                 producer_id=-1, producer_epoch=-1))


@scenario
def offsets_of_an_empty_topic(s: Session) -> None:
    topic = f"{s.name}-t"
    _create_topic(s, topic)
    m = req_mod(2, 7)
    for label, timestamp in (("latest", -1), ("earliest", -2), ("max_timestamp", -3)):
        s.ask(label, 2, 7, m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(m.ListOffsetsTopic(
            name=topic, partitions=(m.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                           timestamp=timestamp),)),)), to=_leader(s, topic))
    s.ask("same_partition_twice", 2, 7, m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
        m.ListOffsetsTopic(name=topic, partitions=(
            m.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1),
            m.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-2))),)),
        to=_leader(s, topic))


@scenario
def special_timestamps_by_version(s: Session) -> None:
    """Each special timestamp at the version that introduced it and the one before; an unknown one."""
    topic = f"{s.name}-t"
    _create_topic(s, topic)
    for version, timestamps in ((7, (-3, -4, -7)), (8, (-4, -5)), (9, (-5, -6)), (10, (-6,)),
                                (11, (-4, -5, -6, -7))):
        m = req_mod(2, version)
        for timestamp in timestamps:
            s.ask(f"v{version}_{-timestamp}", 2, version, mk(m.ListOffsetsRequest, replica_id=-1, isolation_level=0,
                  timeout=1000 * MS, topics=(m.ListOffsetsTopic(name=topic, partitions=(mk(
                      m.ListOffsetsPartition, partition_index=0, current_leader_epoch=-1, timestamp=timestamp),)),)),
                  to=_leader(s, topic))


@scenario
def describe_groups_v6_not_found(s: Session) -> None:
    """v6 names a group that is not there (or not classic) GROUP_ID_NOT_FOUND, with a message."""
    _describe_a_group_and_an_unknown_one(s, 6)


def _commit(s: Session, label: str, group: str, topic: str, offset: int, *, generation: int = -1, member: str = "",
            to: str | None = None) -> Any:
    oc = req_mod(8, 8)
    return s.ask(label, 8, 8, oc.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member, group_instance_id=None,
        topics=(oc.OffsetCommitRequestTopic(name=topic, partitions=(
            oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                                            committed_metadata=""),)),)), to=to)


@scenario
def a_commit_of_a_stale_generation_or_unknown_member(s: Session) -> None:
    topic, group = f"{s.name}-t", f"{s.name}-g"
    _create_topic(s, topic)
    coord, joined = _joined(s, group)
    _commit(s, "stale_generation", group, topic, 3, generation=joined.generation_id + 1, member=joined.member_id,
            to=coord)
    _commit(s, "unknown_member", group, topic, 3, generation=joined.generation_id, member="nobody", to=coord)


@scenario
def a_static_member_joins_and_is_replaced(s: Session) -> None:
    group = f"{s.name}-g"
    coord = s.coordinator(group)
    first = _join(s, "join", group, instance="static-1", to=coord)
    _join(s, "join_again_same_instance", group, instance="static-1", to=coord)
    hb = req_mod(12, 3)
    s.ask("old_member_heartbeat", 12, 3, hb.HeartbeatRequest(
        group_id=group, generation_id=first.generation_id, member_id=first.member_id, group_instance_id="static-1"),
        to=coord)


@scenario
def leaving_as_an_unknown_member(s: Session) -> None:
    group = f"{s.name}-g"
    coord, joined = _joined(s, group)
    leave = req_mod(13, 3)
    s.ask("leave", 13, 3, leave.LeaveGroupRequest(group_id=group, members=(
        leave.MemberIdentity(member_id="nobody", group_instance_id=None),
        leave.MemberIdentity(member_id=joined.member_id, group_instance_id=None))), to=coord)


@scenario
def heartbeat_for_a_group_never_seen(s: Session) -> None:
    group = f"{s.name}-g"
    hb = req_mod(12, 3)
    s.ask("heartbeat", 12, 3, hb.HeartbeatRequest(group_id=group, generation_id=1, member_id="m",
                                                  group_instance_id=None), to=s.coordinator(group))


@scenario
def offsets_deleted_from_an_empty_group(s: Session) -> None:
    topic, group = f"{s.name}-t", f"{s.name}-g"
    _create_topic(s, topic)
    coord = s.coordinator(group)
    _commit(s, "commit", group, topic, 7, to=coord)
    od = req_mod(47, 0)
    s.ask("delete", 47, 0, od.OffsetDeleteRequest(group_id=group, topics=(od.OffsetDeleteRequestTopic(
        name=topic, partitions=(od.OffsetDeleteRequestPartition(partition_index=0),)),)), to=coord)
    s.ask("delete_unknown_group", 47, 0, od.OffsetDeleteRequest(group_id=f"{s.name}-never", topics=(
        od.OffsetDeleteRequestTopic(name=topic, partitions=(od.OffsetDeleteRequestPartition(partition_index=0),)),)),
        to=s.coordinator(f"{s.name}-never"))


@scenario
def find_coordinator_v0(s: Session) -> None:
    m = req_mod(10, 0)
    s.coordinator(f"{s.name}-g")  # settled first: a fresh Kafka is still creating its offsets topic
    s.ask("find", 10, 0, m.FindCoordinatorRequest(key=f"{s.name}-g"))


@scenario
def sasl_on_a_plaintext_listener(s: Session) -> None:
    m = req_mod(17, 1)
    s.ask("handshake", 17, 1, m.SaslHandshakeRequest(mechanism="PLAIN"))


# ---------------------------------------------------------------- transactions (v1 protocol)

def _init_txn(s: Session, label: str, tid: str, to: str) -> Any:
    m = req_mod(22, 4)
    return s.ask_settled(label, 22, 4, m.InitProducerIdRequest(transactional_id=tid, transaction_timeout=60000 * MS,
                                                               producer_id=-1, producer_epoch=-1), to=to)


def _add_partitions(s: Session, label: str, tid: str, pid: int, epoch: int, topic: str, to: str) -> Any:
    m = req_mod(24, 3)
    return s.ask(label, 24, 3, m.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(m.AddPartitionsToTxnTopic(name=topic, partitions=(0,)),)), to=to)


def _end_txn(s: Session, label: str, tid: str, pid: int, epoch: int, commit: bool, to: str) -> Any:
    m = req_mod(26, 4)
    return s.ask(label, 26, 4, m.EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                               committed=commit), to=to)


@scenario
def a_transaction_adds_a_partition_and_commits(s: Session) -> None:
    topic, tid = f"{s.name}-t", f"{s.name}-tx"
    _create_topic(s, topic)
    coord = s.coordinator(tid, key_type=1)
    init = _init_txn(s, "init", tid, coord)
    _add_partitions(s, "add", tid, init.producer_id, init.producer_epoch, topic, coord)
    _add_partitions(s, "add_again", tid, init.producer_id, init.producer_epoch, topic, coord)
    _end_txn(s, "commit", tid, init.producer_id, init.producer_epoch, True, coord)
    _end_txn(s, "commit_again", tid, init.producer_id, init.producer_epoch, True, coord)


@scenario
def a_new_producer_of_an_open_transaction_aborts_it(s: Session) -> None:
    topic, tid = f"{s.name}-t", f"{s.name}-tx"
    _create_topic(s, topic)
    coord = s.coordinator(tid, key_type=1)
    init = _init_txn(s, "init", tid, coord)
    _add_partitions(s, "add", tid, init.producer_id, init.producer_epoch, topic, coord)
    m = req_mod(22, 4)
    body = m.InitProducerIdRequest(transactional_id=tid, transaction_timeout=60000 * MS, producer_id=-1,
                                   producer_epoch=-1)
    s.ask("init_while_open", 22, 4, body, to=coord)  # the open transaction is aborted first
    s.ask_settled("init_once_aborted", 22, 4, body, to=coord, done=lambda r: int(r.error_code) == 0)
    _end_txn(s, "old_producer_commits", tid, init.producer_id, init.producer_epoch, True, coord)


@scenario
def a_transaction_of_an_old_epoch_is_fenced(s: Session) -> None:
    topic, tid = f"{s.name}-t", f"{s.name}-tx"
    _create_topic(s, topic)
    coord = s.coordinator(tid, key_type=1)
    first = _init_txn(s, "init", tid, coord)
    _init_txn(s, "init_again", tid, coord)  # the same id again: a new epoch fences the first
    _add_partitions(s, "add_with_old_epoch", tid, first.producer_id, first.producer_epoch, topic, coord)
    _end_txn(s, "end_with_old_epoch", tid, first.producer_id, first.producer_epoch, False, coord)


@scenario
def a_transaction_that_never_began(s: Session) -> None:
    tid = f"{s.name}-tx"
    coord = s.coordinator(tid, key_type=1)
    init = _init_txn(s, "init", tid, coord)
    _end_txn(s, "commit_nothing", tid, init.producer_id, init.producer_epoch, True, coord)
    _end_txn(s, "abort_nothing", tid, init.producer_id, init.producer_epoch, False, coord)
    _end_txn(s, "wrong_producer", tid, init.producer_id + 1, init.producer_epoch, True, coord)


@scenario
def offsets_added_to_a_transaction_and_committed(s: Session) -> None:
    topic, tid, group = f"{s.name}-t", f"{s.name}-tx", f"{s.name}-g"
    _create_topic(s, topic)
    coord = s.coordinator(tid, key_type=1)
    init = _init_txn(s, "init", tid, coord)
    m = req_mod(25, 4)
    s.ask("add_offsets", 25, 4, m.AddOffsetsToTxnRequest(transactional_id=tid, producer_id=init.producer_id,
                                                          producer_epoch=init.producer_epoch, group_id=group), to=coord)
    tc = req_mod(28, 4)
    s.ask_settled("txn_commit", 28, 4, tc.TxnOffsetCommitRequest(
        transactional_id=tid, group_id=group, producer_id=init.producer_id, producer_epoch=init.producer_epoch,
        generation_id=-1, member_id="", group_instance_id=None, topics=(tc.TxnOffsetCommitRequestTopic(
            name=topic, partitions=(tc.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=4, committed_leader_epoch=-1, committed_metadata=""),)),)),
        to=s.coordinator(group))
    _end_txn(s, "commit", tid, init.producer_id, init.producer_epoch, True, coord)
    of = req_mod(9, 8)
    s.ask_settled("fetch", 9, 8, of.OffsetFetchRequest(groups=(of.OffsetFetchRequestGroup(group_id=group, topics=None),),
                                                      require_stable=True), to=s.coordinator(group),
                  done=lambda r: bool(r.groups[0].topics))


# ---------------------------------------------------------------- the consumer group protocol (KIP-848)

def _cg_beat(s: Session, label: str, group: str, member: str, epoch: int, topics: tuple[str, ...] | None,
             to: str) -> Any:
    m = req_mod(68, 1)
    return s.ask(label, 68, 1, m.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout=30000 * MS, subscribed_topic_names=topics, subscribed_topic_regex=None,
        server_assignor=None, topic_partitions=() if epoch == 0 else None), to=to)


@scenario
def a_consumer_group_member_joins_beats_and_leaves(s: Session) -> None:
    import uuid as _uuid

    topic, group = f"{s.name}-t", f"{s.name}-g"
    _create_topic(s, topic, 2)
    coord = s.coordinator(group)
    _wait_for_leaders(s, topic, at=coord)  # the coordinator assigns only topics it knows
    member = str(_uuid.uuid4())
    s.symbols.of("member", member)  # the client chooses its member id: the same symbol on both sides
    joined = _cg_beat(s, "join", group, member, 0, (topic,), coord)
    _cg_beat(s, "beat", group, member, joined.member_epoch, None, coord)
    _cg_beat(s, "beat_with_a_future_epoch", group, member, joined.member_epoch + 5, None, coord)
    _cg_beat(s, "beat_as_an_unknown_member", group, str(_uuid.uuid4()), 1, None, coord)
    for version in (5, 6):  # DescribeGroups describes classic groups only: v6 says so
        dg = req_mod(15, version)
        s.ask(f"describe_groups_v{version}", 15, version,
              dg.DescribeGroupsRequest(groups=(group,), include_authorized_operations=False), to=coord)
    _cg_beat(s, "leave", group, member, -1, None, coord)
    _cg_beat(s, "beat_after_leaving", group, member, joined.member_epoch, None, coord)


def _owned_beat(s: Session, label: str, group: str, member: str, epoch: int, owned: Any, to: str) -> Any:
    """A heartbeat that reports the partitions the member owns (its assignment, as it took it)."""
    m = req_mod(68, 1)
    parts = tuple(m.TopicPartitions(topic_id=t.topic_id, partitions=tuple(t.partitions)) for t in owned)
    return s.ask(label, 68, 1, m.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout=-1 * MS, subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
        topic_partitions=parts), to=to)


@scenario
def a_second_consumer_group_member_gets_partitions_the_first_revokes(s: Session) -> None:
    import time
    import uuid as _uuid

    topic, group = f"{s.name}-t", f"{s.name}-g"
    _create_topic(s, topic, 2)
    coord = s.coordinator(group)
    _wait_for_leaders(s, topic, at=coord)
    a, b = str(_uuid.uuid4()), str(_uuid.uuid4())
    s.symbols.of("member", a)
    s.symbols.of("member", b)
    joined = _cg_beat(s, "a_joins", group, a, 0, (topic,), coord)
    stable = _owned_beat(s, "a_owns_both", group, a, joined.member_epoch, joined.assignment.topic_partitions, coord)
    b_joined = _cg_beat(s, "b_joins", group, b, 0, (topic,), coord)  # nothing yet: a still owns both
    time.sleep(1.5)  # past Kafka 4.3+'s assignment interval (1 s), which batches new targets
    told = _owned_beat(s, "a_told_to_revoke", group, a, stable.member_epoch,
                       joined.assignment.topic_partitions, coord)
    kept = told.assignment.topic_partitions if told.assignment is not None else ()
    _owned_beat(s, "a_revoked", group, a, told.member_epoch, kept, coord)
    m, epoch = req_mod(68, 1), b_joined.member_epoch
    for _ in range(50):  # b heartbeats at the epoch it was last given until the freed partition is its
        got = s.conn(coord).call(68, 1, m.ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=b, member_epoch=epoch, instance_id=None, rack_id=None,
            rebalance_timeout=-1 * MS, subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
            topic_partitions=()))
        epoch = got.member_epoch if int(got.error_code) == 0 else epoch
        if got.assignment is not None or int(got.error_code) != 0:
            break
        time.sleep(0.2)
    s.record("b_gets_the_other", got)


@scenario
def a_consumer_group_heartbeat_without_a_member_id(s: Session) -> None:
    group = f"{s.name}-g"
    coord = s.coordinator(group)
    _cg_beat(s, "empty_member_id", group, "", 0, (f"{s.name}-t",), coord)
    _cg_beat(s, "no_subscription", group, "m-1", 0, None, coord)


# ---------------------------------------------------------------- more of the classic protocol's edges

@scenario
def a_commit_with_metadata_too_large(s: Session) -> None:
    topic, group = f"{s.name}-t", f"{s.name}-g"
    _create_topic(s, topic)
    coord = s.coordinator(group)
    oc = req_mod(8, 8)
    s.ask_settled("commit", 8, 8, oc.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(oc.OffsetCommitRequestTopic(name=topic, partitions=(
            oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                            committed_metadata="m" * 5000),)),)), to=coord)


def _topic_id(s: Session, topic: str) -> Any:
    m = req_mod(3, 12)
    r = s.conn(s.bootstrap).call(3, 12, m.MetadataRequest(
        topics=(m.MetadataRequestTopic(topic_id=NO_TOPIC_ID, name=topic),), allow_auto_topic_creation=False,
        include_topic_authorized_operations=False))
    return r.topics[0].topic_id


@scenario
def offsets_committed_and_fetched_by_topic_id(s: Session) -> None:
    topic, group = f"{s.name}-t", f"{s.name}-g"
    _create_topic(s, topic)
    coord = s.coordinator(group)
    _wait_for_leaders(s, topic, at=coord)
    tid = _topic_id(s, topic)
    s.symbols.of("topic-id", str(tid))
    oc = req_mod(8, 10)

    def commit(label: str, topic_id: Any) -> None:
        s.ask_settled(label, 8, 10, oc.OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=(oc.OffsetCommitRequestTopic(topic_id=topic_id, partitions=(
                oc.OffsetCommitRequestPartition(partition_index=0, committed_offset=3, committed_leader_epoch=-1,
                                                committed_metadata=""),)),)), to=coord)

    commit("commit", tid)
    commit("commit_unknown_id", uuid.UUID(int=12345))
    of = req_mod(9, 10)
    s.ask_settled("fetch", 9, 10, of.OffsetFetchRequest(groups=(of.OffsetFetchRequestGroup(
        group_id=group, member_id=None, member_epoch=-1, topics=(of.OffsetFetchRequestTopics(
            topic_id=tid, partition_indexes=(0,)),)),), require_stable=False), to=coord)


@scenario
def a_member_joining_with_another_protocol_type(s: Session) -> None:
    group = f"{s.name}-g"
    coord, joined = _joined(s, group)
    _sync(s, group, joined, coord, b"\x00")
    m = req_mod(11, 5)
    s.ask("join_as_connect", 11, 5, m.JoinGroupRequest(
        group_id=group, session_timeout=10000 * MS, rebalance_timeout=10000 * MS, member_id="",
        group_instance_id=None, protocol_type="connect",
        protocols=(m.JoinGroupRequestProtocol(name="default", metadata=b"\x00"),)), to=coord)


def _joined_left_and_deleted(s: Session, group: str) -> str:
    """A member joins ``group``, syncs and leaves; the group is deleted. Its coordinator."""
    coord, joined = _joined(s, group)
    _sync(s, group, joined, coord, b"\x00")
    leave = req_mod(13, 3)
    s.ask("leave", 13, 3, leave.LeaveGroupRequest(group_id=group, members=(
        leave.MemberIdentity(member_id=joined.member_id, group_instance_id=None),)), to=coord)
    dl = req_mod(42, 2)
    s.ask_settled("delete", 42, 2, dl.DeleteGroupsRequest(groups_names=(group,)), to=coord,
                  done=lambda r: int(r.results[0].error_code) == 0)
    return coord


@scenario
def a_group_deleted_once_its_last_member_left(s: Session) -> None:
    group = f"{s.name}-g"
    coord = _joined_left_and_deleted(s, group)
    dg = req_mod(15, 5)
    s.ask("describe_deleted", 15, 5, dg.DescribeGroupsRequest(groups=(group,), include_authorized_operations=False),
          to=coord)


# ---------------------------------------------------------------- a group's own configs (KIP-848)

GROUP_RESOURCE = 32


def _describe_group_configs(s: Session, label: str, group: str, keys: tuple[str, ...] | None = None,
                            synonyms: bool = True, expect: dict[str, str] | None = None, to: str | None = None) -> Any:
    """DescribeConfigs of a group; ``expect``: once the node asked shows these values (Kafka's
    brokers learn of a change a moment after the controller acknowledged it)."""
    m = req_mod(32, 4)

    def shows(r: Any) -> bool:
        values = {c.name: c.value for c in r.results[0].configs}
        return all(values.get(k) == v for k, v in (expect or {}).items())

    return s.ask_settled(label, 32, 4, m.DescribeConfigsRequest(resources=(m.DescribeConfigsResource(
        resource_type=GROUP_RESOURCE, resource_name=group, configuration_keys=keys),),
        include_synonyms=synonyms, include_documentation=False), to=to, done=shows)


def _alter_group_configs(s: Session, label: str, group: str, ops: tuple[tuple[str, int, str | None], ...],
                         validate_only: bool = False) -> Any:
    m = req_mod(44, 1)
    return s.ask(label, 44, 1, m.IncrementalAlterConfigsRequest(resources=(m.AlterConfigsResource(
        resource_type=GROUP_RESOURCE, resource_name=group, configs=tuple(
            m.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops)),),
        validate_only=validate_only))


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@scenario
def a_group_described_before_any_config_is_set(s: Session) -> None:
    group = f"{s.name}-g"
    _describe_group_configs(s, "all", group)
    _describe_group_configs(s, "two", group, ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                            synonyms=False)
    _describe_group_configs(s, "unknown_key", group, ("no.such.key",))


@scenario
def a_group_config_set_described_and_deleted(s: Session) -> None:
    group = f"{s.name}-g"
    _alter_group_configs(s, "validate_only", group, (("consumer.session.timeout.ms", SET, "50000"),),
                         validate_only=True)
    _describe_group_configs(s, "after_validate_only", group, ("consumer.session.timeout.ms",))
    _alter_group_configs(s, "set", group, (("consumer.session.timeout.ms", SET, "50000"),
                                           ("consumer.heartbeat.interval.ms", SET, "6000")))
    _describe_group_configs(s, "after_set", group, expect={"consumer.session.timeout.ms": "50000",
                                                           "consumer.heartbeat.interval.ms": "6000"})
    _alter_group_configs(s, "set_one_more", group, (("consumer.assignment.interval.ms", SET, "2000"),))
    _describe_group_configs(s, "after_set_one_more", group, ("consumer.session.timeout.ms",
                                                             "consumer.assignment.interval.ms"),
                            expect={"consumer.assignment.interval.ms": "2000"})
    _alter_group_configs(s, "delete", group, (("consumer.session.timeout.ms", DELETE, None),))
    _describe_group_configs(s, "after_delete", group, ("consumer.session.timeout.ms",
                                                       "consumer.heartbeat.interval.ms"),
                            expect={"consumer.session.timeout.ms": "45000"})
    _alter_group_configs(s, "delete_unset", group, (("consumer.session.timeout.ms", DELETE, None),))


@scenario
def group_configs_refused(s: Session) -> None:
    group = f"{s.name}-g"
    for label, ops in (
            ("session_below_min", (("consumer.session.timeout.ms", SET, "44999"),)),
            ("session_above_max", (("consumer.session.timeout.ms", SET, "60001"),)),
            ("heartbeat_below_min", (("consumer.heartbeat.interval.ms", SET, "4999"),)),
            ("heartbeat_above_max", (("consumer.heartbeat.interval.ms", SET, "15001"),)),
            ("not_a_number", (("consumer.session.timeout.ms", SET, "soon"),)),
            ("unknown_key", (("consumer.sesion.timeout.ms", SET, "50000"),)),
            ("a_topic_key", (("retention.ms", SET, "1000"),)),
            ("append_to_an_int", (("consumer.heartbeat.interval.ms", APPEND, "6000"),)),
            ("set_without_a_value", (("consumer.heartbeat.interval.ms", SET, None),)),
            ("a_key_twice", (("consumer.heartbeat.interval.ms", SET, "6000"),
                             ("consumer.heartbeat.interval.ms", SET, "7000"))),
            ("one_good_one_bad", (("consumer.heartbeat.interval.ms", SET, "6000"),
                                  ("consumer.session.timeout.ms", SET, "1"))),
            ("assignment_interval_negative", (("consumer.assignment.interval.ms", SET, "-1"),)),
            ("bad_boolean", (("consumer.assignor.offload.enable", SET, "maybe"),)),
            ("assignment_interval_above_max", (("consumer.assignment.interval.ms", SET, "15001"),)),
            ("share_assignment_interval_above_max", (("share.assignment.interval.ms", SET, "15001"),)),
            ("streams_assignment_interval_above_max", (("streams.assignment.interval.ms", SET, "15001"),)),
            ("streams_session_below_min", (("streams.session.timeout.ms", SET, "44999"),)),
            ("share_heartbeat_above_max", (("share.heartbeat.interval.ms", SET, "15001"),)),
            ("record_locks_above_max", (("share.partition.max.record.locks", SET, "4001"),)),
            ("lock_duration_below_min", (("share.record.lock.duration.ms", SET, "14999"),)),
            ("offset_reset_by_duration", (("share.auto.offset.reset", SET, "by_duration:PT1H"),)),
            ("offset_reset_by_bad_duration", (("share.auto.offset.reset", SET, "by_duration:an hour"),)),
            ("subtract_from_tags", (("streams.rack.aware.assignment.tags", SUBTRACT, "zone"),)),
            ("standby_replicas_above_max", (("streams.num.standby.replicas", SET, "3"),)),
            ("delivery_count_above_max", (("share.delivery.count.limit", SET, "11"),)),
            ("isolation_level_unknown", (("share.isolation.level", SET, "read_some"),)),
            ("offset_reset_unknown", (("share.auto.offset.reset", SET, "middle"),)),
            ("session_not_above_heartbeat", (("consumer.session.timeout.ms", SET, "45000"),
                                             ("consumer.heartbeat.interval.ms", SET, "15000"))),
    ):
        _alter_group_configs(s, label, group, ops)
    _describe_group_configs(s, "after", group, ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"))


@scenario
def group_configs_of_other_group_types(s: Session) -> None:
    group = f"{s.name}-g"
    _alter_group_configs(s, "share_and_streams", group, (("share.record.lock.duration.ms", SET, "15000"),
                                                         ("streams.num.standby.replicas", SET, "1")))
    _alter_group_configs(s, "share_lock_too_short", group, (("share.record.lock.duration.ms", SET, "999"),))
    _describe_group_configs(s, "after", group, ("share.record.lock.duration.ms", "streams.num.standby.replicas"),
                            expect={"share.record.lock.duration.ms": "15000"})


def _settled_at(s: Session, label: str, group: str, node: str, heartbeat_ms: str) -> None:
    """Until node ``node`` knows the group's heartbeat interval (a change reaches each node of
    either cluster a moment after it is acknowledged)."""
    m = req_mod(32, 4)
    s.ask_settled(label, 32, 4, m.DescribeConfigsRequest(resources=(m.DescribeConfigsResource(
        resource_type=GROUP_RESOURCE, resource_name=group, configuration_keys=("consumer.heartbeat.interval.ms",)),),
        include_synonyms=False, include_documentation=False), to=node,
        done=lambda r: bool(r.results[0].configs) and r.results[0].configs[0].value == heartbeat_ms)


@scenario
def a_group_heartbeat_interval_set_for_the_group(s: Session) -> None:
    import uuid as _uuid

    topic, group = f"{s.name}-t", f"{s.name}-g"
    _create_topic(s, topic, 1)
    _alter_group_configs(s, "set", group, (("consumer.heartbeat.interval.ms", SET, "7000"),))
    coord = s.coordinator(group)
    _wait_for_leaders(s, topic, at=coord)
    _settled_at(s, "at_the_coordinator", group, coord, "7000")
    member = str(_uuid.uuid4())
    s.symbols.of("member", member)
    joined = _cg_beat(s, "join", group, member, 0, (topic,), coord)
    _alter_group_configs(s, "set_again", group, (("consumer.heartbeat.interval.ms", SET, "8000"),))
    _settled_at(s, "again_at_the_coordinator", group, coord, "8000")
    m = req_mod(68, 1)
    s.ask_settled("beat", 68, 1, m.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=joined.member_epoch, instance_id=None, rack_id=None,
        rebalance_timeout=30000 * MS, subscribed_topic_names=None, subscribed_topic_regex=None,
        server_assignor=None, topic_partitions=None), to=coord,
        done=lambda r: int(r.heartbeat_interval.total_seconds() * 1000) == 8000)
    _cg_beat(s, "leave", group, member, -1, None, coord)


@scenario
def group_configs_by_alter_configs_and_of_a_deleted_group(s: Session) -> None:
    group = f"{s.name}-g"
    m = req_mod(33, 2)
    s.ask("alter_configs", 33, 2, m.AlterConfigsRequest(resources=(m.AlterConfigsResource(
        resource_type=GROUP_RESOURCE, resource_name=group, configs=(
            m.AlterableConfig(name="consumer.heartbeat.interval.ms", value="6000"),)),), validate_only=False))
    _describe_group_configs(s, "after_alter_configs", group, ("consumer.heartbeat.interval.ms",
                                                              "consumer.session.timeout.ms"),
                            expect={"consumer.heartbeat.interval.ms": "6000"})
    _alter_group_configs(s, "set_tags", group, (("streams.rack.aware.assignment.tags", SET, "zone,rack"),))
    _describe_group_configs(s, "after_set_tags", group, ("streams.rack.aware.assignment.tags",),
                            expect={"streams.rack.aware.assignment.tags": "zone,rack"})
    _alter_group_configs(s, "append_to_tags", group, (("streams.rack.aware.assignment.tags", APPEND, "zone"),))
    _describe_group_configs(s, "after_append", group, ("streams.rack.aware.assignment.tags",))
    _alter_group_configs(s, "set_assignor", group, (("streams.assignor.name", SET, "mine"),))
    _alter_group_configs(s, "set_dlq", group, (("errors.deadletterqueue.topic.name", SET, "dlq"),
                                               ("share.isolation.level", SET, "read_committed")))
    _describe_group_configs(s, "after_more", group, ("streams.assignor.name", "errors.deadletterqueue.topic.name",
                                                     "share.isolation.level"),
                            expect={"errors.deadletterqueue.topic.name": "dlq"})
    _joined_left_and_deleted(s, group)
    _describe_group_configs(s, "after_delete", group, ("consumer.heartbeat.interval.ms",))


# ---------------------------------------------------------------- a node's dynamic log defaults

BROKER_RESOURCE, TOPIC_RESOURCE = 4, 2


def _alter_broker(s: Session, label: str, broker: str, ops: tuple[tuple[str, int, str | None], ...]) -> Any:
    m = req_mod(44, 1)
    return s.ask(label, 44, 1, m.IncrementalAlterConfigsRequest(resources=(m.AlterConfigsResource(
        resource_type=BROKER_RESOURCE, resource_name=broker, configs=tuple(
            m.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops)),), validate_only=False))


def _describe(s: Session, label: str, rtype: int, name: str, keys: tuple[str, ...],
              expect: dict[str, str | None] | None = None) -> Any:
    """Without synonyms: Kafka names ``log.retention.hours`` among them, kcoord has no such setting."""
    m = req_mod(32, 4)

    def shows(r: Any) -> bool:
        values = {c.name: c.value for c in r.results[0].configs}
        return all(values.get(k) == v for k, v in (expect or {}).items())

    return s.ask_settled(label, 32, 4, m.DescribeConfigsRequest(resources=(m.DescribeConfigsResource(
        resource_type=rtype, resource_name=name, configuration_keys=keys),),
        include_synonyms=False, include_documentation=False), done=shows)


@scenario
def a_nodes_log_defaults_altered_for_the_cluster_and_for_one_node(s: Session) -> None:
    topic = f"{s.name}-t"
    _create_topic(s, topic)
    keys = ("log.retention.ms", "log.cleaner.delete.retention.ms")
    _alter_broker(s, "cluster_default", "", (("log.retention.ms", SET, "3600000"),
                                             ("log.cleaner.delete.retention.ms", SET, "60000")))
    _describe(s, "cluster_defaults", BROKER_RESOURCE, "", keys, expect={"log.retention.ms": "3600000"})
    _describe(s, "node_0", BROKER_RESOURCE, "0", keys, expect={"log.retention.ms": "3600000"})
    _describe(s, "topic", TOPIC_RESOURCE, topic, ("retention.ms", "delete.retention.ms"),
              expect={"retention.ms": "3600000"})
    _alter_broker(s, "node_0_own", "0", (("log.retention.ms", SET, "7200000"),))
    _describe(s, "node_0_after", BROKER_RESOURCE, "0", keys, expect={"log.retention.ms": "7200000"})
    _describe(s, "topic_after", TOPIC_RESOURCE, topic, ("retention.ms",), expect={"retention.ms": "7200000"})
    _alter_broker(s, "node_0_deleted", "0", (("log.retention.ms", DELETE, None),))
    _alter_broker(s, "cluster_default_deleted", "", (("log.retention.ms", DELETE, None),
                                                     ("log.cleaner.delete.retention.ms", DELETE, None)))
    _describe(s, "node_0_at_last", BROKER_RESOURCE, "0", ("log.cleaner.delete.retention.ms",),
              expect={"log.cleaner.delete.retention.ms": "86400000"})


@scenario
def a_nodes_log_defaults_refused(s: Session) -> None:
    for label, broker, ops in (
            ("not_dynamic", "0", (("log.retention.check.interval.ms", SET, "1000"),)),
            ("unknown", "0", (("no.such.config", SET, "1"),)),
            ("segment_too_small", "0", (("log.segment.bytes", SET, "1000"),)),
            ("ratio_above_one", "", (("log.cleaner.min.cleanable.ratio", SET, "2"),)),
            ("not_a_number", "", (("log.retention.ms", SET, "soon"),)),
            ("retention_below_minus_one", "", (("log.retention.bytes", SET, "-2"),)),
            ("append_to_a_long", "", (("log.retention.ms", APPEND, "1"),)),
            ("another_node", "1", (("log.retention.ms", SET, "3600000"),)),
    ):
        _alter_broker(s, label, broker, ops)
    _describe(s, "after", BROKER_RESOURCE, "", ("log.retention.ms",))
    # what either server took (a name it does not know, a negative retention) goes again
    _alter_broker(s, "cleared", "", (("log.retention.bytes", DELETE, None),))
    _alter_broker(s, "cleared_node_0", "0", (("no.such.config", DELETE, None),))
