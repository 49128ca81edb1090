"""A data partition's Raft snapshot is its segments as they are on disk: the snapshot itself names
them (its size does not grow with the data), a lagging follower is sent their bytes in bounded
chunks, checks every batch and only then puts the copy in its log's place."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest

from replication import data_install, failstop
from replication.data_install import CHUNK_BYTES, QUEUE_PIECES, decode, encode
from replication.data_log import INSTALL_SUFFIX, OLD_SUFFIX, DataLog, settle_install
from replication.data_state_machine import DataStateMachine
from replication.raft.snapshot_transfer import NOT_READY, InstallError, StreamCursor
from replication.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, build_batch, parse_header
from replication.txn_index import marker_record
from tests.replication.snapshot_stream import install as _install
from tests.replication.snapshot_stream import next_piece
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
    follower.install(next_piece(leader, leader.snapshot(), cursor) or b"")
    follower.install(next_piece(leader, leader.snapshot(), cursor) or b"")
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
    next_piece(leader, snapshot, cursor)
    leader.data.retention_bytes = SEGMENT * 2
    assert leader.data.enforce_retention() > 0
    with pytest.raises(InstallError):  # once the chunks read ahead before it are sent
        for _ in range(20):
            assert next_piece(leader, snapshot, cursor) is not None


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
    with pytest.raises(InstallError, match="not a batch"):  # said by the next piece or the end
        follower.install(encode("seg", 0, 0, bytes(forged)))
        follower.install_end(msgpack.packb({"end": 1, "producers": {}}, use_bin_type=True))


def test_an_install_the_disk_cannot_hold_is_refused_before_it_starts(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    follower = _machine(tmp_path / "follow")
    monkeypatch.setattr(data_install.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10 << 30, 0, 1 << 20))
    with pytest.raises(InstallError, match="bytes free"):
        follower.install(encode("begin", 0, 5 << 20))


def test_the_follower_checks_and_writes_on_a_thread_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop that drives Raft only hands chunks over: a disk that does not answer does not hold it."""
    leader, follower = _machine(tmp_path / "lead"), _machine(tmp_path / "follow")
    _fill(leader, 40)
    pieces = list(_stream(leader))
    gate, writers = threading.Event(), set()
    append_run = DataLog.append_run

    def stuck_disk(self: DataLog, *args: Any) -> Any:
        if self.directory.endswith(INSTALL_SUFFIX):
            writers.add(threading.get_ident())
            gate.wait(3)
        return append_run(self, *args)

    monkeypatch.setattr(DataLog, "append_run", stuck_disk)
    for piece in pieces[:QUEUE_PIECES]:  # as many as may wait: handed over while the disk is stuck
        follower.install(piece)
    deadline = time.monotonic() + 3
    while not writers and time.monotonic() < deadline:  # the install thread reaches the disk
        time.sleep(0.01)
    assert not gate.is_set() and writers and threading.get_ident() not in writers
    gate.set()
    for piece in pieces[QUEUE_PIECES:-1]:
        follower.install(piece)
    follower.install_end(decode(pieces[-1])[1])
    assert _all_bytes(follower.data) == _all_bytes(leader.data)
    assert threading.get_ident() not in writers


def test_the_leader_reads_ahead_on_its_reader_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    leader = _machine(tmp_path / "lead")
    _fill(leader, 40)
    want = list(_stream(leader))
    gate, readers = threading.Event(), set()
    read_segment = DataLog.read_segment

    def slow_disk(self: DataLog, *args: Any) -> Any:
        readers.add(threading.get_ident())
        gate.wait(3)
        return read_segment(self, *args)

    monkeypatch.setattr(DataLog, "read_segment", slow_disk)
    snapshot, cursor = leader.snapshot(), StreamCursor()
    assert leader.stream_next(snapshot, cursor) == NOT_READY  # asked again next pass, never waited for
    assert leader.stream_next(snapshot, cursor) == NOT_READY
    gate.set()
    got = [next_piece(leader, snapshot, cursor)]
    while got[-1] is not None:
        got.append(next_piece(leader, snapshot, cursor))
    assert got[:-1] == want[:-1] and readers and threading.get_ident() not in readers


def test_a_run_written_in_one_go_is_the_log_batch_by_batch_appends_make(tmp_path: Path) -> None:
    """The install thread writes a chunk's batches with one write per segment: the segments, their
    indexes, producer state and transactions (aborted ones too) are what appending one by one gives."""
    batches, offset = [], 0
    for i in range(120):
        pid, txn = 1 + i % 3, i % 4 != 0
        if i % 9 == 8:  # a marker ends producer pid's transaction: an abort every other time
            records, attrs = [marker_record(i % 2 == 0, 5)], ATTR_TRANSACTIONAL | ATTR_CONTROL
        else:
            records, attrs = [(b"k", os.urandom(900))] * 3, ATTR_TRANSACTIONAL if txn else 0
        batches.append(build_batch(records, base_offset=offset, producer_id=pid, producer_epoch=0,
                                   base_sequence=offset, attributes=attrs))
        offset += len(records)
    one, run = DataLog(str(tmp_path / "one"), segment_bytes=SEGMENT), DataLog(str(tmp_path / "run"),
                                                                             segment_bytes=SEGMENT)
    for batch in batches:
        one.append(batch)
    for at in range(0, len(batches), 7):
        group = batches[at : at + 7]
        run.append_run([parse_header(b) for b in group], b"".join(group))
    assert one.segment_count == run.segment_count > 2
    assert _all_bytes(one) == _all_bytes(run)
    assert one.producer_state.to_obj() == run.producer_state.to_obj()
    assert one.txns.to_obj() == run.txns.to_obj() and one.txns.aborted
    for name in sorted(os.listdir(tmp_path / "one")):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "run" / name).read_bytes(), name
    with pytest.raises(ValueError):  # a gap is refused, as by append
        run.append_run([parse_header(batches[5])], batches[5])


