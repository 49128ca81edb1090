"""OffsetCommit and OffsetFetch v10 name topics by id (the Java client sends them once it knows
every topic's id): a commit by id is fetched back by id and by name (v9), and an id the cluster
does not know is answered UNKNOWN_TOPIC_ID for each partition, the rest of the request going on."""

from __future__ import annotations

import uuid

from confluent_kafka.admin import AdminClient, NewTopic

from cluster.apis.common import req_mod
from tests.wire.raw import ask as _ask

UNKNOWN_TOPIC_ID = 100




def test_commit_and_fetch_by_topic_id(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("by-id", 2, 1)])["by-id"].result(15)
    md = req_mod(3, 12)
    meta = _ask(bootstrap, 3, 12, md.MetadataRequest(
        topics=(md.MetadataRequestTopic(topic_id=None, name="by-id"),), allow_auto_topic_creation=False,
        include_topic_authorized_operations=False))
    topic_id = meta.topics[0].topic_id
    stranger = uuid.uuid4()

    oc = req_mod(8, 10)
    commit = _ask(bootstrap, 8, 10, oc.OffsetCommitRequest(
        group_id="g-by-id", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=tuple(oc.OffsetCommitRequestTopic(topic_id=t, partitions=(oc.OffsetCommitRequestPartition(
            partition_index=1, committed_offset=42, committed_leader_epoch=-1, committed_metadata="m"),))
            for t in (topic_id, stranger))))
    codes = {t.topic_id: [int(p.error_code.value) for p in t.partitions] for t in commit.topics}
    assert codes == {topic_id: [0], stranger: [UNKNOWN_TOPIC_ID]}

    of = req_mod(9, 10)
    fetched = _ask(bootstrap, 9, 10, of.OffsetFetchRequest(groups=(of.OffsetFetchRequestGroup(
        group_id="g-by-id", member_id=None, member_epoch=-1, topics=tuple(
            of.OffsetFetchRequestTopics(topic_id=t, partition_indexes=(0, 1)) for t in (topic_id, stranger))),),
        require_stable=False))
    got = {t.topic_id: [(p.partition_index, p.committed_offset, int(p.error_code.value)) for p in t.partitions]
           for t in fetched.groups[0].topics}
    assert got == {topic_id: [(0, -1, 0), (1, 42, 0)], stranger: [(0, -1, UNKNOWN_TOPIC_ID), (1, -1, UNKNOWN_TOPIC_ID)]}

    everything = _ask(bootstrap, 9, 10, of.OffsetFetchRequest(groups=(of.OffsetFetchRequestGroup(
        group_id="g-by-id", member_id=None, member_epoch=-1, topics=None),), require_stable=False))
    assert [(t.topic_id, [(p.partition_index, p.committed_offset) for p in t.partitions])
            for t in everything.groups[0].topics] == [(topic_id, [(1, 42)])]

    o9 = req_mod(9, 9)
    by_name = _ask(bootstrap, 9, 9, o9.OffsetFetchRequest(groups=(o9.OffsetFetchRequestGroup(
        group_id="g-by-id", member_id=None, member_epoch=-1, topics=(
            o9.OffsetFetchRequestTopics(name="by-id", partition_indexes=(1,)),)),), require_stable=False))
    assert by_name.groups[0].topics[0].partitions[0].committed_offset == 42
