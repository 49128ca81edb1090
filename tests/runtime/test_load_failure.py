"""A shard whose load fails is loaded again while its leadership lasts (it used to stay loading
for good: its clients told COORDINATOR_LOAD_IN_PROGRESS until the next leadership change), and a
disk error while loading stops the node instead."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import pytest

from cluster import shard_driver
from cluster.coordinator_driver import CoordinatorDriver
from coordinator import commands as c
from coordinator.config import GroupConfig
from coordinator.errors import ErrorCode
from replication.memory import InMemoryLog


class FlakyLog(InMemoryLog):
    """Its first ``failures`` reads of the committed log raise ``error``."""

    def __init__(self, name: str, error: Exception, failures: int) -> None:
        super().__init__(name)
        self.error, self.failures = error, failures

    def read_committed(self, start: int = 0) -> Iterable[Any]:
        if self.failures > 0:
            self.failures -= 1
            raise self.error
        return super().read_committed(start)


async def _active(driver: CoordinatorDriver, within: float) -> bool:
    for _ in range(int(within / 0.01)):
        if driver.is_active(0):
            return True
        await asyncio.sleep(0.01)
    return False


def test_a_failed_load_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shard_driver, "LOAD_RETRY_S", 0.05)

    async def main() -> None:
        log = FlakyLog("__consumer_offsets-0", RuntimeError("a bad read"), failures=2)
        driver = CoordinatorDriver(GroupConfig(), lambda p: log, 1, lambda: 1_000_000, prereplay_interval_ms=0)
        await driver.start()
        assert await _active(driver, 5.0), "the shard never loaded after its load failed"
        assert log.failures == 0
        ok = await driver.call(0, c.OffsetCommitRequest("g", (("t", (c.PartitionCommit(0, 7),)),)))
        assert [e for _, ps in ok.topics for _, e in ps] == [ErrorCode.NONE]
        await driver.stop()

    asyncio.run(main())


def test_a_disk_error_while_loading_stops_the_node(fail_stops: list[tuple[str, str, int]]) -> None:
    async def main() -> None:
        log = FlakyLog("__consumer_offsets-0", OSError(5, "Input/output error"), failures=1)
        driver = CoordinatorDriver(GroupConfig(), lambda p: log, 1, lambda: 1_000_000, prereplay_interval_ms=0)
        await driver.start()
        for _ in range(100):
            if fail_stops:
                break
            await asyncio.sleep(0.01)
        await driver.stop()

    asyncio.run(main())  # the load task raised FailStopped where the node would have exited
    assert fail_stops and "Input/output error" in fail_stops[0][1]
