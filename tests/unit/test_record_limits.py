"""What one client can make the coordinator write is bounded as in Kafka, where one write to
__consumer_offsets may carry at most message.max.bytes: an oversized group record fails the
SyncGroup with UNKNOWN_SERVER_ERROR and rebalances the group, an oversized commit gets
INVALID_COMMIT_OFFSET_SIZE, and nothing is written (an oversized entry used to fail the whole
partition's append and reload its shard: every group of that partition went down)."""

from __future__ import annotations

from coordinator.codec import EntryTooLarge, decode_batch, encode_batch, encode_batches
from coordinator.errors import ErrorCode
from coordinator.group import GroupState
from coordinator.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue, Record

from .harness import Harness
from .offset_helpers import config, join_completing

E = ErrorCode


def test_an_oversized_commit_is_refused_and_writes_nothing() -> None:
    h = Harness(config(max_record_batch_bytes=1_048_588))
    before = len(h.log)
    # the example: 2,100 partitions with 4 KB of metadata each (8.6 MB)
    result = h.commit("g", {("t", p): 5 for p in range(2100)}, metadata="m" * 4000)
    assert set(result.values()) == {E.INVALID_COMMIT_OFFSET_SIZE}
    assert len(h.log) == before
    ok = h.commit("g", {("t", p): 5 for p in range(100)}, metadata="m" * 4000)  # 400 KB: fine
    assert set(ok.values()) == {E.NONE}
    assert h.fetch("g", {"t": [0]}) == {("t", 0): 5}


def test_an_oversized_group_record_fails_the_sync_and_rebalances_without_a_reload() -> None:
    h = Harness(config(max_record_batch_bytes=200_000))
    leader, followers, gen = join_completing(h, "g", n=3)
    effects_before = len(h.log)
    huge = {m: b"a" * 90_000 for m in [leader, *followers]}  # 270 KB of assignments
    follower_syncs = [h.sync("g", m, gen) for m in followers]
    leader_sync = h.sync("g", leader, gen, assignments=huge)
    for s in (*follower_syncs, leader_sync):
        assert s.done and s.response.error == E.UNKNOWN_SERVER_ERROR
    assert len(h.log) == effects_before  # nothing written
    assert h.group("g").state is GroupState.PREPARING_REBALANCE
    assert h.reloads == []
    # the group still works: members rejoin and a sensible assignment goes through
    small = join_completing(h, "g2", n=2)
    assert small[2] >= 1


def test_entries_are_split_at_the_limit_and_decode_back_in_order() -> None:
    records = [Record(OffsetCommitKey("g", "t", p), OffsetCommitValue(p, -1, "x" * 1000, 1, -1)) for p in range(50)]
    assert encode_batches(records, 1 << 20) == [(encode_batch(records), 50)]  # the usual case: one entry
    parts = encode_batches(records, 10_000)
    assert all(len(payload) <= 10_000 for payload, _ in parts) and len(parts) > 1
    assert sum(n for _, n in parts) == 50
    assert [r for payload, _ in parts for r in decode_batch(payload)] == records
    try:
        encode_batches([Record(GroupMetadataKey("g"), records[0].value)] + records, 500)
    except EntryTooLarge:
        pass
    else:
        raise AssertionError("a record larger than an entry must raise")
