"""The authorization matrix (issue 17, acceptance 2): every API a node serves, asked by a principal
without the ACL it needs (alice, who has none) and by one with it (bob), over the wire on a node
with Kafka's StandardAuthorizer semantics on. Each case asserts Kafka's outcome for both (the code
and where it goes: whole request, per group, per topic, or a listing filtered in silence), with
bob's topic ACL a PREFIXED one and a DENY that wins over it.

ACLs: bob may do ALL on topics prefixed ``mt-``, except READ on ``mt-denied`` (DENY); ALL on groups
prefixed ``mt-group``; ALL on transactional id ``mt-txn``. ``zz-secret`` and ``other-group`` have
no ACL at all (so nobody but the super user ``admin`` may touch them).
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kio.index import load_payload_module, load_request_schema
from kio.static.constants import EntityType
from kio.static.primitive import Records

from cluster.security.authorizer import Operation, PatternType, Permission, ResourceType
from cluster.tools.local_cluster import free_low_port
from replication.record_batch import build_batch
from tests.cluster.harness import NodeProcess
from tests.wire.examples import example
from tests.wire.raw import RawConn

pytestmark = pytest.mark.cluster

TOPIC, DENIED_TOPIC, SECRET = "mt-topic", "mt-denied", "zz-secret"
GROUP, OTHER_GROUP, TXN = "mt-group", "other-group", "mt-txn"
NONE, TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, TXN_AUTH = 0, 29, 30, 31, 53
ALL_GROUP_OPS = (1 << 3) | (1 << 8) | (1 << 6) | (1 << 10) | (1 << 11)  # 3400


def req(api: int, version: int, **fields: Any) -> Any:
    """The request ``api`` v``version`` with these fields (the rest from a valid example)."""
    return dataclasses.replace(example(load_request_schema(api, version)), **fields)


def sub(api: int, version: int, entity: str, **fields: Any) -> Any:
    """A nested entity of a request, by class name."""
    cls = getattr(load_payload_module(api, version, EntityType.request), entity)
    return dataclasses.replace(example(cls), **fields)


@dataclasses.dataclass
class Who:
    conn: RawConn

    def __call__(self, api: int, version: int, **fields: Any) -> Any:
        answer = self.conn.call(api, version, req(api, version, **fields))
        assert answer is not None, f"api {api}: connection closed"
        return answer


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NodeProcess, str]]:
    port, sasl_port = free_low_port(), free_low_port()
    n = NodeProcess(tmp_path_factory.mktemp("authz"), port=port, settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN", "sasl_users": "admin:a-secret,alice:b-secret,bob:c-secret",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin", "group.initial.rebalance.delay.ms": 0, "auto.create.topics.enable": "false"}).start()
    yield n, f"127.0.0.1:{sasl_port}"
    n.kill()


def login(bootstrap: str, user: str, password: str) -> Who:
    conn = RawConn(bootstrap, timeout=15)
    assert conn.sasl_plain(user, password) == 0
    return Who(conn)


def acl(rtype: ResourceType, name: str, pattern: PatternType, op: Operation, permission: Permission = Permission.ALLOW,
        principal: str = "User:bob") -> Any:
    return sub(30, 3, "AclCreation", resource_type=int(rtype), resource_name=name, resource_pattern_type=int(pattern),
               principal=principal, host="*", operation=int(op), permission_type=int(permission))


def commit(who: Who, group: str, topic: str, *, version: int = 8) -> Any:
    return who(8, version, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
               topics=(sub(8, version, "OffsetCommitRequestTopic", name=topic, partitions=(
                   sub(8, version, "OffsetCommitRequestPartition", partition_index=0, committed_offset=1,
                       committed_leader_epoch=-1, committed_metadata=""),)),))


@pytest.fixture(scope="module")
def users(node: tuple[NodeProcess, str]) -> Iterator[tuple[Who, Who, Who]]:
    _, bootstrap = node
    admin, alice, bob = (login(bootstrap, u, p) for u, p in (("admin", "a-secret"), ("alice", "b-secret"),
                                                            ("bob", "c-secret")))
    created = admin(30, 3, creations=(
        acl(ResourceType.TOPIC, "mt-", PatternType.PREFIXED, Operation.ALL),
        acl(ResourceType.TOPIC, DENIED_TOPIC, PatternType.LITERAL, Operation.READ, Permission.DENY),
        acl(ResourceType.GROUP, GROUP, PatternType.PREFIXED, Operation.ALL),
        acl(ResourceType.TRANSACTIONAL_ID, TXN, PatternType.LITERAL, Operation.ALL)))
    assert [int(r.error_code) for r in created.results] == [0] * 4
    topics = admin(19, 7, timeout=datetime.timedelta(seconds=10), validate_only=False, topics=tuple(
        sub(19, 7, "CreatableTopic", name=t, num_partitions=1, replication_factor=1, assignments=(), configs=())
        for t in (TOPIC, DENIED_TOPIC, SECRET)))
    assert [int(t.error_code) for t in topics.topics] == [0, 0, 0]
    for t in (TOPIC, SECRET):  # groups with offsets on both topics
        for g in (GROUP, OTHER_GROUP, "mt-group-doomed"):
            assert int(commit(admin, g, t).topics[0].partitions[0].error_code) == 0
    yield admin, alice, bob
    for w in (admin, alice, bob):
        w.conn.close()


def codes_by_topic(topics: Any) -> dict[str, set[int]]:
    return {t.name: {int(p.error_code) for p in t.partitions} for t in topics}


# -- the data plane ---------------------------------------------------------------------------------

def test_metadata(users: tuple[Who, Who, Who]) -> None:
    _, alice, bob = users
    ask = dict(allow_auto_topic_creation=False, include_topic_authorized_operations=True)
    topics = (sub(3, 12, "MetadataRequestTopic", topic_id=None, name=TOPIC),
              sub(3, 12, "MetadataRequestTopic", topic_id=None, name="mt-missing"))
    assert {t.name: int(t.error_code) for t in alice(3, 12, topics=topics, **ask).topics} == \
        {TOPIC: TOPIC_AUTH, "mt-missing": TOPIC_AUTH}  # a name it may not see tells nothing
    answer = bob(3, 12, topics=topics, **ask).topics
    assert {t.name: int(t.error_code) for t in answer} == {TOPIC: NONE, "mt-missing": 3}
    assert answer[0].topic_authorized_operations == 3576  # every topic operation (ALL)
    assert [t.name for t in alice(3, 12, topics=None, **ask).topics] == []  # listings leave out, silently
    assert sorted(t.name for t in bob(3, 12, topics=None, **ask).topics) == [DENIED_TOPIC, TOPIC]


def produce(who: Who, topic: str, *, acks: int = 1, transactional_id: str | None = None) -> Any:
    return who.conn.call(0, 9, req(0, 9, transactional_id=transactional_id, acks=acks,
                                   timeout=datetime.timedelta(seconds=10), topic_data=(
        sub(0, 9, "TopicProduceData", name=topic, partition_data=(
            sub(0, 9, "PartitionProduceData", index=0, records=Records(build_batch([(None, b"v")]))),)),)))


def test_produce_fetch_list_offsets_describe_producers(users: tuple[Who, Who, Who],
                                                       node: tuple[NodeProcess, str]) -> None:
    _, alice, bob = users
    refused = produce(alice, TOPIC)
    assert [int(p.error_code) for t in refused.responses for p in t.partition_responses] == [TOPIC_AUTH]
    assert [int(p.error_code) for t in produce(bob, TOPIC).responses for p in t.partition_responses] == [NONE]
    assert [int(p.error_code) for t in produce(alice, "zz-nothing").responses
            for p in t.partition_responses] == [TOPIC_AUTH]  # not UNKNOWN_TOPIC: authorization comes first
    # acks=0 has no answer to carry the refusal: the connection is closed, as Kafka does
    _, bootstrap = node
    fresh = login(bootstrap, "alice", "b-secret")
    fresh.conn.request(0, 9, req(0, 9, transactional_id=None, acks=0, timeout=datetime.timedelta(seconds=10),
                                 topic_data=(sub(0, 9, "TopicProduceData", name=TOPIC, partition_data=(
                                     sub(0, 9, "PartitionProduceData", index=0,
                                         records=Records(build_batch([(None, b"v")]))),)),)))
    assert fresh.conn.closed_by_peer()
    fresh.conn.close()

    def fetch(who: Who, topic: str) -> set[int]:
        answer = who(1, 12, cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0,
                     max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
                     forgotten_topics_data=(), topics=(sub(1, 12, "FetchTopic", topic=topic, partitions=(
                         sub(1, 12, "FetchPartition", partition=0, current_leader_epoch=-1, fetch_offset=0,
                             last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20),)),))
        return {int(p.error_code) for t in answer.responses for p in t.partitions}

    assert fetch(alice, TOPIC) == {TOPIC_AUTH}
    assert fetch(bob, TOPIC) == {NONE}
    assert fetch(bob, DENIED_TOPIC) == {TOPIC_AUTH}  # the DENY wins over the prefixed ALLOW ALL

    def list_offsets(who: Who) -> set[int]:
        answer = who(2, 7, replica_id=-1, isolation_level=0, topics=(sub(2, 7, "ListOffsetsTopic", name=TOPIC, partitions=(
            sub(2, 7, "ListOffsetsPartition", partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))
        return {int(p.error_code) for t in answer.topics for p in t.partitions}

    assert list_offsets(alice) == {TOPIC_AUTH}
    assert list_offsets(bob) == {NONE}
    describe = dict(topics=(sub(61, 0, "TopicRequest", name=TOPIC, partition_indexes=(0,)),))
    assert {int(p.error_code) for t in alice(61, 0, **describe).topics for p in t.partitions} == {TOPIC_AUTH}
    assert {int(p.error_code) for t in bob(61, 0, **describe).topics for p in t.partitions} == {NONE}


def test_create_and_delete_topics(users: tuple[Who, Who, Who]) -> None:
    _, alice, bob = users

    def create(who: Who, name: str) -> Any:
        return who(19, 7, timeout=datetime.timedelta(seconds=10), validate_only=False, topics=(
            sub(19, 7, "CreatableTopic", name=name, num_partitions=1, replication_factor=1, assignments=(), configs=()),
        )).topics[0]

    def delete(who: Who, name: str) -> int:
        return int(who(20, 6, timeout=datetime.timedelta(seconds=10), topics=(
            sub(20, 6, "DeleteTopicState", name=name, topic_id=uuid.UUID(int=0)),)).responses[0].error_code)

    assert int(create(alice, "mt-new").error_code) == TOPIC_AUTH
    made = create(bob, "mt-new")
    assert (int(made.error_code), int(made.topic_config_error_code)) == (NONE, NONE)
    assert delete(alice, "mt-new") == TOPIC_AUTH
    assert delete(alice, "zz-never-was") == TOPIC_AUTH  # not UNKNOWN: alice may not even describe it
    assert delete(bob, "mt-never-was") == 3  # bob may describe it: it does not exist
    assert delete(bob, SECRET) == TOPIC_AUTH
    assert delete(bob, "mt-new") == NONE


# -- groups -----------------------------------------------------------------------------------------

def test_find_coordinator(users: tuple[Who, Who, Who]) -> None:
    _, alice, bob = users

    def find(who: Who, key: str, key_type: int) -> int:
        return int(who(10, 4, key_type=key_type, coordinator_keys=(key,)).coordinators[0].error_code)

    assert (find(alice, GROUP, 0), find(bob, GROUP, 0), find(bob, OTHER_GROUP, 0)) == (GROUP_AUTH, NONE, GROUP_AUTH)
    assert (find(alice, TXN, 1), find(bob, TXN, 1)) == (TXN_AUTH, NONE)


def test_classic_group_membership(users: tuple[Who, Who, Who]) -> None:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup: READ on the group, 30 for the whole request."""
    _, alice, bob = users
    join = dict(group_id=GROUP, session_timeout=datetime.timedelta(seconds=10),
                rebalance_timeout=datetime.timedelta(seconds=10), member_id="", group_instance_id=None,
                protocol_type="consumer", protocols=(sub(11, 5, "JoinGroupRequestProtocol", name="range", metadata=b""),))
    assert int(alice(11, 5, **join).error_code) == GROUP_AUTH
    first = bob(11, 5, **join)
    assert int(first.error_code) == 79  # MEMBER_ID_REQUIRED: served
    joined = bob(11, 5, **{**join, "member_id": first.member_id})
    assert int(joined.error_code) == NONE
    sync = dict(group_id=GROUP, generation_id=joined.generation_id, member_id=joined.member_id, group_instance_id=None,
                protocol_type="consumer", protocol_name="range", assignments=())
    assert int(alice(14, 5, **sync).error_code) == GROUP_AUTH
    assert int(bob(14, 5, **sync).error_code) == NONE
    beat = dict(group_id=GROUP, generation_id=joined.generation_id, member_id=joined.member_id, group_instance_id=None)
    assert int(alice(12, 4, **beat).error_code) == GROUP_AUTH
    assert int(bob(12, 4, **beat).error_code) == NONE
    leave = dict(group_id=GROUP, members=(sub(13, 5, "MemberIdentity", member_id=joined.member_id,
                                              group_instance_id=None, reason=None),))
    assert int(alice(13, 5, **leave).error_code) == GROUP_AUTH
    assert int(bob(13, 5, **leave).error_code) == NONE


