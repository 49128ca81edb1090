"""KIP-890 part 1 on a real 3-node cluster: a partition leader lets a transactional batch open a
transaction on its partition only if the transaction coordinator says the partition is in the
producer's open transaction (asked directly on the coordinator's node, over AddPartitionsToTxn v4
VerifyOnly from the others; a 3-partition topic puts leaders on both sides). A late batch of a
finished transaction is refused (INVALID_TXN_STATE) instead of opening a transaction no marker
would ever close, so the last stable offset does not hang."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from replication.record_batch import ATTR_TRANSACTIONAL, build_batch
from tests.cluster.cluster_harness import Cluster, running_cluster
from tests.cluster.test_data_plane import create_topic
from tests.cluster.test_transactions import _ask, _describe, _init, _until_ok

pytestmark = pytest.mark.cluster
TOPIC, PARTS, TID = "late", 3, "verified-txn"


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    yield from running_cluster(tmp_path, request, {"group.initial.rebalance.delay.ms": 0})


def _leader(cluster: Cluster, p: int) -> int:
    md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(TOPIC, timeout=10)
    return int(md.topics[TOPIC].partitions[p].leader)


def _produce(cluster: Cluster, p: int, pid: int, epoch: int, seq: int, version: int = 9) -> int:
    """One transactional batch to partition ``p``'s leader; its error code (``version`` 12:
    transaction version 2, the leader adds the partition to the transaction)."""
    from cluster.apis.common import req_mod

    m = req_mod(0, version)
    ProduceRequest, TopicProduceData, PartitionProduceData = m.ProduceRequest, m.TopicProduceData, m.PartitionProduceData
    batch = build_batch([(None, b"v%d" % seq)], timestamp=1, producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, attributes=ATTR_TRANSACTIONAL)
    deadline = time.monotonic() + 20
    while True:
        r = _ask(cluster.address(_leader(cluster, p)), 0, version, ProduceRequest(
            transactional_id=TID, acks=-1, timeout=datetime.timedelta(seconds=5), topic_data=(TopicProduceData(
                name=TOPIC, partition_data=(PartitionProduceData(index=p, records=batch),)),)))
        code = int(r.responses[0].partition_responses[0].error_code)
        if code not in (6, 19) or time.monotonic() > deadline:  # not the leader / coordinator busy: again
            return code
        time.sleep(0.2)


def _add(cluster: Cluster, pid: int, epoch: int, *parts: int) -> None:
    from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic

    r = _until_ok(cluster, TID, 24, 3, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=TID, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(AddPartitionsToTxnTopic(name=TOPIC, partitions=parts),)),
        lambda r: all(x.partition_error_code == 0 for t in r.results_by_topic_v3_and_below
                      for x in t.results_by_partition))
    assert all(x.partition_error_code == 0 for t in r.results_by_topic_v3_and_below for x in t.results_by_partition)


def _end(cluster: Cluster, pid: int, epoch: int, commit: bool) -> None:
    from kio.schema.end_txn.v3.request import EndTxnRequest

    r = _until_ok(cluster, TID, 26, 3, EndTxnRequest(transactional_id=TID, producer_id=pid, producer_epoch=epoch,
                                                     committed=commit), lambda r: r.error_code == 0)
    assert r.error_code == 0
    want = "CompleteCommit" if commit else "CompleteAbort"
    deadline = time.monotonic() + 15
    while _describe(cluster, TID).transaction_state != want:
        assert time.monotonic() < deadline
        time.sleep(0.1)


def _stable_and_end(cluster: Cluster) -> list[tuple[int, int]]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    out: list[tuple[int, int]] = []
    for p in range(PARTS):
        tp = TopicPartition(TOPIC, p)
        lso = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED)[tp]
        hw = admin.list_offsets({tp: OffsetSpec.latest()})[tp]
        out.append((int(lso.result(timeout=15).offset), int(hw.result(timeout=15).offset)))
    return out


def test_a_late_batch_of_a_finished_transaction_is_refused_and_nothing_hangs(cluster: Cluster) -> None:
    create_topic(cluster.bootstrap, TOPIC, PARTS)
    pid, epoch = _init(cluster, TID)
    _add(cluster, pid, epoch, *range(PARTS))
    assert [_produce(cluster, p, pid, epoch, 0) for p in range(PARTS)] == [0] * PARTS
    _end(cluster, pid, epoch, commit=True)
    # the same producer's next batch arrives after the commit, with no AddPartitionsToTxn before it
    assert [_produce(cluster, p, pid, epoch, 1) for p in range(PARTS)] == [48] * PARTS
    deadline = time.monotonic() + 10
    ends = _stable_and_end(cluster)
    while any(lso != hw for lso, hw in ends):
        assert time.monotonic() < deadline, ends  # a hanging transaction would hold the LSO back
        time.sleep(0.2)
        ends = _stable_and_end(cluster)
    assert all(hw == 2 for _, hw in ends), ends  # the batch and its marker; the late batch is not there


def test_a_batch_for_a_partition_not_in_the_transaction_is_refused_until_it_is_added(cluster: Cluster) -> None:
    create_topic(cluster.bootstrap, TOPIC, PARTS)
    pid, epoch = _init(cluster, TID)
    _add(cluster, pid, epoch, 0)
    assert _produce(cluster, 0, pid, epoch, 0) == 0
    refused: dict[int, Any] = {p: _produce(cluster, p, pid, epoch, 0) for p in range(1, PARTS)}
    assert refused == {p: 48 for p in range(1, PARTS)}
    _add(cluster, pid, epoch, *range(1, PARTS))
    assert [_produce(cluster, p, pid, epoch, 0) for p in range(1, PARTS)] == [0] * (PARTS - 1)
    assert _produce(cluster, 0, pid, epoch, 1) == 0  # the open transaction's next batch needs no check
    _end(cluster, pid, epoch, commit=False)
    # a fenced epoch is told so at verification
    pid2, epoch2 = _init(cluster, TID)
    assert (pid2, epoch2) == (pid, epoch + 1)
    assert _produce(cluster, 1, pid, epoch, 1) == 47


def _end2(cluster: Cluster, pid: int, epoch: int, commit: bool) -> tuple[int, int, int]:
    """EndTxn v5 (transaction version 2): (error, the producer's next id, its next epoch)."""
    from kio.schema.end_txn.v5.request import EndTxnRequest

    r = _until_ok(cluster, TID, 26, 5, EndTxnRequest(transactional_id=TID, producer_id=pid, producer_epoch=epoch,
                                                     committed=commit), lambda r: r.error_code in (0, 47, 48, 90))
    return int(r.error_code), int(r.producer_id), int(r.producer_epoch)


def test_transaction_version_2_leaders_add_partitions_and_a_finished_transactions_batch_is_a_zombies(
        cluster: Cluster) -> None:
    """Produce v12 with no AddPartitionsToTxn: each leader (on the coordinator's node or not) adds
    its partition; EndTxn v5 bumps the epoch and names it; a late batch of the finished
    transaction is refused as a fenced producer's on every partition, not opened as a new
    transaction; the next transaction, at the new epoch, runs; nothing hangs the LSO."""
    create_topic(cluster.bootstrap, TOPIC, PARTS)
    pid, epoch = _init(cluster, TID)
    assert [_produce(cluster, p, pid, epoch, 0, version=12) for p in range(PARTS - 1)] == [0] * (PARTS - 1)
    added = {(t.topic, p) for t in _describe(cluster, TID).topics for p in t.partitions}
    assert added == {(TOPIC, p) for p in range(PARTS - 1)}
    assert _end2(cluster, pid, epoch, commit=True) == (0, pid, epoch + 1)
    deadline = time.monotonic() + 15
    while _describe(cluster, TID).transaction_state != "CompleteCommit":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    # the finished transaction's late batches: fenced where its marker is, and where it is not
    assert [_produce(cluster, p, pid, epoch, 1, version=12) for p in range(PARTS)] == [47] * PARTS
    assert _end2(cluster, pid, epoch, commit=True) == (0, pid, epoch + 1)  # a retry of the end
    # the next transaction, at the epoch the end named, on a partition of the last one and a new one
    assert _produce(cluster, 0, pid, epoch + 1, 0, version=12) == 0
    assert _produce(cluster, PARTS - 1, pid, epoch + 1, 0, version=12) == 0
    assert _end2(cluster, pid, epoch + 1, commit=False) == (0, pid, epoch + 2)
    deadline = time.monotonic() + 10
    ends = _stable_and_end(cluster)
    while any(lso != hw for lso, hw in ends):
        assert time.monotonic() < deadline, ends
        time.sleep(0.2)
        ends = _stable_and_end(cluster)


def _group_coordinator(cluster: Cluster, group: str) -> str:
    from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest

    deadline = time.monotonic() + 20
    while True:
        r = _ask(cluster.bootstrap.split(",")[0], 10, 3, FindCoordinatorRequest(key=group, key_type=0))
        if r.error_code == 0 or time.monotonic() > deadline:
            return cluster.address(int(r.node_id))
        time.sleep(0.2)


def _txn_commit(cluster: Cluster, group: str, pid: int, epoch: int, offset: int) -> int:
    from kio.schema.txn_offset_commit.v3.request import (
        TxnOffsetCommitRequest,
        TxnOffsetCommitRequestPartition,
        TxnOffsetCommitRequestTopic,
    )

    r = _ask(_group_coordinator(cluster, group), 28, 3, TxnOffsetCommitRequest(
        transactional_id=TID, group_id=group, producer_id=pid, producer_epoch=epoch, member_id="",
        group_instance_id=None, topics=(TxnOffsetCommitRequestTopic(name=TOPIC, partitions=(
            TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset, committed_metadata=None),)),)))
    return int(r.topics[0].partitions[0].error_code)


