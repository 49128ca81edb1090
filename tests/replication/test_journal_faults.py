"""The Raft journal under failing disks and damaged files.

- A write that fails (ENOSPC on a real, full tmpfs when running as root; EIO injected) is cut
  back to the last whole frame and the node fail_stops; reopened, the journal holds exactly what
  was written before.
- A torn tail is truncated, whatever follows the last good frame (zeros or garbage a power loss
  leaves); a bad frame followed by a valid one, or damaged term/vote, refuses to start (exit 2).
- A first-format journal (no CRC) is read once and rewritten.
"""

from __future__ import annotations

import errno
import logging
import os
import random
import struct
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from replication import durable, failstop, journal
from replication.journal import SafeJournal
from tests.conftest import FailStopped


def _fill(j: SafeJournal, n: int, size: int = 100, start: int = 1) -> list[tuple[bytes, int, int]]:
    out = []
    for i in range(start, start + n):
        entry = (bytes([i % 256]) * size, i, 1)
        j.add(*entry)
        out.append(entry)
    return out


def test_eio_on_append_cuts_back_and_stops(tmp_path: Path, fail_stops: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "raft.kcj")
    j = SafeJournal(path)
    written = _fill(j, 5)
    real = os.pwrite

    def half_then_eio(fd: int, data: bytes, offset: int) -> int:
        real(fd, data[: len(data) // 2], offset)  # half the frame lands, then the device fails
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(durable, "_pwrite", half_then_eio)
    with pytest.raises(FailStopped):
        j.add(b"never acknowledged", 6, 1)
    assert fail_stops[0][0] == "journal" and "Input/output error" in fail_stops[0][1]
    monkeypatch.setattr(durable, "_pwrite", real)
    j._destroy()
    again = SafeJournal(path)
    assert [again[i] for i in range(len(again))] == written  # no half frame, nothing lost


def test_eio_on_fsync_stops(tmp_path: Path, fail_stops: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    j = SafeJournal(str(tmp_path / "raft.kcj"))
    _fill(j, 2)

    def eio(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(journal, "_fsync", eio)
    with pytest.raises(FailStopped):
        j.sync()
    assert "fsync failed" in fail_stops[0][1]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_full_disk_cuts_back_and_stops(tmp_path: Path, fail_stops: list[Any]) -> None:
    mnt = tmp_path / f"tmpfs-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], check=True)
    try:
        path = str(mnt / "raft.kcj")
        j = SafeJournal(path)
        acknowledged = []
        with pytest.raises(FailStopped):
            for i in range(1, 10_000):
                j.add(b"x" * 1000, i, 1)
                acknowledged.append((b"x" * 1000, i, 1))
        assert "No space left on device" in fail_stops[0][1]
        j._destroy()
        subprocess.run(["mount", "-o", "remount,size=1m", str(mnt)], check=True)  # the operator frees space
        again = SafeJournal(path)
        assert [again[i] for i in range(len(again))] == acknowledged
        again.add(b"after", len(acknowledged) + 1, 1)
        again._destroy()
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_torn_tail_is_truncated(tmp_path: Path, fail_stops: list[Any]) -> None:
    path = str(tmp_path / "raft.kcj")
    j = SafeJournal(path)
    written = _fill(j, 4)
    j._destroy()
    whole = os.path.getsize(path)
    frame = SafeJournal._frame(b"z" * 50, 5, 1)
    with open(path, "ab") as f:
        f.write(frame[:30])  # a crash mid-write
    again = SafeJournal(path)
    assert [again[i] for i in range(len(again))] == written
    assert os.path.getsize(path) == whole
    again._destroy()
    with open(path, "ab") as f:  # a whole last frame whose bytes did not all land: bad CRC, nothing after
        f.write(frame[:-5] + b"\x00" * 5)
    assert len(SafeJournal(path)) == 4
    assert not fail_stops


def test_corruption_in_the_middle_refuses_to_start(tmp_path: Path, fail_stops: list[Any]) -> None:
    path = str(tmp_path / "raft.kcj")
    j = SafeJournal(path)
    _fill(j, 6)
    j._destroy()
    data = bytearray(Path(path).read_bytes())
    data[len(data) // 2] ^= 0xFF
    Path(path).write_bytes(bytes(data))
    with pytest.raises(FailStopped):
        SafeJournal(path)
    component, reason, code = fail_stops[0]
    assert code == failstop.EXIT_CORRUPT and "corrupt in the middle" in reason
    # not "move the directory away": a node back empty under its old id can lose acknowledged writes
    assert "Keep this node down" in reason and "not supported yet" in reason and "move" not in reason


def _zeroed_page_in_last_frame(whole: bytes) -> bytes:
    """A fifth, 10 KB frame whose middle page never reached the disk, then zeros to the page end."""
    frame = bytearray(SafeJournal._frame(b"\x05" * 10_000, 5, 1))
    frame[3000:7096] = bytes(4096)
    return whole + bytes(frame) + bytes(-(len(whole) + len(frame)) % 4096)


@pytest.mark.parametrize("damage", [
    pytest.param(lambda whole: whole + bytes(64 * 1024), id="64KiB-of-zeros"),
    pytest.param(_zeroed_page_in_last_frame, id="zeroed-page-in-the-last-frame"),
    pytest.param(lambda whole: whole + random.Random(7).randbytes(64 * 1024), id="64KiB-of-garbage"),
    pytest.param(lambda whole: whole + SafeJournal._frame(b"z" * 50, 5, 1)[:30] + random.Random(8).randbytes(500),
                 id="torn-frame-then-garbage"),
])
def test_whatever_follows_the_last_good_frame_is_a_torn_tail(
        tmp_path: Path, fail_stops: list[Any], caplog: pytest.LogCaptureFixture, damage: Any) -> None:
    """A power loss can leave zeros or garbage longer than a frame after the last good one (a
    file size that got ahead of its data): the node must still start, with that tail cut."""
    path = str(tmp_path / "raft.kcj")
    j = SafeJournal(path)
    written = _fill(j, 4)
    j._destroy()
    whole = Path(path).read_bytes()
    Path(path).write_bytes(damage(whole))
    with caplog.at_level(logging.WARNING, logger="kcoord.journal"):
        again = SafeJournal(path)
    assert not fail_stops
    assert [again[i] for i in range(len(again))] == written
    assert Path(path).read_bytes() == whole
    assert [r.getMessage().split()[0] for r in caplog.records] == ["event=journal_torn_tail"]
    again.add(b"after", 5, 1)  # and it goes on from there
    again._destroy()
    assert SafeJournal(path)[4] == (b"after", 5, 1)


def _length_past_the_end(data: bytearray, frame: int) -> None:
    struct.pack_into("<I", data, frame, 1 << 30)


def _zeroed_page(data: bytearray, frame: int) -> None:
    data[frame:frame + 4096] = bytes(4096)  # some 30 frames, then valid ones


@pytest.mark.parametrize("damage", [_length_past_the_end, _zeroed_page])
def test_a_bad_frame_with_valid_frames_after_refuses_to_start(tmp_path: Path, fail_stops: list[Any],
                                                              damage: Any) -> None:
    """A bad frame is corruption in the middle when a valid frame follows it somewhere, even if
    its length is damaged too (a length past the end used to pass for a torn tail, and every entry
    after it was silently dropped)."""
    path = str(tmp_path / "raft.kcj")
    j = SafeJournal(path)
    _fill(j, 60)
    second = j._pos[1]
    j._destroy()
    data = bytearray(Path(path).read_bytes())
    damage(data, second)
    Path(path).write_bytes(bytes(data))
    with pytest.raises(FailStopped):
        SafeJournal(path)
    _component, reason, code = fail_stops[0]
    assert code == failstop.EXIT_CORRUPT and "corrupt in the middle" in reason


def test_damaged_term_and_vote_refuse_to_start(tmp_path: Path, fail_stops: list[Any]) -> None:
    path = str(tmp_path / "raft.kcj")
    j = SafeJournal(path)
    j.setCurrentTerm(7, "node-2")
    j._destroy()
    assert SafeJournal(path).getVotedForNodeId() == "node-2"
    meta = bytearray(Path(path + ".meta").read_bytes())
    meta[-1] ^= 0x01
    Path(path + ".meta").write_bytes(bytes(meta))
    with pytest.raises(FailStopped):
        SafeJournal(path)
    assert fail_stops[0][2] == failstop.EXIT_CORRUPT and "vote" in fail_stops[0][1]


def test_a_first_format_journal_is_read_and_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "raft.kcj"
    frames = b"".join(struct.pack("<IQQ", len(c), i, 1) + c for i, c in ((1, b"a"), (2, b"bb"), (3, b"ccc")))
    path.write_bytes(b"KCJ1" + frames)
    j = SafeJournal(str(path))
    assert [j[i] for i in range(len(j))] == [(b"a", 1, 1), (b"bb", 2, 1), (b"ccc", 3, 1)]
    assert path.read_bytes().startswith(b"KCJ2")
    j.add(b"dddd", 4, 1)
    j._destroy()
    assert len(SafeJournal(str(path))) == 4


def test_flush_policy_decides_when_journals_are_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr(journal, "_fsync", lambda fd: synced.append(fd))
    journal._dirty.clear()  # journals earlier tests left open
    j = SafeJournal(str(tmp_path / "raft.kcj"))
    try:
        journal.set_flush_policy(journal.FlushPolicy())  # durability = "replicated": never
        _fill(j, 3)
        assert journal.sync_due(before_send=True) == 0 and not synced
        journal.set_flush_policy(journal.FlushPolicy(before_send=True))  # durability = "fsync"
        assert journal.sync_due(before_send=True) == 1 and len(synced) == 1
        assert journal.sync_due(before_send=True) == 0  # nothing new since
        journal.set_flush_policy(journal.FlushPolicy(every_messages=5))  # log.flush.interval.messages
        _fill(j, 4, start=4)
        assert journal.sync_due(before_send=True) == 0
        _fill(j, 1, start=8)
        assert journal.sync_due(before_send=False) == 1
    finally:
        journal.set_flush_policy(journal.FlushPolicy())
        j._destroy()
