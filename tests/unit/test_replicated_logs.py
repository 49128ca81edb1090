"""InMemoryLog and LocalLog against the ReplicatedLog contract."""

from __future__ import annotations

import asyncio
import os

import pytest

from replication.api import LeadershipChange, NotLeaderError, ReplicationError, StaleEpochError
from replication.local import LocalLog
from replication.memory import InMemoryLog


def test_in_memory_auto_commit_and_leadership() -> None:
    log = InMemoryLog("p0")
    events: list[LeadershipChange] = []
    log.subscribe(events.append)
    assert events == [LeadershipChange("p0", True, 1)]

    async def run() -> None:
        assert await log.append(b"a", 1) == 0
        assert await log.append(b"b", 1) == 1
        with pytest.raises(StaleEpochError):
            await log.append(b"c", 2)
        log.set_leadership(False)
        with pytest.raises(NotLeaderError):
            await log.append(b"c", 1)

    asyncio.run(run())
    assert log.committed_offset() == 2
    assert [e.payload for e in log.read_committed()] == [b"a", b"b"]
    assert events[-1] == LeadershipChange("p0", False, 1) and log.leader_epoch() == -1


def test_in_memory_manual_commit() -> None:
    async def run() -> None:
        log = InMemoryLog("p1", auto_commit=False)
        t1 = asyncio.create_task(log.append(b"x", 1))
        t2 = asyncio.create_task(log.append(b"y", 1))
        await asyncio.sleep(0)
        assert not t1.done() and log.committed_offset() == 0 and list(log.read_committed()) == []
        log.commit(1)
        assert await t1 == 0 and not t2.done()
        log.fail_pending()
        with pytest.raises(ReplicationError):
            await t2
        assert [e.payload for e in log.read_committed()] == [b"x"] and log.end_offset() == 1

    asyncio.run(run())


def test_local_log_reopen_and_torn_tail(tmp_path) -> None:
    path = str(tmp_path / "p" / "log")

    async def fill() -> None:
        log = LocalLog(path)
        for i in range(5):
            assert await log.append(b"e%d" % i, 1) == i
        with pytest.raises(StaleEpochError):
            await log.append(b"bad", 7)
        log.close()

    asyncio.run(fill())
    size = os.path.getsize(path)
    with open(path, "ab") as fh:
        fh.write(b"\x00\x00\x01\x00partial")  # a record cut short by a crash
    log2 = LocalLog(path)
    events: list[LeadershipChange] = []
    log2.subscribe(events.append)
    assert events == [LeadershipChange("log", True, 1)]
    assert os.path.getsize(path) == size
    assert [(e.offset, e.epoch, e.payload) for e in log2.read_committed(3)] == [(3, 1, b"e3"), (4, 1, b"e4")]
    assert asyncio.run(log2.append(b"e5", 1)) == 5
    log2.close()
    assert LocalLog(path).committed_offset() == 6


def _latest_per_key(payloads: list[bytes]) -> list[bytes]:
    """A compaction: the last payload per key (``key=value``)."""
    latest: dict[bytes, bytes] = {}
    for p in payloads:
        key = p.split(b"=")[0]
        latest.pop(key, None)
        latest[key] = p
    return list(latest.values())


def test_local_log_compacts_past_its_byte_bound_and_keeps_nothing_in_memory(tmp_path) -> None:
    """A single node's offsets log used to keep every entry in memory and grow its file for
    ever (RSS 221 -> 593 MB in 2 minutes of commits). Now it is read back from the file at a
    load and rewritten as its compaction plus what arrived meanwhile."""
    path = str(tmp_path / "log")
    bound = 64 * 1024
    log = LocalLog(path, compact=_latest_per_key, compact_bytes=bound)

    async def fill() -> None:
        for i in range(20_000):  # 20 keys, each rewritten 1,000 times: ~700 KB of appends
            await log.append(b"k%d=%d" % (i % 20, i) + b"." * 20, 1)
            if i % 500 == 0:
                await asyncio.sleep(0.01)  # let a running compaction finish and swap in
        while log._compacting is not None:
            await asyncio.sleep(0.01)

    asyncio.run(fill())
    assert all(len(v) <= 1 for v in vars(log).values() if isinstance(v, list | dict))  # no entries held
    assert os.path.getsize(path) < 2 * bound  # not the ~700 KB appended
    assert not os.path.exists(path + ".compact")
    state = dict(e.payload.split(b"=") for e in log.read_committed(0))
    expect = {b"k%d" % k: b"%d" % (19_980 + k) + b"." * 20 for k in range(20)}
    assert state == expect
    n = log.committed_offset()
    log.close()
    again = LocalLog(path, compact=_latest_per_key, compact_bytes=bound)
    assert again.committed_offset() == n
    assert dict(e.payload.split(b"=") for e in again.read_committed(0)) == expect
    again.close()


def test_local_log_compaction_that_cannot_write_stops_the_node(tmp_path, monkeypatch, fail_stops) -> None:
    import replication.local as local_mod

    log = LocalLog(str(tmp_path / "log"), compact=_latest_per_key, compact_bytes=1024)
    real_open = open

    def no_space(file, mode="r", *a, **k):  # type: ignore[no-untyped-def]
        if str(file).endswith(".compact") and "w" in mode:
            raise OSError(28, "No space left on device")
        return real_open(file, mode, *a, **k)

    monkeypatch.setattr(local_mod, "open", no_space, raising=False)

    async def fill() -> None:
        for i in range(200):
            await log.append(b"k=%d" % i + b"." * 20, 1)
        for _ in range(100):
            if fail_stops:
                break
            await asyncio.sleep(0.01)

    asyncio.run(fill())
    assert fail_stops and fail_stops[0][0] == "local_log" and "compaction" in fail_stops[0][1]
    assert [e.payload for e in log.read_committed(0)][-1].startswith(b"k=199")  # the log is whole


@pytest.mark.parametrize("tail", [b"\0" * 5000, b"\0" * 3, bytes(range(256)) * 20],
                         ids=["zeros", "a few zeros", "garbage"])
def test_local_log_ends_at_what_a_power_loss_left_after_its_records(tmp_path, tail: bytes) -> None:
    """Zeros or garbage after the last whole record (the pages a power loss did not write) are a
    torn tail: no phantom empty records from zeros, no refusal to start."""
    path = str(tmp_path / "p" / "log")

    async def fill() -> None:
        log = LocalLog(path)
        for i in range(3):
            await log.append(b"e%d" % i, 1)
        log.close()

    asyncio.run(fill())
    size = os.path.getsize(path)
    with open(path, "ab") as fh:
        fh.write(tail)
    log2 = LocalLog(path)
    assert os.path.getsize(path) == size and log2.committed_offset() == 3
    assert [e.payload for e in log2.read_committed(0)] == [b"e0", b"e1", b"e2"]
    assert asyncio.run(log2.append(b"e3", 1)) == 3
    log2.close()
