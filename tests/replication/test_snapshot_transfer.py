"""The snapshot stream between two Raft nodes: paced by the link, restarted when the follower
refuses a piece, ended by the leader's dump only once its journal has taken that snapshot."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgpack

from replication.data_install import drain_reads
from replication.data_log import DataLog
from replication.data_state_machine import DataStateMachine
from replication.raft import snapshot_transfer
from replication.raft.snapshot_transfer import BACKLOG_BYTES, PASS_BYTES, StreamingSerializer
from replication.record_batch import build_batch

NODE = "follower-node"


class _Unused:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"pysyncobj's own transfer was used ({name}) for a streamed state machine")


def _leader(tmp_path: Path, batches: int) -> tuple[DataStateMachine, StreamingSerializer, dict[str, Any]]:
    sm = DataStateMachine(DataLog(str(tmp_path / "lead" / "data"), segment_bytes=1 << 20), lambda: None)
    for _ in range(batches):
        end = sm.data.log_end_offset
        sm.apply(1, build_batch([(b"k", os.urandom(60_000))] * 4, base_offset=end))
    dump = str(tmp_path / "lead" / "raft.snapshot")
    with open(dump, "wb") as f:
        f.write(msgpack.packb({"last": [b"", 10, 2], "prev": [b"", 9, 2], "cluster": [], "fence": 0,
                               "state": sm.snapshot()}, use_bin_type=True))
    link = {"backlog": 0, "last": (10, 2)}
    ser = StreamingSerializer(_Unused(), dump, sm, lambda: link["last"], lambda node: link["backlog"], lambda: "p-0")
    return sm, ser, link


def _follower(tmp_path: Path) -> tuple[DataStateMachine, StreamingSerializer]:
    sm = DataStateMachine(DataLog(str(tmp_path / "follow" / "data"), segment_bytes=1 << 20), lambda: None)
    dump = str(tmp_path / "follow" / "raft.snapshot")
    return sm, StreamingSerializer(_Unused(), dump, sm, lambda: (-1, -1), lambda node: 0, lambda: "p-0")


def _pass(ser: StreamingSerializer) -> list[Any]:
    """One of pysyncobj's passes over a connected node: it asks until the node leaves ``connected``
    (here each read ahead is done before the next ask: a disk as fast as the loop)."""
    connected = {NODE}
    ser.pace(connected)
    pieces = []
    while NODE in connected:
        drain_reads()
        data = ser.getTransmissionData(NODE)
        if data is None:
            continue
        pieces.append(data)
        if data[2]:
            break
    ser.resume()
    assert connected == {NODE}  # connected again after the pass
    return pieces


def test_each_pass_sends_a_bounded_share_and_none_while_the_link_is_full(tmp_path: Path) -> None:
    _sm, ser, link = _leader(tmp_path, 100)  # ~24 MB
    assert _pass(ser) == []  # the first pass only starts the reads (on the reader thread)
    first = _pass(ser)
    assert PASS_BYTES <= sum(len(p[0]) for p in first) <= PASS_BYTES + (1 << 20) + 64
    link["backlog"] = BACKLOG_BYTES + 1
    connected = {NODE}
    ser.pace(connected)
    assert connected == set()  # nothing read this pass: the link still holds too much
    ser.resume()
    link["backlog"] = 0
    assert _pass(ser)[0][1] == (first[0][1][0], False)  # the same stream goes on


def test_a_follower_installs_what_the_passes_send(tmp_path: Path) -> None:
    leader, ser, _link = _leader(tmp_path, 40)
    follower, fser = _follower(tmp_path)
    done = False
    for _ in range(50):
        for piece in _pass(ser):
            done = fser.setTransmissionData(msgpack.unpackb(msgpack.packb(piece), use_list=False))
        if done:
            break
    assert done
    with open(tmp_path / "lead" / "raft.snapshot", "rb") as a, open(tmp_path / "follow" / "raft.snapshot", "rb") as b:
        assert a.read() == b.read()
    assert follower.data.read(0, 1 << 30) == leader.data.read(0, 1 << 30)


def test_the_stream_ends_only_once_the_journal_has_taken_the_snapshot(tmp_path: Path) -> None:
    _sm, ser, link = _leader(tmp_path, 2)
    link["last"] = (7, 2)  # the dump is newer than the journal's snapshot entry: wait
    pieces = [p for _ in range(3) for p in _pass(ser)]
    assert not any(p[2] for p in pieces)
    link["last"] = (10, 2)
    assert _pass(ser)[-1][2]


def test_a_refused_piece_starts_the_stream_over_once(tmp_path: Path) -> None:
    _leader_sm, ser, _link = _leader(tmp_path, 40)
    _sm, fser = _follower(tmp_path)
    assert _pass(ser) == []
    begin, *rest = _pass(ser)
    sid = begin[1][0]
    for piece in rest:  # the beginning was lost
        assert not fser.setTransmissionData(piece)
    assert fser.take_refusal() == sid and fser.take_refusal() is None  # told once
    ser.refused(NODE, sid - 1)  # an old stream's refusal: nothing happens
    assert _pass(ser)[0][1] == (sid, False)
    ser.refused(NODE, sid)
    assert _pass(ser) == []  # a new stream: its reads start
    again = _pass(ser)[0]
    assert again[1] == (sid + 1, True)


def test_other_state_machines_keep_pysyncobjs_transfer(tmp_path: Path) -> None:
    calls: list[str] = []

    class Inner:
        def getTransmissionData(self, node: Any) -> Any:  # noqa: N802
            calls.append("get")
            return b"x", True, True

    ser = StreamingSerializer(Inner(), str(tmp_path / "d"), object(), lambda: (0, 0), lambda n: 0, lambda: "g")
    assert ser.getTransmissionData(NODE) == (b"x", True, True) and calls == ["get"]


def test_a_node_caught_up_otherwise_loses_its_stream_and_is_never_held_back(tmp_path: Path) -> None:
    """A stream left from an earlier term must not pause a follower that no longer needs it."""
    sm = DataStateMachine(DataLog(str(tmp_path / "lead" / "data")), lambda: None)
    sm.apply(1, build_batch([(b"k", b"v")], base_offset=0))
    dump = str(tmp_path / "lead" / "raft.snapshot")
    with open(dump, "wb") as f:
        f.write(msgpack.packb({"last": [b"", 10, 2], "state": sm.snapshot()}, use_bin_type=True))
    behind = {NODE: True}
    ser = StreamingSerializer(_Unused(), dump, sm, lambda: (10, 2), lambda node: BACKLOG_BYTES, lambda: "p-0",
                              lambda node: behind[node])
    ser._cursors[NODE] = snapshot_transfer.StreamCursor(sid=5, base=0)
    behind[NODE] = False
    connected = {NODE}
    ser.pace(connected)
    assert connected == {NODE} and NODE not in ser._cursors


def test_the_hub_counts_pieces_queued_this_pass_in_a_peers_backlog() -> None:
    from replication.hub import RaftHub

    hub = RaftHub("127.0.0.1:0", "secret-" * 4)
    try:
        hub.note_queued("peer:1", 3 << 20)
        assert hub.backlog("peer:1") == 3 << 20 and hub.backlog("peer:2") == 0
        hub.flush()  # written out: the socket's buffer counts from here
        assert hub.backlog("peer:1") == 0
    finally:
        hub.close()