def test_offset_commit_fetch_delete(users: tuple[Who, Who, Who]) -> None:
    _, alice, bob = users
    assert codes_by_topic(commit(alice, GROUP, TOPIC).topics) == {TOPIC: {GROUP_AUTH}}
    assert codes_by_topic(commit(bob, GROUP, TOPIC).topics) == {TOPIC: {NONE}}
    assert codes_by_topic(commit(bob, GROUP, SECRET).topics) == {SECRET: {TOPIC_AUTH}}  # group, then topic

    def fetch(who: Who, group: str, topics: tuple[str, ...] | None) -> Any:
        wanted = None if topics is None else tuple(
            sub(9, 8, "OffsetFetchRequestTopics", name=t, partition_indexes=(0,)) for t in topics)
        return who(9, 8, require_stable=False, groups=(
            sub(9, 8, "OffsetFetchRequestGroup", group_id=group, topics=wanted),)).groups[0]

    assert int(fetch(alice, GROUP, (TOPIC,)).error_code) == GROUP_AUTH
    named = fetch(bob, GROUP, (TOPIC, SECRET))
    assert int(named.error_code) == NONE and codes_by_topic(named.topics) == {TOPIC: {NONE}, SECRET: {TOPIC_AUTH}}
    assert [p.committed_offset for t in named.topics if t.name == SECRET for p in t.partitions] == [-1]
    everything = fetch(bob, GROUP, None)  # all partitions: the secret topic's offset is left out, silently
    assert [t.name for t in everything.topics] == [TOPIC]
    assert sorted(t.name for t in fetch(users[0], GROUP, None).topics) == [TOPIC, SECRET]  # the super user's view

    def offset_delete(who: Who, group: str, topic: str) -> Any:
        return who(47, 0, group_id=group, topics=(sub(47, 0, "OffsetDeleteRequestTopic", name=topic, partitions=(
            sub(47, 0, "OffsetDeleteRequestPartition", partition_index=0),)),))

    assert int(offset_delete(alice, "mt-group-doomed", TOPIC).error_code) == GROUP_AUTH
    answer = offset_delete(bob, "mt-group-doomed", SECRET)
    assert int(answer.error_code) == NONE and codes_by_topic(answer.topics) == {SECRET: {TOPIC_AUTH}}
    answer = offset_delete(bob, "mt-group-doomed", TOPIC)
    assert int(answer.error_code) == NONE and codes_by_topic(answer.topics) == {TOPIC: {NONE}}


