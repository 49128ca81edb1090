"""A data partition's transactions: the last stable offset and the aborted-transaction index
(Kafka's UnifiedLogTest / ProducerStateManagerTest / TransactionIndexTest cases, restated),
kept across a restart and a Raft snapshot."""

from __future__ import annotations

import os
from pathlib import Path

from replication.data_log import DataLog, SeqResult
from replication.data_state_machine import DataStateMachine
from replication.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, build_batch
from replication.txn_index import ABORT, COMMIT, AbortedTxn, control_type, marker_record
from tests.replication.snapshot_stream import install

P1, P2, PLAIN = 101, 202, -1


class Log:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.data = DataLog(str(path))
        self.seq: dict[int, int] = {}

    def data_batch(self, pid: int, n: int = 1, epoch: int = 0) -> int:
        """Append ``n`` records (transactional unless ``pid`` is PLAIN); returns the base offset."""
        base = self.data.log_end_offset
        seq = self.seq.get(pid, 0)
        batch = build_batch([(None, b"v")] * n, base_offset=base, producer_id=pid, producer_epoch=epoch,
                            base_sequence=seq if pid >= 0 else -1, attributes=ATTR_TRANSACTIONAL if pid >= 0 else 0)
        self.seq[pid] = seq + n
        self.data.append(batch)
        return base

    def marker(self, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 3) -> int:
        base = self.data.log_end_offset
        self.data.append(build_batch([marker_record(commit, coordinator_epoch)], base_offset=base, producer_id=pid,
                                     producer_epoch=epoch, attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL))
        return base

    @property
    def lso(self) -> int:
        return self.data.txns.last_stable_offset(self.data.high_watermark, self.data.log_start_offset)


def test_the_lso_stops_at_the_oldest_open_transaction_and_plain_data_never_holds_it(tmp_path: Path) -> None:
    log = Log(tmp_path)
    log.data_batch(P1, 5)  # 0-4
    assert log.lso == 0
    log.data_batch(PLAIN, 3)  # 5-7
    assert log.lso == 0
    log.data_batch(P2, 2)  # 8-9
    commit = log.marker(P1, True)  # 10
    assert (commit, log.lso) == (10, 8)
    abort = log.marker(P2, False)  # 11
    assert (abort, log.lso) == (11, 12)
    assert log.data.txns.aborted == [AbortedTxn(P2, 8, 11, 12)]


def test_an_aborted_entry_records_the_lso_at_its_marker(tmp_path: Path) -> None:
    log = Log(tmp_path)
    log.data_batch(P1, 5)  # 0-4
    log.data_batch(P2, 3)  # 5-7
    log.data_batch(P1, 2)  # 8-9
    log.marker(P1, False)  # 10: P2 still open from 5
    assert log.data.txns.aborted == [AbortedTxn(P1, 0, 10, 5)]
    assert log.lso == 5


def test_a_fetch_is_told_the_aborted_transactions_its_range_overlaps(tmp_path: Path) -> None:
    log = Log(tmp_path)
    log.data_batch(P1, 2)  # 0-1
    log.marker(P1, False)  # 2
    log.data_batch(P2, 2)  # 3-4
    log.marker(P2, True)  # 5
    log.data_batch(P1, 2, epoch=0)  # 6-7
    log.marker(P1, False)  # 8
    txns = log.data.txns
    assert txns.aborted_between(0, 9) == [(P1, 0), (P1, 6)]
    assert txns.aborted_between(3, 6) == []
    assert txns.aborted_between(2, 4) == [(P1, 0)]  # its marker is at 2: still to be filtered
    assert txns.aborted_between(7, 9) == [(P1, 6)]


def test_markers_without_data_and_commits_leave_no_aborted_entry(tmp_path: Path) -> None:
    log = Log(tmp_path)
    log.marker(P1, False)  # an empty transaction
    log.data_batch(P1, 1)
    log.marker(P1, True)
    assert log.data.txns.aborted == [] and log.lso == log.data.log_end_offset


def test_a_marker_at_a_new_epoch_fences_the_producers_older_epoch(tmp_path: Path) -> None:
    log = Log(tmp_path)
    log.data_batch(P1, 1, epoch=0)
    log.marker(P1, False, epoch=1)  # the coordinator aborted it at the bumped epoch
    assert log.data.check_sequence(P1, 0, 1, 1).result is SeqResult.FENCED
    assert log.data.check_sequence(P1, 1, 0, 0).result is SeqResult.OK


def test_the_control_record_says_commit_or_abort() -> None:
    for commit, kind in ((True, COMMIT), (False, ABORT)):
        batch = build_batch([marker_record(commit, 7)], producer_id=1, producer_epoch=0,
                            attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL)
        assert control_type(batch) == kind
    assert control_type(build_batch([(None, b"x")])) is None


def _history(log: Log) -> None:
    log.data_batch(P1, 2)
    log.data_batch(P2, 2)
    log.marker(P1, False)
    log.data_batch(PLAIN, 1)


def test_the_transactions_survive_a_restart_with_and_without_the_producer_snapshot(tmp_path: Path) -> None:
    for drop_snapshot in (False, True):
        d = tmp_path / str(drop_snapshot)
        log = Log(d)
        _history(log)
        want = (log.data.txns.ongoing, log.data.txns.aborted, log.lso)
        log.data.close()
        if drop_snapshot:
            os.remove(d / "producer.snapshot")  # rebuilt from the segments, markers read back
        again = Log(d)
        assert (again.data.txns.ongoing, again.data.txns.aborted, again.lso) == want


def test_a_raft_snapshot_carries_the_transactions(tmp_path: Path) -> None:
    log = Log(tmp_path / "a")
    _history(log)
    other = DataStateMachine(DataLog(str(tmp_path / "b")), lambda: None)
    install(DataStateMachine(log.data, lambda: None), other)
    assert (other.data.txns.ongoing, other.data.txns.aborted) == (log.data.txns.ongoing, log.data.txns.aborted)


def test_a_marker_from_a_deposed_coordinator_is_recognised_and_remembered(tmp_path: Path) -> None:
    log = Log(tmp_path)
    log.data_batch(P1, 1)
    log.marker(P1, True, coordinator_epoch=7)
    txns = log.data.txns
    assert txns.fenced_coordinator(P1, 6) and not txns.fenced_coordinator(P1, 7)
    assert not txns.fenced_coordinator(P2, 0)  # another producer: no marker seen yet
    log.data.close()
    assert Log(tmp_path).data.txns.fenced_coordinator(P1, 6)  # kept in the producer snapshot
