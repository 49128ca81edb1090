"""The driver answers a loaded group's requests only while the partition's log holds a leader
lease: a coordinator cut off from the other nodes stops serving its members (NOT_COORDINATOR,
so they look the coordinator up again) before another node can have taken the partition over,
instead of answering heartbeats, fetches and commits from state that is no longer current."""

from __future__ import annotations

import asyncio

from cluster.coordinator_driver import CoordinatorDriver
from coordinator import commands as c
from coordinator.config import GroupConfig
from coordinator.errors import ErrorCode
from replication.memory import InMemoryLog


class LeasedLog(InMemoryLog):
    lease = True

    def lease_valid(self) -> bool:
        return self.lease


def test_requests_are_refused_while_the_lease_has_lapsed() -> None:
    async def main() -> None:
        log = LeasedLog("__consumer_offsets-0")
        driver = CoordinatorDriver(GroupConfig(), lambda p: log, 1, lambda: 1_000_000, prereplay_interval_ms=0)
        await driver.start()
        for _ in range(100):
            if driver.is_active(0):
                break
            await asyncio.sleep(0.01)
        commit = c.OffsetCommitRequest("g", (("t", (c.PartitionCommit(0, 7),)),))
        ok = await driver.call(0, commit)
        assert [e for _, ps in ok.topics for _, e in ps] == [ErrorCode.NONE]
        log.lease = False
        fetched = await driver.call(0, c.OffsetFetchRequest("g", (("t", (0,)),)))
        assert fetched.error is ErrorCode.NOT_COORDINATOR
        refused = await driver.call(0, commit)
        assert [e for _, ps in refused.topics for _, e in ps] == [ErrorCode.NOT_COORDINATOR]
        log.lease = True
        fetched = await driver.call(0, c.OffsetFetchRequest("g", (("t", (0,)),)))
        assert [f.offset for _, fs in fetched.topics for f in fs] == [7]
        await driver.stop()

    asyncio.run(main())