def test_describe_list_delete_groups(users: tuple[Who, Who, Who]) -> None:
    admin, alice, bob = users
    described = {g.group_id: g for g in bob(15, 5, groups=(GROUP, OTHER_GROUP), include_authorized_operations=True).groups}
    assert int(described[OTHER_GROUP].error_code) == GROUP_AUTH
    assert int(described[GROUP].error_code) == NONE and described[GROUP].authorized_operations == ALL_GROUP_OPS
    assert int(alice(15, 5, groups=(GROUP,), include_authorized_operations=False).groups[0].error_code) == GROUP_AUTH
    # the bitfield is the principal's: READ alone is READ and the DESCRIBE it implies
    partial = acl(ResourceType.GROUP, "alice-only", PatternType.LITERAL, Operation.READ, principal="User:alice")
    admin(30, 3, creations=(partial,))
    mine = alice(15, 5, groups=("alice-only",), include_authorized_operations=True).groups[0]
    assert (int(mine.error_code), mine.authorized_operations) == (NONE, (1 << 3) | (1 << 8))
    admin(31, 3, filters=(sub(31, 3, "DeleteAclsFilter", resource_type_filter=int(ResourceType.GROUP),
                              resource_name_filter="alice-only", pattern_type_filter=int(PatternType.LITERAL),
                              principal_filter=None, host_filter=None, operation=1, permission_type=1),))

    def listed(who: Who) -> set[str]:
        answer = who(16, 4, states_filter=())
        assert int(answer.error_code) == NONE  # never an error: a principal sees what it may describe
        return {g.group_id for g in answer.groups}

    assert listed(alice) == set()
    assert OTHER_GROUP not in listed(bob) and GROUP in listed(bob)
    assert {GROUP, OTHER_GROUP} <= listed(admin)

    def delete(who: Who, group: str) -> int:
        return int(who(42, 2, groups_names=(group,)).results[0].error_code)

    assert (delete(alice, "mt-group-doomed"), delete(bob, OTHER_GROUP)) == (GROUP_AUTH, GROUP_AUTH)
    assert delete(bob, "mt-group-doomed") == NONE


