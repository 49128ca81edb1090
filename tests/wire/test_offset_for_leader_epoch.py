"""OffsetForLeaderEpoch (23) v2-4 on a node: advertised, the leader epoch Metadata tells and the
batches carry, its end offset (the log end for the current epoch), and Kafka's errors: an
undefined epoch, a current leader epoch newer or older than the leader's, an unknown partition."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.apis.common import req_mod
from tests.wire.raw import ask

NONE, UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 0, 3, 74, 75


def _ask_epochs(bootstrap: str, version: int, topic: str, *asks: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """(partition, current leader epoch, leader epoch) asked: (error, epoch, end offset) each."""
    m = req_mod(23, version)
    replica = {"replica_id": -1} if version >= 3 else {}  # a consumer's
    request = m.OffsetForLeaderEpochRequest(**replica, topics=(m.OffsetForLeaderTopic(topic=topic, partitions=tuple(
        m.OffsetForLeaderPartition(partition=p, current_leader_epoch=c, leader_epoch=e) for p, c, e in asks)),))
    answer = ask(bootstrap, 23, version, request)
    return [(int(p.error_code.value), int(p.leader_epoch), int(p.end_offset)) for p in answer.topics[0].partitions]


def _epoch_of(bootstrap: str, topic: str) -> int:
    """The leader epoch Metadata tells for the topic's partition 0."""
    md = req_mod(3, 12)
    meta = ask(bootstrap, 3, 12, md.MetadataRequest(topics=(md.MetadataRequestTopic(topic_id=None, name=topic),),
                                                   allow_auto_topic_creation=False,
                                                   include_topic_authorized_operations=False))
    return int(meta.topics[0].partitions[0].leader_epoch)


def test_offset_for_leader_epoch_answers_as_kafka(bootstrap: str) -> None:
    versions = ask(bootstrap, 18, 3, req_mod(18, 3).ApiVersionsRequest(client_software_name="t",
                                                                         client_software_version="1"))
    assert [(k.min_version, k.max_version) for k in versions.api_keys if k.api_key == 23] == [(2, 4)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("epochs", 1, 1)])["epochs"].result(15)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        producer.produce("epochs", value=b"%d" % i)
    assert producer.flush(15) == 0
    epoch = _epoch_of(bootstrap, "epochs")
    assert epoch >= 0
    for version in (2, 3, 4):
        assert _ask_epochs(bootstrap, version, "epochs", (0, epoch, epoch)) == [(NONE, epoch, 5)]
        # an epoch before every batch's: where the first epoch began
        assert _ask_epochs(bootstrap, version, "epochs", (0, -1, epoch - 1)) == [(NONE, epoch - 1, 0)]
    assert _ask_epochs(bootstrap, 4, "epochs", (0, -1, -1)) == [(NONE, -1, -1)]
    assert _ask_epochs(bootstrap, 4, "epochs", (0, epoch + 1, epoch)) == [(UNKNOWN_LEADER_EPOCH, -1, -1)]
    if epoch > 0:
        assert _ask_epochs(bootstrap, 4, "epochs", (0, epoch - 1, epoch)) == [(FENCED_LEADER_EPOCH, -1, -1)]
    assert _ask_epochs(bootstrap, 4, "epochs", (7, -1, epoch)) == [(UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
    assert _ask_epochs(bootstrap, 4, "nowhere", (0, -1, epoch)) == [(UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]


def test_epochs_an_earlier_release_told_read_as_their_terms(bootstrap: str) -> None:
    """Releases before leader epochs stamped batches with the leader's fence epoch (term * 2**20
    + n); consumers committed those and may ask for them: both read as the term."""
    from replication.raft.settings import EPOCH_STRIDE

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("old-epochs", 1, 1)])["old-epochs"].result(15)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("old-epochs", value=b"x")
    assert producer.flush(15) == 0
    epoch = _epoch_of(bootstrap, "old-epochs")
    assert _ask_epochs(bootstrap, 4, "old-epochs", (0, -1, epoch * EPOCH_STRIDE + 3)) == [(NONE, epoch, 1)]
    assert _commit_and_fetch_epoch(bootstrap, epoch * EPOCH_STRIDE + 3) == epoch
    # an epoch past the partition's (a deleted topic's offset, kept for its namesake): none told
    assert _commit_and_fetch_epoch(bootstrap, epoch + 5) == -1


def _commit_and_fetch_epoch(bootstrap: str, committed_epoch: int) -> int:
    oc = req_mod(8, 9)
    ask(bootstrap, 8, 9, oc.OffsetCommitRequest(
        group_id="old-epochs", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(oc.OffsetCommitRequestTopic(name="old-epochs", partitions=(oc.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=1, committed_leader_epoch=committed_epoch,
            committed_metadata=""),)),)))
    of = req_mod(9, 9)
    fetched = ask(bootstrap, 9, 9, of.OffsetFetchRequest(groups=(of.OffsetFetchRequestGroup(
        group_id="old-epochs", member_id=None, member_epoch=-1, topics=(
            of.OffsetFetchRequestTopics(name="old-epochs", partition_indexes=(0,)),)),), require_stable=False))
    return int(fetched.groups[0].topics[0].partitions[0].committed_leader_epoch)
