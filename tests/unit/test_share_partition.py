"""The share partition on a leader (Kafka's SharePartitionTest, by the behaviours its cases name):
acquisition under a lock, acknowledgement types, lock expiry and redelivery, the delivery limit,
the in-flight limit, the start offset moving over what is done, gaps archived, rollback of a
change whose write failed, and what is persisted."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.errors import ErrorCode as E
from coordinator.share_group.partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    Acquired,
    SharePartition,
)
from coordinator.share_group.records import StateBatch


def sp(**kw: int) -> SharePartition:
    return SharePartition(0, 0, **kw)


def test_acquire_then_accept_moves_the_start_offset() -> None:
    p = sp()
    assert p.acquire("a", range(10), 9, 500, now_ms=0) == [Acquired(0, 9, 1)]
    assert p.acquire("b", range(10), 9, 500, now_ms=0) == []  # all locked by a
    err, changed = p.acknowledge("a", 0, 4, [ACCEPT], now_ms=1)
    assert err == E.NONE and changed == [0, 1, 2, 3, 4] and p.start == 5
    assert p.acknowledge("b", 5, 5, [ACCEPT], 1)[0] == E.INVALID_RECORD_STATE  # not b's
    assert p.acknowledge("a", 0, 0, [ACCEPT], 1)[0] == E.INVALID_RECORD_STATE  # done already
    assert p.acknowledge("a", 5, 6, [ACCEPT, 9], 1)[0] == E.INVALID_REQUEST


def test_release_and_reject_and_per_offset_types() -> None:
    """testAcknowledgeMultipleRecordBatch-style: one type per offset."""
    p = sp()
    p.acquire("a", range(5), 4, 500, 0)
    err, _ = p.acknowledge("a", 0, 4, [ACCEPT, RELEASE, REJECT, GAP, ACCEPT], 1)
    assert err == E.NONE
    assert p.start == 1 and p.records[1].state == AVAILABLE and p.records[2].state == ARCHIVED
    assert p.fetch_from() == 1
    assert p.acquire("b", range(1, 5), 4, 500, 2) == [Acquired(1, 1, 2)]  # redelivered, count 2


def test_acquisition_lock_timeout_releases_and_counts_deliveries() -> None:
    """testAcquisitionLockTimeoutCauseSPSOMoveForward and the delivery limit
    (testMaxDeliveryCountLimitExceededForRecordsSubset): a record let go at the limit is archived."""
    p = sp(lock_ms=100, delivery_limit=2)
    p.acquire("a", range(3), 2, 500, 0)
    assert p.next_deadline() == 100 and p.expired(99) == []
    released = p.release(p.expired(100))
    assert released == [0, 1, 2] and all(p.records[o].state == AVAILABLE for o in released)
    assert p.acquire("b", range(3), 2, 500, 200) == [Acquired(0, 2, 2)]
    p.release(p.expired(300))
    assert p.start == 3 and p.records == {}  # all archived at their second delivery


def test_renew_extends_the_lock() -> None:
    p = sp(lock_ms=100)
    p.acquire("a", [0], 0, 500, 0)
    assert p.acknowledge("a", 0, 0, [RENEW], 80)[0] == E.NONE
    assert p.expired(150) == [] and p.next_deadline() == 180


def test_in_flight_limit_and_max_records() -> None:
    """testAcquireWithMaxInFlightRecordsAndTryAcquireNewBatch."""
    p = sp(max_record_locks=4)
    assert p.acquire("a", range(10), 9, 500, 0) == [Acquired(0, 3, 1)]
    assert p.room() == 0 and p.acquire("b", range(4, 10), 9, 500, 0) == []
    p.acknowledge("a", 0, 1, [ACCEPT], 1)
    assert p.acquire("b", range(4, 10), 9, 1, 1) == [Acquired(4, 4, 1)]  # max records 1


def test_gaps_in_the_log_are_archived() -> None:
    """Offsets with no record (compacted away, transaction markers) can never be delivered."""
    p = sp()
    assert p.acquire("a", [0, 1, 4], 6, 500, 0) == [Acquired(0, 1, 1), Acquired(4, 4, 1)]
    assert p.records[2].state == ARCHIVED and p.records[3].state == ARCHIVED and p.end == 7
    p.acknowledge("a", 0, 1, [ACCEPT], 1)
    assert p.start == 4
    p.acknowledge("a", 4, 4, [ACCEPT], 1)
    assert p.start == 7 and p.records == {}


def test_a_failed_write_is_rolled_back() -> None:
    """testAcknowledgeRollbackWithSubsetError: the change is undone entirely."""
    p = sp()
    p.acquire("a", range(4), 3, 500, 0)
    before = {o: (r.state, r.member) for o, r in p.records.items()}
    undo = p.snapshot()
    p.acknowledge("a", 0, 3, [ACCEPT], 1)
    assert p.start == 4
    p.rollback(undo)
    assert p.start == 0 and {o: (r.state, r.member) for o, r in p.records.items()} == before


def test_persisted_batches_and_reload() -> None:
    p = sp()
    p.acquire("a", range(6), 5, 500, 0)
    _, changed = p.acknowledge("a", 2, 5, [ACCEPT, ACCEPT, RELEASE, REJECT], 1)
    assert p.state_batches(changed) == (StateBatch(2, 3, ACKNOWLEDGED, 1), StateBatch(4, 4, AVAILABLE, 1),
                                        StateBatch(5, 5, ARCHIVED, 1))
    # a new leader knows only what was written: what the last one had acquired is available
    only_acks = SharePartition.loaded(0, p.state_batches(changed))
    assert only_acks.fetch_from() == 0 and only_acks.acquire("c", range(6), 5, 500, 0) == [
        Acquired(0, 1, 1), Acquired(4, 4, 2)]
    again = SharePartition.loaded(0, p.state_batches(range(6)))
    # 0 and 1 were acquired, not acknowledged: after a reload they are available (count kept)
    assert again.start == 0 and again.fetch_from() == 0 and again.records[0].delivery_count == 1
    assert again.acquire("b", range(6), 5, 500, 0) == [Acquired(0, 1, 2), Acquired(4, 4, 2)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 4), st.integers(0, 3), st.integers(0, 3)),
                max_size=40))
def test_every_offset_is_acquired_by_at_most_one_member_and_the_start_only_moves_over_done_ones(
        steps: list[tuple[str, int, int, int]]) -> None:
    """Random fetches, acknowledgements and expiries: an offset is never held by two members,
    nothing below the start is in flight, the window never exceeds its limit, and an offset
    acknowledged or archived is never delivered again."""
    p = sp(lock_ms=10, delivery_limit=3, max_record_locks=8)
    done: set[int] = set()
    now = 0
    for member, op, a, b in steps:
        now += 3
        if op in (0, 1):
            got = p.acquire(member, range(p.fetch_from(), p.fetch_from() + 6), p.fetch_from() + 5, 4, now)
            for g in got:
                assert not set(range(g.first_offset, g.last_offset + 1)) & done
        elif op in (2, 3):
            held = p.acquired_by(member)
            if held:
                o = held[min(a, len(held) - 1)]
                kind = (ACCEPT, RELEASE, REJECT, GAP)[b]
                err, changed = p.acknowledge(member, o, o, [kind], now)
                assert err == E.NONE
                if kind in (ACCEPT, REJECT, GAP) or (o not in p.records or p.records[o].state == ARCHIVED):
                    done.add(o)
        else:
            p.release(p.expired(now))
        assert all(o >= p.start for o in p.records)
        assert p.end - p.start <= 8
        holders = [o for o, r in p.records.items() if r.state == 1]
        assert len(holders) == len(set(holders))


def test_a_rollback_brings_back_what_the_start_moved_over() -> None:
    """From the review: 5-9 acknowledged, then 0-4 acknowledged and the start moves to 10 (5-9
    forgotten); the write fails: 5-9 must come back with 0-4, or the start would stop at 5."""
    p = sp()
    p.acquire("a", range(10), 9, 500, 0)
    p.acknowledge("a", 5, 9, [ACCEPT], 1)
    undo = p.snapshot()
    p.acknowledge("a", 0, 4, [ACCEPT], 1)
    assert p.start == 10
    p.rollback(undo)
    assert p.start == 0 and all(p.records[o].state == ACKNOWLEDGED for o in range(5, 10))
    p.acknowledge("a", 0, 4, [ACCEPT], 2)
    assert p.start == 10


def test_an_offset_a_new_leader_knows_as_unwritten_but_the_log_has_no_record_for_is_archived() -> None:
    """From the review: a transaction marker at 10 was archived by the last leader, but only 11-20
    were written; the new leader has 10 available, and the fetched data (11-20, covering 10-20)
    must archive it, or the start stops at 10 for good."""
    p = SharePartition.loaded(10, [StateBatch(11, 20, ACKNOWLEDGED, 1)])
    assert p.start == 10 and p.records[10].state == AVAILABLE
    assert p.acquire("a", [], 20, 500, 0, first=10) == []
    assert p.start == 21 and p.records == {}


def test_records_below_the_log_start_are_archived_and_the_start_moves_on() -> None:
    """From the review: a group idle longer than retention (its start far below the log start),
    and released records the log deleted meanwhile."""
    p = sp(max_record_locks=4)
    assert p.below_log_start(1_000_000) and p.start == 1_000_000 and p.end == 1_000_000
    assert p.acquire("a", [1_000_000], 1_000_000, 500, 0) == [Acquired(1_000_000, 1_000_000, 1)]
    q = sp()
    q.acquire("a", range(6), 5, 500, 0)
    q.release([0, 1, 2])
    q.acknowledge("a", 4, 4, [ACCEPT], 1)
    assert q.below_log_start(5) and q.start == 3  # 3 is still acquired by a
    q.acknowledge("a", 3, 3, [ACCEPT], 1)
    assert q.start == 5