def test_consumer_group_protocol(users: tuple[Who, Who, Who]) -> None:
    """ConsumerGroupHeartbeat: READ on the group, then DESCRIBE on each subscribed topic (Kafka 4)."""
    _, alice, bob = users
    beat = dict(group_id="mt-group-848", member_id=uuid.uuid4().hex[:22], member_epoch=0, instance_id=None, rack_id=None,
                rebalance_timeout=datetime.timedelta(seconds=10), server_assignor=None, topic_partitions=())
    assert int(alice(68, 0, subscribed_topic_names=(TOPIC,), **beat).error_code) == GROUP_AUTH
    assert int(bob(68, 0, subscribed_topic_names=(SECRET,), **beat).error_code) == TOPIC_AUTH
    assert int(bob(68, 0, subscribed_topic_names=(TOPIC,), **beat).error_code) == NONE
    # a regex reaches only what the principal may describe (Kafka drops the rest silently)
    by_regex = bob(68, 1, **{**beat, "group_id": "mt-group-re", "member_id": uuid.uuid4().hex[:22]},
                   subscribed_topic_names=None, subscribed_topic_regex="mt-topic|zz-secret")
    assert int(by_regex.error_code) == NONE
    ids = {t.topic_id for t in by_regex.assignment.topic_partitions} if by_regex.assignment else set()
    names = {t.name: t.topic_id for t in users[0](3, 12, topics=None, allow_auto_topic_creation=False,
                                                  include_topic_authorized_operations=False).topics}
    assert ids == {names[TOPIC]}, (ids, names)
    assert int(alice(69, 0, group_ids=("mt-group-848",), include_authorized_operations=True).groups[0].error_code) == GROUP_AUTH
    seen = bob(69, 0, group_ids=("mt-group-848",), include_authorized_operations=True).groups[0]
    assert int(seen.error_code) == NONE and seen.authorized_operations == ALL_GROUP_OPS
    assert {p.topic_name for m in seen.members for p in m.assignment.topic_partitions} == {TOPIC}
    # DESCRIBE on the group but not on the topics its members hold: 29 for the group (Kafka 4)
    admin = users[0]
    admin(30, 3, creations=(acl(ResourceType.GROUP, "mt-group-848", PatternType.LITERAL, Operation.DESCRIBE,
                                principal="User:alice"),))
    hidden = alice(69, 0, group_ids=("mt-group-848",), include_authorized_operations=False).groups[0]
    assert (int(hidden.error_code), hidden.members) == (TOPIC_AUTH, ())
    admin(31, 3, filters=(sub(31, 3, "DeleteAclsFilter", resource_type_filter=int(ResourceType.GROUP),
                              resource_name_filter="mt-group-848", pattern_type_filter=int(PatternType.LITERAL),
                              principal_filter="User:alice", host_filter=None, operation=1, permission_type=1),))


