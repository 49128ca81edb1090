"""A restarted replica's commit index never runs ahead of its journal, and a replica never
removes an entry it has applied.

The commit index is stored as a hint, never fsync'd; after a power loss the journal's tail may
be gone while the hint survives. A hint past the journal's end made a follower apply a leader's
uncommitted tail (and a leader count its own new entries as committed with no follower holding
them). A leader that asks a follower to cut an applied entry shows that the follower's state has
diverged from its group's: it stops instead of serving from it.
"""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest

from tests.conftest import FailStopped
from tests.replication.test_follower_truncation import Follower


def _write_commit_hint(tmp_path: Path, commit: int) -> None:
    body = struct.pack("<Q", commit)
    (tmp_path / "raft.kcj.commit").write_bytes(struct.pack("<I", crc32c.crc32c(body) & 0xFFFFFFFF) + body)


def test_a_commit_hint_past_the_journal_end_is_clamped_and_the_uncommitted_tail_not_applied(tmp_path: Path) -> None:
    _write_commit_hint(tmp_path, 50)  # the journal itself holds only its first entry
    f = Follower(tmp_path)
    try:
        assert f.commit == 1
        # the leader's new entries, not yet committed anywhere (its commit index is 1)
        reply = f.ae(1, (1, 0), [(2, 1), (3, 1)], commit=1)
        assert reply["success"] and f.log == [(1, 0), (2, 1), (3, 1)]
        assert f.commit == 1, "the follower would apply entries no majority has acknowledged"
        f.ae(1, (3, 1), [], commit=3)
        assert f.commit == 3
    finally:
        f.close()


def test_a_commit_hint_within_the_journal_is_kept(tmp_path: Path) -> None:
    f = Follower(tmp_path)
    f.ae(1, (1, 0), [(2, 1), (3, 1), (4, 1)], commit=3)
    f.close()  # stores the hint
    g = Follower(tmp_path)
    try:
        assert g.commit == 3
    finally:
        g.close()


def test_a_conflict_with_an_applied_entry_stops_the_replica(tmp_path: Path, fail_stops: list[tuple[str, str, int]]) -> None:
    f = Follower(tmp_path)
    try:
        f.ae(1, (1, 0), [(2, 1), (3, 1)], commit=3)
        f.lg.group._onTick(0.0)
        assert f.lg.group.__dict__["_SyncObj__raftLastApplied"] == 3
        with pytest.raises(FailStopped):
            f.ae(2, (1, 0), [(2, 2)], commit=3)
        assert fail_stops and fail_stops[0][0] == "raft_diverged"
        assert f.log == [(1, 0), (2, 1), (3, 1)], "nothing applied was deleted"
    finally:
        f.close()


def test_a_chunked_transmission_is_refused(tmp_path: Path) -> None:
    f = Follower(tmp_path)
    try:
        before = len(f.sent)
        message = {"type": "append_entries", "term": 1, "prevLogIdx": 1, "prevLogTerm": 0, "commit_index": 1,
                   "transmission": "finish", "data": b"\x80\x04N."}  # a pickle: never loaded
        f.lg.group._SyncObj__onMessageReceived(f.node, message)
        assert len(f.sent) == before and f.log == [(1, 0)]
    finally:
        f.close()