def _add_offsets(cluster: Cluster, group: str, pid: int, epoch: int) -> None:
    from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest

    r = _until_ok(cluster, TID, 25, 3, AddOffsetsToTxnRequest(transactional_id=TID, producer_id=pid,
                                                              producer_epoch=epoch, group_id=group),
                  lambda r: r.error_code == 0)
    assert r.error_code == 0


def _fetch_stable(cluster: Cluster, group: str) -> tuple[int, int]:
    """OffsetFetch v7 with require_stable: (partition error, committed offset)."""
    from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic

    r = _ask(_group_coordinator(cluster, group), 9, 7, OffsetFetchRequest(
        group_id=group, topics=(OffsetFetchRequestTopic(name=TOPIC, partition_indexes=(0,)),), require_stable=True))
    part = r.topics[0].partitions[0]
    return int(part.error_code), int(part.committed_offset)


def test_txn_offset_commit_is_verified_against_the_transaction(cluster: Cluster) -> None:
    create_topic(cluster.bootstrap, TOPIC, PARTS)
    group = "verified-group"
    pid, epoch = _init(cluster, TID)
    _add(cluster, pid, epoch, 0)
    assert _txn_commit(cluster, group, pid, epoch, 5) == 48  # the group's partition is not in the transaction
    _add_offsets(cluster, group, pid, epoch)
    assert _txn_commit(cluster, group, pid, epoch, 5) == 0
    _end(cluster, pid, epoch, commit=True)
    assert _fetch_stable(cluster, group) == (0, 5)
    # a late commit of the finished transaction: refused, so nothing is left pending (which would
    # answer require_stable fetches UNSTABLE_OFFSET_COMMIT forever)
    assert _txn_commit(cluster, group, pid, epoch, 9) == 48
    assert _fetch_stable(cluster, group) == (0, 5)