def test_a_snapshot_of_a_later_version_stops_the_node_rather_than_load_it(tmp_path: Path) -> None:
    from replication.data_log import MANIFEST_VERSION

    sm = _machine(tmp_path / "a")
    _fill(sm, 3)
    state = msgpack.unpackb(sm.snapshot(), raw=False)
    assert state["v"] == MANIFEST_VERSION
    later = msgpack.packb({**state, "v": MANIFEST_VERSION + 1}, use_bin_type=True)
    stopped: list[str] = []
    failstop.set_action(lambda component, reason, code: stopped.append(reason))
    try:
        with pytest.raises(failstop.FailStopped):
            _machine(tmp_path / "b").restore(later)
    finally:
        failstop.reset_action()
    assert "upgrade this node" in stopped[0]


def test_a_log_closed_under_a_read_ahead_restarts_the_stream(tmp_path: Path) -> None:
    """A topic deleted while one of its partitions is streamed: the read fails on the reader
    thread and the stream starts over (InstallError), nothing raises into pysyncobj's pass."""
    leader = _machine(tmp_path / "lead")
    _fill(leader, 40)
    snapshot, cursor = leader.snapshot(), StreamCursor()
    next_piece(leader, snapshot, cursor)
    leader.data.close()
    with pytest.raises(InstallError, match="the log was closed"):
        for _ in range(20):
            next_piece(leader, snapshot, cursor)


def test_an_install_ends_with_its_partitions_group_and_stale_copies_go_at_start(tmp_path: Path) -> None:
    from replication.data_log import sweep_installs

    leader, follower = _machine(tmp_path / "lead"), _machine(tmp_path / "follow")
    _fill(leader, 20)
    pieces = list(_stream(leader))
    for piece in pieces[:3]:
        follower.install(piece)
    staging = follower.data.directory + INSTALL_SUFFIX
    assert os.path.isdir(staging) and any(t.name.startswith("install:") for t in threading.enumerate())
    follower.close()  # its Raft group closed: node stop, or the topic deleted
    assert not os.path.exists(staging)
    assert not any(t.name.startswith("install:") and t.is_alive() for t in threading.enumerate())
    os.makedirs(tmp_path / "gone-0.install")  # a crash mid-install of a topic deleted since
    sweep_installs(str(tmp_path))
    assert not os.path.exists(tmp_path / "gone-0.install") and os.path.isdir(tmp_path / "lead")


def test_a_failing_disk_under_a_read_ahead_stops_the_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    leader = _machine(tmp_path / "lead")
    _fill(leader, 20)

    def eio(self: DataLog, *args: Any) -> Any:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(DataLog, "read_segment", eio)
    stopped: list[str] = []
    failstop.set_action(lambda component, reason, code: stopped.append(reason))
    try:
        with pytest.raises(failstop.FailStopped):
            for _ in range(5):
                next_piece(leader, leader.snapshot(), StreamCursor())
    finally:
        failstop.reset_action()
    assert "reading a snapshot stream failed" in stopped[0]


def test_a_stream_whose_snapshot_this_build_cannot_read_is_refused_before_the_swap(tmp_path: Path) -> None:
    from replication.data_log import MANIFEST_VERSION

    leader, follower = _machine(tmp_path / "lead"), _machine(tmp_path / "follow")
    _fill(leader, 10)
    _fill(follower, 2)
    before = _all_bytes(follower.data)
    pieces = list(_stream(leader))
    for piece in pieces[:-1]:
        follower.install(piece)
    later = msgpack.packb({**msgpack.unpackb(decode(pieces[-1])[1], raw=False), "v": MANIFEST_VERSION + 1},
                          use_bin_type=True)
    with pytest.raises(InstallError, match="version"):
        follower.install_end(later)
    assert _all_bytes(follower.data) == before


def test_a_follower_installs_an_empty_log_when_everything_below_the_snapshot_was_deleted(tmp_path: Path) -> None:
    """DeleteRecords (or retention) took every record below the snapshot's end: the follower's
    copy is an empty log starting there (the install used to fail until the next snapshot)."""
    leader, follower = _machine(tmp_path / "lead"), _machine(tmp_path / "follow")
    _fill(leader, 60)  # several segments
    snapshot = leader.snapshot()
    end = msgpack.unpackb(snapshot, raw=False)["end"]
    _fill(leader, 30)
    leader.data.delete_records(leader.data.log_end_offset)  # every segment below the snapshot's end gone
    assert leader.data.log_start_offset > end and not leader.data.stream_bounds(end)
    cursor = StreamCursor()
    pieces = []
    while (piece := next_piece(leader, snapshot, cursor)) is not None:
        pieces.append(piece)
    assert [decode(p)[0] for p in pieces] == ["begin"]
    follower.install(pieces[0])
    follower.install_end(snapshot)
    assert (follower.data.log_start_offset, follower.data.log_end_offset) == (end, end)