# -- producers and transactions ---------------------------------------------------------------------

def test_idempotent_and_transactional_producers(users: tuple[Who, Who, Who]) -> None:
    _, alice, bob = users
    init = dict(transaction_timeout=datetime.timedelta(seconds=30), producer_id=-1, producer_epoch=-1)
    assert int(alice(22, 4, transactional_id=None, **init).error_code) == CLUSTER_AUTH
    assert int(bob(22, 4, transactional_id=None, **init).error_code) == NONE  # WRITE on some topic (KIP-679)
    assert int(alice(22, 4, transactional_id=TXN, **init).error_code) == TXN_AUTH
    started = bob(22, 4, transactional_id=TXN, **init)
    assert int(started.error_code) == NONE
    pid, epoch = started.producer_id, started.producer_epoch

    def add(who: Who, *topics: str) -> dict[str, set[int]]:
        answer = who(24, 3, v3_and_below_transactional_id=TXN, v3_and_below_producer_id=pid,
                     v3_and_below_producer_epoch=epoch, v3_and_below_topics=tuple(
                         sub(24, 3, "AddPartitionsToTxnTopic", name=t, partitions=(0,)) for t in topics))
        return {t.name: {int(p.partition_error_code) for p in t.results_by_partition}
                for t in answer.results_by_topic_v3_and_below}

    assert add(alice, TOPIC) == {TOPIC: {TXN_AUTH}}
    assert add(bob, TOPIC, SECRET) == {TOPIC: {55}, SECRET: {TOPIC_AUTH}}  # nothing added; the rest not attempted
    assert add(bob, TOPIC) == {TOPIC: {NONE}}
    ids = dict(transactional_id=TXN, producer_id=pid, producer_epoch=epoch)
    assert int(alice(25, 3, group_id=GROUP, **ids).error_code) == TXN_AUTH
    assert int(bob(25, 3, group_id=OTHER_GROUP, **ids).error_code) == GROUP_AUTH
    assert int(bob(25, 3, group_id=GROUP, **ids).error_code) == NONE
    offsets = dict(group_id=GROUP, generation_id=-1, member_id="", group_instance_id=None, **ids)

    def txn_commit(who: Who, topic: str) -> dict[str, set[int]]:
        answer = who(28, 3, topics=(sub(28, 3, "TxnOffsetCommitRequestTopic", name=topic, partitions=(
            sub(28, 3, "TxnOffsetCommitRequestPartition", partition_index=0, committed_offset=1,
                committed_leader_epoch=-1, committed_metadata=""),)),), **offsets)
        return codes_by_topic(answer.topics)

    assert txn_commit(alice, TOPIC) == {TOPIC: {TXN_AUTH}}
    assert txn_commit(bob, SECRET) == {SECRET: {TOPIC_AUTH}}
    assert txn_commit(bob, TOPIC) == {TOPIC: {NONE}}
    refused = produce(bob, TOPIC, transactional_id="zz-other-txn")
    assert {int(p.error_code) for t in refused.responses for p in t.partition_responses} == {TXN_AUTH}
    # kio cannot read the start time -1 of a refused id back: its error code is read by hand (header,
    # throttle time, a one-byte array length, then the first state's error code)
    alice.conn.request(65, 0, req(65, 0, transactional_ids=(TXN,)))
    frame = alice.conn.recv_frame()
    assert frame is not None and struct.unpack_from(">h", frame, 10)[0] == TXN_AUTH
    described = bob(65, 0, transactional_ids=(TXN,)).transaction_states[0]
    assert int(described.error_code) == NONE and described.transaction_state == "Ongoing"
    listing = dict(state_filters=(), producer_id_filters=(), duration_filter=-1)
    assert [t.transactional_id for t in alice(66, 1, **listing).transaction_states] == []  # filtered, no error
    assert [t.transactional_id for t in bob(66, 1, **listing).transaction_states] == [TXN]
    assert int(alice(26, 3, committed=False, **ids).error_code) == TXN_AUTH
    assert int(bob(26, 3, committed=False, **ids).error_code) == NONE


