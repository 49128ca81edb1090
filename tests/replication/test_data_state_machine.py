"""The data partition's state machine: what Raft applies to a DataLog, and what it refuses."""

from __future__ import annotations

from pathlib import Path

from replication.data_log import DataLog
from replication.data_state_machine import DataStateMachine
from replication.record_batch import build_batch
from tests.replication.snapshot_stream import install


def _machine(path: Path) -> tuple[DataStateMachine, list[int]]:
    applied: list[int] = []
    return DataStateMachine(DataLog(str(path)), lambda: applied.append(1)), applied


def test_batches_apply_in_order_and_a_replayed_one_is_taken_as_already_there(tmp_path: Path) -> None:
    sm, applied = _machine(tmp_path / "p")
    first = build_batch([(b"k", b"a"), (b"k", b"b")], base_offset=0)
    assert sm.apply(1, first) == 0
    assert sm.apply(1, build_batch([(b"k", b"c")], base_offset=2)) == 2
    assert sm.data.log_end_offset == 3 and len(applied) == 2
    assert sm.apply(1, first) == 0  # a restarted node replaying its journal over kept segments
    assert sm.data.log_end_offset == 3 and len(applied) == 2


def test_another_batch_at_a_taken_offset_or_past_a_gap_is_refused(tmp_path: Path) -> None:
    sm, _ = _machine(tmp_path / "p")
    assert sm.apply(1, build_batch([(b"k", b"a")], base_offset=0)) == 0
    assert sm.apply(1, build_batch([(b"k", b"other")], base_offset=0)) == -2
    assert sm.apply(1, build_batch([(b"k", b"gap")], base_offset=5)) == -2
    assert sm.data.log_end_offset == 1


def test_a_snapshot_restores_the_log_elsewhere(tmp_path: Path) -> None:
    sm, _ = _machine(tmp_path / "a")
    sm.apply(1, build_batch([(b"k", b"a")], base_offset=0))
    sm.apply(1, build_batch([(b"k", b"b")], base_offset=1))
    other, applied = _machine(tmp_path / "b")
    install(sm, other)
    assert other.data.log_end_offset == 2 and applied == [1]
    assert other.apply(1, build_batch([(b"k", b"c")], base_offset=2)) == 2


def test_a_journal_replayed_over_a_compacted_log_is_taken_as_already_there(tmp_path: Path) -> None:
    """Compaction rewrote or removed the batches the journal still holds: replaying them after a
    restart is no conflict (it was logged as one, an error per batch), while another batch at a
    kept batch's offsets still is."""
    from replication.data_log import Compaction

    data = DataLog(str(tmp_path / "p"), segment_bytes=200, cleanup_policy="compact",
                   compaction=Compaction(min_dirty_ratio=0.0))
    sm = DataStateMachine(data, lambda: None)
    journal = [build_batch([(b"k%d" % (i % 3), b"v%d" % i + b"x" * 40)], base_offset=i) for i in range(20)]
    for i, b in enumerate(journal):
        assert sm.apply(1, b) == i
    assert data.compact(capacity=100) is not None
    assert any(data.read(b_i, 1000, min_one=True)[:len(b)] != b for b_i, b in enumerate(journal))
    for i, b in enumerate(journal):
        assert sm.apply(1, b) == i, i
    assert data.log_end_offset == 20
    assert sm.apply(1, build_batch([(b"k", b"a"), (b"k", b"b")], base_offset=19)) == -2
