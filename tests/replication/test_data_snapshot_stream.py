"""A data partition's Raft snapshot is its segments as they are on disk: the snapshot itself names
them (its size does not grow with the data), a lagging follower is sent their bytes in bounded
chunks, checks every batch and only then puts the copy in its log's place."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import msgpack
import pytest

from replication import data_install, failstop
from replication.data_install import CHUNK_BYTES, decode, encode
from replication.data_log import INSTALL_SUFFIX, OLD_SUFFIX, DataLog, settle_install
from replication.data_state_machine import DataStateMachine
from replication.raft.snapshot_transfer import InstallError, StreamCursor
from replication.record_batch import build_batch
from tests.replication.snapshot_stream import install as _install
from tests.replication.snapshot_stream import stream as _stream

SEGMENT = 64 * 1024


def _machine(path: Path) -> DataStateMachine:
    return DataStateMachine(DataLog(str(path), segment_bytes=SEGMENT), lambda: None)


def _fill(sm: DataStateMachine, batches: int, size: int = 3000, pid: int = -1) -> None:
    for _ in range(batches):
        end = sm.data.log_end_offset
        seq = end if pid >= 0 else -1
        sm.apply(1, build_batch([(b"k", os.urandom(size))] * 2, base_offset=end, producer_id=pid,
                                producer_epoch=0 if pid >= 0 else -1, base_sequence=seq))


def _all_bytes(data: DataLog) -> bytes:
    return data.read(data.log_start_offset, 1 << 40, min_one=True)


def test_the_snapshot_names_segments_and_does_not_grow_with_the_data(tmp_path: Path) -> None:
    sm = _machine(tmp_path / "a")
    _fill(sm, 10)
    small = len(sm.snapshot())
    _fill(sm, 300)  # ~1.8 MB in ~28 segments
    state = msgpack.unpackb(sm.snapshot(), raw=False)
    assert "batches" not in state and len(state["segments"]) == sm.data.segment_count > 20
    assert len(sm.snapshot()) < small + 40 * 32  # a few bytes per segment, none of the data


def test_a_follower_installs_the_leaders_segments_byte_for_byte(tmp_path: Path) -> None:
    leader, follower = _machine(tmp_path / "lead"), _machine(tmp_path / "follow")
    _fill(leader, 200, pid=7)
    _fill(follower, 3)  # what it had before: replaced whole
    pieces = list(_stream(leader))
    assert max(len(p) for p in pieces[:-1]) <= CHUNK_BYTES + 64  # one chunk of disk at a time
    _install(leader, follower)
    assert _all_bytes(follower.data) == _all_bytes(leader.data)
    assert follower.data.log_end_offset == leader.data.log_end_offset
    assert follower.data.segment_count == leader.data.segment_count
    assert follower.data.producer_state.to_obj() == leader.data.producer_state.to_obj()
    assert not os.path.exists(follower.data.directory + INSTALL_SUFFIX)
    assert not os.path.exists(follower.data.directory + OLD_SUFFIX)
    reopened = DataLog(follower.data.directory, segment_bytes=SEGMENT)  # the copy is a clean log
    assert _all_bytes(reopened) == _all_bytes(leader.data)


def test_a_stream_outlives_the_snapshots_taken_while_it_runs(tmp_path: Path) -> None:
    leader, follower = _machine(tmp_path / "lead"), _machine(tmp_path / "follow")
    _fill(leader, 50)
    cursor = StreamCursor()
    follower.install(leader.stream_next(leader.snapshot(), cursor) or b"")
    follower.install(leader.stream_next(leader.snapshot(), cursor) or b"")
    _fill(leader, 50)  # written (and a new snapshot taken) meanwhile
    for piece in _stream(leader, cursor):
        kind, *fields = decode(piece)
        follower.install_end(fields[0]) if kind == "end" else follower.install(piece)
    assert _all_bytes(follower.data) == _all_bytes(leader.data)


def test_a_bad_batch_or_a_gap_aborts_the_install_and_keeps_the_log(tmp_path: Path) -> None:
    leader = _machine(tmp_path / "lead")
    _fill(leader, 100)
    pieces = list(_stream(leader))
    for damage in ("flip", "gap"):
        follower = _machine(tmp_path / damage)
        _fill(follower, 2)
        before = _all_bytes(follower.data)
        with pytest.raises(InstallError):
            for i, piece in enumerate(pieces[:-1]):
                if i == 2 and damage == "gap":
                    continue
                if i == 2:
                    kind, base, pos, chunk = decode(piece)
                    chunk = chunk[:100] + bytes([chunk[100] ^ 1]) + chunk[101:]
                    piece = encode(kind, base, pos, chunk)
                follower.install(piece)
            follower.install_end(decode(pieces[-1])[1])
        follower.install_abort()
        assert _all_bytes(follower.data) == before
        assert not os.path.exists(follower.data.directory + INSTALL_SUFFIX)


def test_a_short_copy_is_not_installed(tmp_path: Path) -> None:
    leader, follower = _machine(tmp_path / "lead"), _machine(tmp_path / "follow")
    _fill(leader, 30)
    pieces = list(_stream(leader))
    for piece in pieces[:-2]:  # the last chunk never came
        follower.install(piece)
    with pytest.raises(InstallError):
        follower.install_end(decode(pieces[-1])[1])
    assert follower.data.log_end_offset == 0


def test_a_segment_deleted_by_retention_restarts_the_stream(tmp_path: Path) -> None:
    leader = _machine(tmp_path / "lead")
    _fill(leader, 60)
    snapshot, cursor = leader.snapshot(), StreamCursor()
    leader.stream_next(snapshot, cursor)
    leader.data.retention_bytes = SEGMENT * 2
    assert leader.data.enforce_retention() > 0
    with pytest.raises(InstallError):
        leader.stream_next(snapshot, cursor)


def test_a_log_shorter_than_its_snapshot_stops_the_node(tmp_path: Path) -> None:
    sm = _machine(tmp_path / "a")
    _fill(sm, 20)
    snapshot = sm.snapshot()
    other = _machine(tmp_path / "b")  # its segments lost: acknowledged data is gone
    stopped: list[tuple[str, str, int]] = []
    failstop.set_action(lambda component, reason, code: stopped.append((component, reason, code)))
    try:
        with pytest.raises(failstop.FailStopped):
            other.restore(snapshot)
    finally:
        failstop.reset_action()
    assert stopped and "acknowledged data is missing" in stopped[0][1]
    sm.restore(snapshot)  # its own log holds it all: nothing to do


def test_a_swap_cut_by_a_crash_leaves_one_whole_log(tmp_path: Path) -> None:
    sm = _machine(tmp_path / "a")
    _fill(sm, 20)
    want = _all_bytes(sm.data)
    directory = sm.data.directory
    sm.data.close()
    os.replace(directory, directory + OLD_SUFFIX)  # cut between the two renames
    os.makedirs(directory + INSTALL_SUFFIX)
    again = DataLog(directory, segment_bytes=SEGMENT)
    assert _all_bytes(again) == want
    assert not os.path.exists(directory + OLD_SUFFIX) and not os.path.exists(directory + INSTALL_SUFFIX)


def test_a_snapshot_written_before_snapshots_named_segments_still_restores(tmp_path: Path) -> None:
    sm = _machine(tmp_path / "a")
    _fill(sm, 5)
    old = msgpack.packb({"start": 0, "batches": _all_bytes(sm.data), "producers": sm.data.producer_state.to_obj(),
                         "txns": sm.data.txns.to_obj()}, use_bin_type=True)
    other = _machine(tmp_path / "b")
    other.restore(old)
    assert _all_bytes(other.data) == _all_bytes(sm.data)


def test_a_swap_cut_before_the_directory_was_claimed_again_keeps_the_old_log(tmp_path: Path) -> None:
    """The node restarts after the first rename: its partition directory is gone, and is made
    again (empty, with its incarnation marker) before the log opens. The old log comes back."""
    sm = _machine(tmp_path / "a")
    _fill(sm, 20)
    want = _all_bytes(sm.data)
    directory = sm.data.directory
    sm.data.close()
    os.replace(directory, directory + OLD_SUFFIX)
    os.makedirs(directory)
    (Path(directory) / ".incarnation").write_text("slot-1")
    settle_install(directory)
    assert _all_bytes(DataLog(directory, segment_bytes=SEGMENT)) == want


def test_an_installed_log_keeps_its_directorys_incarnation(tmp_path: Path) -> None:
    leader, follower = _machine(tmp_path / "lead"), _machine(tmp_path / "follow")
    _fill(leader, 10)
    marker = Path(follower.data.directory) / ".incarnation"
    marker.write_text("slot-7")
    _install(leader, follower)
    assert marker.read_text() == "slot-7"


def test_a_piece_that_claims_a_huge_batch_is_refused_not_buffered(tmp_path: Path) -> None:
    follower = _machine(tmp_path / "follow")
    follower.install(encode("begin", 0, 1000))
    forged = bytearray(build_batch([(b"k", b"v")], base_offset=0))
    forged[8:12] = (1 << 30).to_bytes(4, "big")  # batchLength: a gigabyte to come
    with pytest.raises(InstallError):
        follower.install(encode("seg", 0, 0, bytes(forged)))


def test_an_install_the_disk_cannot_hold_is_refused_before_it_starts(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    follower = _machine(tmp_path / "follow")
    monkeypatch.setattr(data_install.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10 << 30, 0, 1 << 20))
    with pytest.raises(InstallError, match="bytes free"):
        follower.install(encode("begin", 0, 5 << 20))
