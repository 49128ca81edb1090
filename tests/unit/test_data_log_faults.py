"""Data-partition segments under failing disks and damage: a failed write is cut back and fail_stops
the node (no stale bytes of it are written later); damage in the middle refuses to start."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from replication import durable, failstop
from replication.data_log import DataLog
from tests.conftest import FailStopped
from tests.unit.test_data_log import offsets, put


def test_a_failed_write_is_cut_back_and_stops(tmp_path: Path, fail_stops: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "p"
    log = DataLog(str(d))
    for _ in range(5):
        put(log, 2)
    size = os.path.getsize(d / "00000000000000000000.log")
    real = os.pwrite

    def half_then_enospc(fd: int, data: Any, offset: int) -> int:
        real(fd, bytes(data[: len(data) // 2]), offset)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(durable, "_pwrite", half_then_enospc)
    with pytest.raises(FailStopped):
        put(log, 2)
    assert fail_stops[0][0] == "data_log" and "No space left on device" in fail_stops[0][1]
    assert os.path.getsize(d / "00000000000000000000.log") == size  # no half batch left behind
    monkeypatch.setattr(durable, "_pwrite", real)
    log.close()
    again = DataLog(str(d))
    assert again.log_end_offset == 10
    assert put(again, 1) == 10  # nothing of the failed write reappears
    assert offsets(again.read(0, 1 << 20)) == list(range(11))
    again.close()


def test_damage_in_the_middle_refuses_to_start(tmp_path: Path, fail_stops: list[Any]) -> None:
    d = tmp_path / "p"
    log = DataLog(str(d))
    for _ in range(6):
        put(log, 1, size=200)
    log.close()
    seg = d / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the third or fourth batch: valid batches follow it
    seg.write_bytes(bytes(data))
    with pytest.raises(FailStopped):
        DataLog(str(d))
    assert fail_stops[0][2] == failstop.EXIT_CORRUPT and "corrupt in the middle" in fail_stops[0][1]


def test_single_node_log_write_failure_cut_back_and_damage_refused(tmp_path: Path, fail_stops: list[Any],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from replication.local import LocalLog

    path = str(tmp_path / "log")
    lg = LocalLog(path)
    for i in range(4):
        asyncio.run(lg.append(b"e%d" % i, 1))
    size = os.path.getsize(path)
    real = os.pwrite

    def half_then_eio(fd: int, data: Any, offset: int) -> int:
        real(fd, bytes(data[: len(data) // 2]), offset)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(durable, "_pwrite", half_then_eio)
    with pytest.raises(FailStopped):
        asyncio.run(lg.append(b"lost", 1))
    assert os.path.getsize(path) == size and "Input/output error" in fail_stops[0][1]
    monkeypatch.setattr(durable, "_pwrite", real)
    lg.close()
    assert [e.payload for e in LocalLog(path).read_committed(0)] == [b"e0", b"e1", b"e2", b"e3"]
    data = bytearray(Path(path).read_bytes())
    data[12] ^= 0xFF  # inside the first record's body
    Path(path).write_bytes(bytes(data))
    with pytest.raises(FailStopped):
        LocalLog(path)
    assert fail_stops[-1][2] == failstop.EXIT_CORRUPT


def test_single_node_log_of_the_first_format_is_rewritten(tmp_path: Path) -> None:
    import struct

    import msgpack

    from replication.local import MAGIC, LocalLog

    path = tmp_path / "log"
    bodies = [msgpack.packb({"e": 1, "p": b"old%d" % i}, use_bin_type=True) for i in range(3)]
    path.write_bytes(b"".join(struct.pack(">I", len(b)) + b for b in bodies))
    lg = LocalLog(str(path))
    assert [e.payload for e in lg.read_committed(0)] == [b"old0", b"old1", b"old2"]
    assert path.read_bytes().startswith(MAGIC)
    lg.close()
