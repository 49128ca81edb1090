"""DeleteRecords in the data log and its state machine: the log start moves forward, whole
segments below it go, and the new start survives a reopen, the Raft journal's replay, a snapshot
and a snapshot install."""

from __future__ import annotations

import msgpack
import pytest

from replication.data_log import START_FILE, DataLog, OffsetOutOfRangeError
from replication.data_state_machine import DataStateMachine, delete_records_entry
from tests.unit.test_data_log import offsets, put


def _log(tmp_path, name: str = "p") -> DataLog:
    return DataLog(str(tmp_path / name), segment_bytes=1024)


def test_the_log_start_moves_forward_and_whole_segments_below_it_go(tmp_path) -> None:
    log = _log(tmp_path)
    for _ in range(40):
        put(log, 2, size=40)  # 80 offsets over several segments
    segments = log.segment_count
    assert segments > 3
    assert log.delete_records(45) == 45 and log.log_start_offset == 45
    assert log.segment_count < segments and log._segments[0].base <= 45 < log._segments[0].next_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.read(44, 1 << 20)
    assert offsets(log.read(45, 1 << 20))[0] <= 45  # the batch holding 45, whole (as Kafka serves it)
    assert log.delete_records(10) == 45  # never backwards
    assert log.delete_records(1000) == 80  # at most the log end
    log.close()
    again = _log(tmp_path)
    assert again.log_start_offset == 80 and (tmp_path / "p" / START_FILE).read_text() == "80"
    assert put(again, 1) == 80 and again.log_start_offset == 80
    again.close()


def test_the_state_machine_applies_the_entry_and_a_snapshot_carries_the_start(tmp_path) -> None:
    log = _log(tmp_path)
    sm = DataStateMachine(log, lambda: None)
    for _ in range(10):
        put(log, 1)
    assert sm.apply(1, delete_records_entry(6)) == 6
    assert sm.apply(1, delete_records_entry(6)) == 6  # the journal replayed: the same answer
    manifest = msgpack.unpackb(sm.snapshot(), raw=False)
    assert manifest["start"] == 6
    # a replica whose log has the records but not the deletion (a lost START_FILE) takes it from the snapshot
    other = _log(tmp_path, "q")
    for _ in range(10):
        put(other, 1)
    DataStateMachine(other, lambda: None).restore(sm.snapshot())
    assert other.log_start_offset == 6
    log.close()
    other.close()


def test_reset_to_a_snapshot_starts_the_log_there(tmp_path) -> None:
    log = _log(tmp_path)
    for _ in range(5):
        put(log, 1)
    log.delete_records(3)
    log.reset_to(100, b"", {}, None)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert put(log, 1) == 100 and log.log_start_offset == 100
    log.close()


def test_after_a_crash_the_producer_state_below_the_new_start_still_counts(tmp_path) -> None:
    """The log start moved inside the active segment, then the node died without a clean
    close: the producer state is rebuilt from the bytes still on disk, so a stale epoch is
    still fenced and a retried batch still a duplicate (a review found both forgotten)."""
    from replication.data_log import SeqResult

    log = DataLog(str(tmp_path / "p"))
    for seq in range(0, 10, 2):
        put(log, 2, pid=7, epoch=3, seq=seq)  # offsets 0-9, one segment
    assert log.delete_records(5) == 5  # inside the batch 4-5
    reopened = DataLog(str(tmp_path / "p"))  # no close: as after SIGKILL
    assert reopened.log_start_offset == 5
    assert reopened.check_sequence(7, 2, 10, 11).result is SeqResult.FENCED
    assert reopened.check_sequence(7, 3, 8, 9).result is SeqResult.DUPLICATE
    assert reopened.check_sequence(7, 3, 10, 11).result is SeqResult.OK
    log.close()
    reopened.close()


def test_a_time_lookup_never_answers_below_the_log_start(tmp_path) -> None:
    log = DataLog(str(tmp_path / "p"))
    put(log, 4, ts=1000)  # offsets 0-3 in one batch
    put(log, 1, ts=2000)
    log.delete_records(2)
    assert log.offset_for_timestamp(500)[1] == 2
    log.close()
