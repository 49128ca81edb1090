"""Transactional offset commits on the group coordinator (Kafka's OffsetMetadataManagerTest
cases for TxnOffsetCommit, pending offsets and end-transaction markers, restated)."""

from __future__ import annotations

from typing import Any

from cluster.offsets_compaction import compact_offsets
from coordinator import commands as c
from coordinator.codec import decode_batch, encode_batch
from coordinator.errors import ErrorCode
from coordinator.records import Record, TxnMarkerKey, TxnMarkerValue
from coordinator.shard import GroupCoordinatorShard

from .harness import Harness

E = ErrorCode
PID = 4000


def txn_commit(h: Harness, group: str, offsets: dict[tuple[str, int], int], *, pid: int = PID, epoch: int = 0,
               generation: int = -1, member_id: str = "", instance_id: str | None = None) -> dict[tuple[str, int], Any]:
    by_topic: dict[str, list[c.PartitionCommit]] = {}
    for (t, p), o in offsets.items():
        by_topic.setdefault(t, []).append(c.PartitionCommit(p, o))
    resp = h.call(c.TxnOffsetCommitRequest(group, pid, epoch, tuple((t, tuple(ps)) for t, ps in by_topic.items()),
                                           generation, member_id, instance_id))
    return {(t, p): e for t, ps in resp.topics for p, e in ps}


def marker(h: Harness, commit: bool, pid: int = PID, epoch: int = 0, coordinator_epoch: int = 5) -> Any:
    return h.call(c.EndTxnMarkerRequest(pid, epoch, commit, coordinator_epoch)).error


def fetch_stable(h: Harness, group: str, partitions: dict[str, list[int]] | None) -> dict[tuple[str, int], Any]:
    topics = None if partitions is None else tuple((t, tuple(ps)) for t, ps in partitions.items())
    resp = h.call(c.OffsetFetchRequest(group, topics, require_stable=True))
    return {(t, f.partition): (f.offset, f.error) for t, fs in resp.topics for f in fs}


