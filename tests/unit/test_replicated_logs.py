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