def test_cluster_apis_and_acl_admin(users: tuple[Who, Who, Who]) -> None:
    """WriteTxnMarkers (the nodes' own) and the ACL APIs need the cluster: 31 for anyone else."""
    admin, alice, bob = users
    markers = dict(markers=(sub(27, 1, "WritableTxnMarker", producer_id=1, producer_epoch=0, transaction_result=False,
                                topics=(), coordinator_epoch=0),))
    markers["markers"] = (dataclasses.replace(markers["markers"][0], topics=(
        sub(27, 1, "WritableTxnMarkerTopic", name=TOPIC, partition_indexes=(0,)),)),)
    assert {int(p.error_code) for m in alice(27, 1, **markers).markers for t in m.topics
            for p in t.partitions} == {CLUSTER_AUTH}
    everything = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                      host_filter=None, operation=1, permission_type=1)
    assert int(bob(29, 3, **everything).error_code) == CLUSTER_AUTH
    assert int(bob(30, 3, creations=(acl(ResourceType.TOPIC, "x", PatternType.LITERAL, Operation.READ),)).results[0]
               .error_code) == CLUSTER_AUTH
    assert int(bob(31, 3, filters=(sub(31, 3, "DeleteAclsFilter", **everything),)).filter_results[0].error_code) \
        == CLUSTER_AUTH
    listed = admin(29, 3, **everything)
    assert int(listed.error_code) == NONE and {(r.resource_name, r.pattern_type) for r in listed.resources} >= {
        ("mt-", PatternType.PREFIXED), (GROUP, PatternType.PREFIXED), (TXN, PatternType.LITERAL)}
    # granted DESCRIBE on the cluster, alice lists every group (ListGroups' cluster-wide check)
    admin(30, 3, creations=(acl(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, Operation.DESCRIBE,
                                principal="User:alice"),))
    assert {GROUP, OTHER_GROUP} <= {g.group_id for g in alice(16, 4, states_filter=()).groups}
    assert int(alice(29, 3, **everything).error_code) == NONE
    gone = admin(31, 3, filters=(sub(31, 3, "DeleteAclsFilter", **{**everything, "principal_filter": "User:alice"}),))
    assert [a.principal for a in gone.filter_results[0].matching_acls] == ["User:alice"]
    assert {g.group_id for g in alice(16, 4, states_filter=()).groups} == set()