def test_pending_offsets_are_invisible_until_committed_and_unstable_to_require_stable() -> None:
    h = Harness()
    assert txn_commit(h, "g", {("t", 0): 10, ("t", 1): 20}) == {("t", 0): E.NONE, ("t", 1): E.NONE}
    assert h.fetch("g", {"t": [0, 1]}) == {("t", 0): -1, ("t", 1): -1}
    assert fetch_stable(h, "g", {"t": [0, 1]}) == {("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT),
                                                    ("t", 1): (-1, E.UNSTABLE_OFFSET_COMMIT)}
    assert fetch_stable(h, "g", None) == {("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT),
                                          ("t", 1): (-1, E.UNSTABLE_OFFSET_COMMIT)}
    assert marker(h, True) is E.NONE
    assert h.fetch("g", {"t": [0, 1]}) == {("t", 0): 10, ("t", 1): 20}
    assert fetch_stable(h, "g", {"t": [0]}) == {("t", 0): (10, E.NONE)}


def test_an_aborted_transaction_leaves_the_committed_offsets_as_they_were() -> None:
    h = Harness()
    h.commit("g", {("t", 0): 5})
    txn_commit(h, "g", {("t", 0): 10})
    assert marker(h, False) is E.NONE
    assert h.fetch("g", {"t": [0]}) == {("t", 0): 5}
    assert fetch_stable(h, "g", {"t": [0]}) == {("t", 0): (5, E.NONE)}


def test_a_later_plain_commit_wins_over_a_pending_one() -> None:
    h = Harness()
    txn_commit(h, "g", {("t", 0): 10, ("t", 1): 10})
    h.commit("g", {("t", 0): 7})
    marker(h, True)
    assert h.fetch("g", {"t": [0, 1]}) == {("t", 0): 7, ("t", 1): 10}


def test_a_tombstone_clears_the_pending_offset_too() -> None:
    h = Harness()
    txn_commit(h, "g", {("t", 0): 10})
    assert h.call(c.DeleteGroupsRequest(("g",))).results == (("g", E.NONE),)  # tombstones pending-only partitions
    marker(h, True)
    assert h.fetch("g", {"t": [0]}) == {("t", 0): -1}


def test_transactions_of_two_producers_end_separately() -> None:
    h = Harness()
    txn_commit(h, "g", {("t", 0): 1}, pid=1)
    txn_commit(h, "g", {("t", 1): 2}, pid=2)
    marker(h, False, pid=1)
    assert fetch_stable(h, "g", {"t": [0, 1]}) == {("t", 0): (-1, E.NONE), ("t", 1): (-1, E.UNSTABLE_OFFSET_COMMIT)}
    marker(h, True, pid=2)
    assert h.fetch("g", {"t": [0, 1]}) == {("t", 0): -1, ("t", 1): 2}


def test_a_marker_with_nothing_pending_at_a_known_epoch_writes_nothing() -> None:
    h = Harness()
    txn_commit(h, "g", {("t", 0): 1})
    marker(h, True)
    n = len(h.log)
    assert marker(h, True) is E.NONE  # a retry
    assert h.records_since(n) == []


def test_a_zombie_producers_transactional_commit_is_fenced() -> None:
    """The coordinator fenced epoch 0 by aborting at epoch 1: the abort marker reaches this
    partition (with nothing pending here), and the zombie's late commit must not wait, pending, for
    the new producer's next COMMIT."""
    h = Harness()
    n = len(h.log)
    assert marker(h, False, epoch=1) is E.NONE
    assert len(h.records_since(n)) == 1  # the new epoch is written down
    assert txn_commit(h, "g", {("t", 0): 99}, epoch=0) == {("t", 0): E.INVALID_PRODUCER_EPOCH}
    assert txn_commit(h, "g", {("t", 0): 5}, epoch=1) == {("t", 0): E.NONE}
    marker(h, True, epoch=1)
    assert h.fetch("g", {"t": [0]}) == {("t", 0): 5}
    loaded, _ = GroupCoordinatorShard.load(h.log, h.now)
    assert loaded.pending.fenced(PID, 0) and not loaded.pending.fenced(PID, 1)


def test_member_validation_of_a_transactional_commit() -> None:
    h = Harness()
    assert txn_commit(h, "unknown", {("t", 0): 1}, generation=1) == {("t", 0): E.ILLEGAL_GENERATION}
    leader, = h.join_stable("g")
    gen = h.group("g").generation_id
    assert txn_commit(h, "g", {("t", 0): 1}, generation=gen, member_id="nobody") == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert txn_commit(h, "g", {("t", 0): 1}, generation=gen + 1, member_id=leader) == {
        ("t", 0): E.ILLEGAL_GENERATION}
    assert txn_commit(h, "g", {("t", 0): 1}, generation=gen, member_id=leader) == {("t", 0): E.NONE}
    # no member information (TxnOffsetCommit v0-2): accepted whatever the state, never REBALANCE_IN_PROGRESS
    h.join("g")
    assert txn_commit(h, "g", {("t", 1): 1}) == {("t", 1): E.NONE}


def test_expiry_keeps_offsets_with_a_pending_transaction() -> None:
    h = Harness()
    h.commit("g", {("t", 0): 1, ("t", 1): 1})
    txn_commit(h, "g", {("t", 0): 2})
    h.sleep(h.config.offsets_retention_ms + h.config.offsets_retention_check_interval_ms)
    assert h.fetch("g", {"t": [0, 1]}) == {("t", 0): 1, ("t", 1): -1}
    assert "g" in h.shard.groups  # a group with an open transaction is not deleted by expiry


def test_load_and_compaction_rebuild_the_pending_and_committed_offsets() -> None:
    h = Harness()
    h.commit("g", {("t", 0): 1})
    txn_commit(h, "g", {("t", 0): 2, ("t", 1): 2}, pid=1)
    txn_commit(h, "g", {("t", 2): 3}, pid=2)
    marker(h, True, pid=1)
    txn_commit(h, "g", {("t", 3): 4}, pid=3)  # still open
    live = (h.shard.durable_state(), h.shard.pending.items())
    loaded, _ = GroupCoordinatorShard.load(h.log, h.now)
    assert (loaded.durable_state(), loaded.pending.items()) == live
    compacted = [r for payload in compact_offsets([encode_batch(h.log)]) for r in decode_batch(payload)]
    assert not any(isinstance(r.key, TxnMarkerKey) for r in compacted)
    again, _ = GroupCoordinatorShard.load(compacted, h.now)
    assert (again.durable_state(), sorted(again.pending.items(), key=str)) == (live[0], sorted(live[1], key=str))
    assert marker(h, True, pid=3) is E.NONE and h.fetch("g", {"t": [3]}) == {("t", 3): 4}


def test_transactional_records_and_markers_round_trip_through_an_entry() -> None:
    records = [Record(TxnMarkerKey(7), TxnMarkerValue(True, 3))]
    assert decode_batch(encode_batch(records)) == records


def test_a_marker_from_a_deposed_coordinator_is_refused() -> None:
    h = Harness()
    txn_commit(h, "g", {("t", 0): 1})
    marker(h, False, coordinator_epoch=9)
    txn_commit(h, "g", {("t", 0): 2})  # the producer's next transaction
    assert marker(h, True, coordinator_epoch=8) is E.TRANSACTION_COORDINATOR_FENCED  # a late one from before
    assert fetch_stable(h, "g", {"t": [0]}) == {("t", 0): (-1, E.UNSTABLE_OFFSET_COMMIT)}  # still pending
    assert marker(h, True, coordinator_epoch=9) is E.NONE
    assert h.fetch("g", {"t": [0]}) == {("t", 0): 2}
