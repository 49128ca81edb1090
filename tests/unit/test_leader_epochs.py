"""A data partition's leader epochs (replication/leader_epochs.py, DataLog.leader_epoch_end): the
answers of Kafka's ``LeaderEpochFileCacheTest`` for endOffsetFor (after its names), and the
cache kept across a restart, a lost producer snapshot, retention and compaction."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from replication.data_log import Compaction, DataLog
from replication.leader_epochs import UNDEFINED, LeaderEpochs, term_of
from replication.raft.settings import EPOCH_STRIDE
from replication.record_batch import assign_offsets, build_batch


def cache(*entries: tuple[int, int]) -> LeaderEpochs:
    c = LeaderEpochs()
    for epoch, start in entries:
        c.observe(epoch, start)
    return c


def test_should_return_log_end_offset_if_latest_epoch_requested() -> None:
    assert cache((2, 6), (3, 8), (4, 9)).end_offset_for(4, 4, 11) == (4, 11)


def test_should_return_undefined_offset_if_undefined_epoch_requested() -> None:
    assert cache((2, 6)).end_offset_for(UNDEFINED, 2, 11) == (UNDEFINED, UNDEFINED)


def test_should_return_undefined_offset_if_requested_epoch_is_larger_than_any_known() -> None:
    assert cache((2, 6)).end_offset_for(3, 2, 11) == (UNDEFINED, UNDEFINED)


def test_should_get_first_offset_of_subsequent_epoch_when_offset_requested_for_previous_epoch() -> None:
    c = cache((1, 0), (2, 6), (5, 9))
    assert c.end_offset_for(2, 5, 12) == (2, 9)
    assert c.end_offset_for(3, 5, 12) == (2, 9)  # an epoch with no batches: the one before it, and where it ended
    assert c.end_offset_for(1, 5, 12) == (1, 6)


def test_should_return_requested_epoch_and_next_start_if_requested_epoch_is_below_every_kept() -> None:
    assert cache((5, 9), (7, 12)).end_offset_for(2, 7, 20) == (2, 9)


def test_the_leaders_own_epoch_with_no_batch_yet_begins_at_the_log_end() -> None:
    c = cache((2, 0), (3, 8))
    assert c.end_offset_for(3, 6, 11) == (3, 11)  # epoch 3 ended where the leader of epoch 6 began
    assert c.end_offset_for(6, 6, 11) == (6, 11)
    assert c.end_offset_for(7, 6, 11) == (UNDEFINED, UNDEFINED)


def test_epochs_only_grow_and_a_fence_epoch_of_earlier_releases_reads_as_its_term() -> None:
    c = cache((3 * EPOCH_STRIDE + 2, 0), (3, 4), (-1, 5), (2, 6), (4, 7))
    assert c.to_obj() == [[3, 0], [4, 7]]
    assert term_of(-1) == -1 and term_of(7) == 7 and term_of(9 * EPOCH_STRIDE) == 9


def test_truncate_from_start_keeps_the_epoch_holding_the_new_start() -> None:
    c = cache((1, 0), (2, 6), (5, 9))
    c.trim_before(7)
    assert c.to_obj() == [[2, 7], [5, 9]]
    c.trim_before(9)
    assert c.to_obj() == [[5, 9]]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 8), min_size=1, max_size=30), st.integers(0, 9))
def test_an_end_offset_is_never_below_an_offset_read_in_that_epoch(stamps: list[int], asked: int) -> None:
    """What a consumer validating its position relies on: the end offset for the epoch of a
    batch it read is past that batch (a wrong answer makes it reset)."""
    c = LeaderEpochs()
    epochs = sorted(stamps)  # Raft terms along a log
    for offset, e in enumerate(epochs):
        c.observe(e, offset)
    current = epochs[-1] + (asked % 2)
    for offset, e in enumerate(epochs):
        epoch, end = c.end_offset_for(e, current, len(epochs))
        assert epoch == e and end > offset


def _log(path: Path, **kw: object) -> DataLog:
    return DataLog(str(path), segment_bytes=300, **kw)  # type: ignore[arg-type]


def _put(log: DataLog, epoch: int, n: int = 1) -> None:
    for _ in range(n):
        log.append(assign_offsets(build_batch([(b"k%d" % (log.log_end_offset % 3), b"v" * 40)]), log.log_end_offset,
                                  epoch))


def test_a_data_log_keeps_its_epochs_across_restarts_and_a_lost_snapshot(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _put(log, 3 * EPOCH_STRIDE, 4)  # written by an earlier release: the fence epoch
    _put(log, 5, 4)
    _put(log, 9, 4)
    expect = [[3, 0], [5, 4], [9, 8]]
    assert log.epochs.to_obj() == expect and log.leader_epoch_end(5, 9) == (5, 8)
    log.close()
    again = _log(tmp_path)
    assert again.epochs.to_obj() == expect
    again.close()
    os.remove(tmp_path / "producer.snapshot")
    assert _log(tmp_path).epochs.to_obj() == expect  # read from the batches


def test_retention_trims_the_epochs_and_compaction_keeps_them(tmp_path: Path) -> None:
    log = _log(tmp_path, cleanup_policy="compact", compaction=Compaction(min_dirty_ratio=0.0))
    _put(log, 2, 6)
    _put(log, 4, 6)
    _put(log, 6, 6)
    log.compact(capacity=100)
    assert log.epochs.to_obj() == [[2, 0], [4, 6], [6, 12]]
    assert log.leader_epoch_end(4, 6) == (4, 12)
    log.delete_records(8)
    assert log.epochs.to_obj() == [[4, 8], [6, 12]]
    assert log.leader_epoch_end(2, 6) == (2, 8)


def test_batches_an_earlier_release_stamped_with_fence_epochs_are_restamped_with_terms_once(tmp_path: Path) -> None:
    from replication.data_log import TERMS_FILE
    from replication.record_batch import iter_batches

    log = _log(tmp_path)
    _put(log, 3 * EPOCH_STRIDE + 1, 5)
    _put(log, 4 * EPOCH_STRIDE, 5)
    log.close()
    os.remove(tmp_path / TERMS_FILE)  # as an earlier release left its directory
    again = _log(tmp_path)
    stamps = [hdr.partition_leader_epoch for _, hdr in iter_batches(again.read(0, 1 << 20))]
    assert stamps == [3] * 5 + [4] * 5
    assert (tmp_path / TERMS_FILE).exists() and again.epochs.to_obj() == [[3, 0], [4, 5]]
    from replication.record_batch import crc32c  # the CRC does not cover the field: every batch still checks

    data = again.read(0, 1 << 20)
    for pos, hdr in iter_batches(data):
        assert crc32c(data[pos + 21:pos + hdr.size]) == hdr.crc


def test_a_journal_entry_of_an_earlier_releases_leader_is_stored_with_its_term_and_replays(tmp_path: Path) -> None:
    from replication.data_state_machine import DataStateMachine

    sm = DataStateMachine(_log(tmp_path), lambda: None)
    entry = assign_offsets(build_batch([(b"k", b"v")]), 0, 7 * EPOCH_STRIDE + 2)
    assert sm.apply(1, entry) == 0
    assert sm.data.epochs.to_obj() == [[7, 0]]
    from replication.record_batch import parse_header

    assert parse_header(sm.data.read(0, 1000)).partition_leader_epoch == 7
    assert sm.apply(1, entry) == 0  # replayed over the log that holds it: the same batch


def test_a_log_installed_from_a_leader_of_an_earlier_release_is_restamped(tmp_path: Path) -> None:
    from replication.record_batch import iter_batches
    from tests.replication.snapshot_stream import install_log

    leader = _log(tmp_path / "leader")
    _put(leader, 5 * EPOCH_STRIDE, 6)  # as an earlier release stored them
    target = _log(tmp_path / "follower")
    install_log(leader, target)
    assert [h.partition_leader_epoch for _, h in iter_batches(target.read(0, 1 << 20))] == [5] * 6


def test_a_snapshot_of_batches_an_earlier_release_wrote_is_restamped(tmp_path: Path) -> None:
    from replication.record_batch import iter_batches

    batches = b"".join(assign_offsets(build_batch([(b"k", b"v")]), i, 6 * EPOCH_STRIDE + 1) for i in range(3))
    log = _log(tmp_path)
    log.reset_to(0, batches, {}, None)
    assert [h.partition_leader_epoch for _, h in iter_batches(log.read(0, 1 << 20))] == [6] * 3