def test_scram_credential_admin(users: tuple[Who, Who, Who]) -> None:
    """DescribeUserScramCredentials needs DESCRIBE on the cluster, AlterUserScramCredentials ALTER."""
    admin, _, bob = users
    denied = bob(50, 0, users=(sub(50, 0, "UserName", name="alice"),))
    assert int(denied.error_code) == CLUSTER_AUTH and [int(r.error_code) for r in denied.results] == [CLUSTER_AUTH]
    upsert = sub(51, 0, "ScramCredentialUpsertion", name="erin", mechanism=2, iterations=4096, salt=b"s" * 24,
                 salted_password=b"p" * 64)
    assert [(r.user, int(r.error_code)) for r in bob(51, 0, deletions=(), upsertions=(upsert,)).results] == \
        [("erin", CLUSTER_AUTH)]
    assert [(r.user, int(r.error_code)) for r in admin(51, 0, deletions=(), upsertions=(upsert,)).results] == \
        [("erin", NONE)]
    seen = admin(50, 0, users=(sub(50, 0, "UserName", name="erin"), sub(50, 0, "UserName", name="nobody"),
                               sub(50, 0, "UserName", name="bob"), sub(50, 0, "UserName", name="bob")))
    by_user = {r.user: r for r in seen.results}
    assert int(by_user["nobody"].error_code) == 91 and int(by_user["bob"].error_code) == 92
    assert [(int(c.mechanism), int(c.iterations)) for c in by_user["erin"].credential_infos] == [(2, 4096)]
    everyone = {r.user for r in admin(50, 0, users=None).results}
    assert everyone == {"erin"}  # the node's SASL mechanisms are PLAIN only: its configured users have no SCRAM keys
