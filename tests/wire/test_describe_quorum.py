"""DescribeQuorum (55): a single node is its own quorum; another topic or partition is
UNKNOWN_TOPIC_OR_PARTITION (a 3-node cluster, with kafka-metadata-quorum, is in
tests/cluster/test_kafka_tools.py)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from cluster.apis.common import req_mod
from cluster.apis.describe_quorum import request_for
from tests.wire.raw import ask as _ask


def test_a_single_node_is_its_own_quorum(bootstrap: str) -> None:
    for version in (0, 1, 2):
        resp = _ask(bootstrap, 55, version, request_for(version))
        assert resp.error_code == ErrorCode.none
        (p,) = resp.topics[0].partitions
        assert (p.error_code, p.leader_id, len(p.current_voters), p.observers) == (ErrorCode.none, 0, 1, ())
        assert p.current_voters[0].replica_id == 0
        if version == 2:
            assert [n.node_id for n in resp.nodes] == [0] and resp.nodes[0].listeners


def test_another_topic_or_partition_is_unknown(bootstrap: str) -> None:
    m = req_mod(55, 2)
    resp = _ask(bootstrap, 55, 2, m.DescribeQuorumRequest(topics=(m.TopicData(
        topic_name="__consumer_offsets", partitions=(m.PartitionData(partition_index=5),
                                                     m.PartitionData(partition_index=1))),)))
    assert resp.error_code == ErrorCode.none  # each partition asked, echoed with the error (Kafka's answer)
    assert [(p.partition_index, p.error_code) for p in resp.topics[0].partitions] == [
        (5, ErrorCode.unknown_topic_or_partition), (1, ErrorCode.unknown_topic_or_partition)]


def test_a_single_node_removes_no_node(bootstrap: str) -> None:
    import uuid

    from kio.schema.remove_raft_voter.v0.request import RemoveRaftVoterRequest
    from kio.static.primitive import i32

    resp = _ask(bootstrap, 81, 0, RemoveRaftVoterRequest(cluster_id=None, voter_id=i32(0),
                                                         voter_directory_id=uuid.uuid4()))
    assert resp.error_code == ErrorCode.voter_not_found and "single node" in resp.error_message
    resp = _ask(bootstrap, 81, 0, RemoveRaftVoterRequest(cluster_id=None, voter_id=i32(0),
                                                         voter_directory_id=uuid.UUID(int=0)))
    assert resp.error_code == ErrorCode.invalid_request  # no directory id, as Kafka answers


def test_a_single_node_promotes_no_node(bootstrap: str) -> None:
    import datetime
    import uuid

    from kio.schema.add_raft_voter.v1.request import AddRaftVoterRequest
    from kio.static.primitive import i32

    def add(node: int, directory: uuid.UUID, cluster_id: str | None = None) -> object:
        return _ask(bootstrap, 80, 1, AddRaftVoterRequest(cluster_id=cluster_id, timeout=datetime.timedelta(seconds=1),
                                                          voter_id=i32(node), voter_directory_id=directory,
                                                          listeners=()))

    assert add(0, uuid.uuid4()).error_code == ErrorCode.duplicate_voter  # type: ignore[attr-defined]
    assert add(1, uuid.uuid4()).error_code == ErrorCode.request_timed_out  # type: ignore[attr-defined]
    assert add(1, uuid.UUID(int=0)).error_code == ErrorCode.invalid_request  # type: ignore[attr-defined]
    assert add(1, uuid.uuid4(), "another").error_code == ErrorCode.inconsistent_cluster_id  # type: ignore[attr-defined]