def _describe_producers(cluster: Cluster, p: int) -> list[tuple[int, int, int]]:
    """(producer id, epoch, open transaction's first offset) at partition ``p``'s leader."""
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest

    r = _ask(cluster.address(_leader(cluster, p)), 61, 0, DescribeProducersRequest(
        topics=(TopicRequest(name=TOPIC, partition_indexes=(p,)),)))
    part = r.topics[0].partitions[0]
    assert part.error_code == 0
    return [(int(x.producer_id), int(x.producer_epoch), int(x.current_txn_start_offset)) for x in part.active_producers]


def _offset_for_time(cluster: Cluster, p: int, committed: bool) -> int:
    from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

    r = _ask(cluster.address(_leader(cluster, p)), 2, 7, ListOffsetsRequest(
        replica_id=-1, isolation_level=1 if committed else 0, topics=(ListOffsetsTopic(name=TOPIC, partitions=(
            ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=0),)),)))
    return int(r.topics[0].partitions[0].offset)


def test_describe_producers_and_timestamp_lookups_see_the_open_transaction(cluster: Cluster) -> None:
    create_topic(cluster.bootstrap, TOPIC, PARTS)
    pid, epoch = _init(cluster, TID)
    _add(cluster, pid, epoch, 0)
    assert _produce(cluster, 0, pid, epoch, 0) == 0
    assert _describe_producers(cluster, 0) == [(pid, epoch, 0)]  # kafka-transactions.sh find-hanging reads this
    assert _offset_for_time(cluster, 0, committed=False) == 0
    assert _offset_for_time(cluster, 0, committed=True) == -1  # beyond the last stable offset
    _end(cluster, pid, epoch, commit=True)
    deadline = time.monotonic() + 10
    while _describe_producers(cluster, 0) != [(pid, epoch, -1)]:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert _offset_for_time(cluster, 0, committed=True) == 0
