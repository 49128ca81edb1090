"""The asyncio driver splits what it coalesces at the entry limit: many requests' records that
together exceed one replicated entry go as several entries, and every request is answered once
the entry holding its last record commits (one oversized entry used to fail the partition's
append and reload its shard)."""

from __future__ import annotations

import asyncio

from cluster.coordinator_driver import CoordinatorDriver
from coordinator import commands as c
from coordinator.config import GroupConfig
from coordinator.errors import ErrorCode
from replication.memory import InMemoryLog


def test_coalesced_records_past_the_entry_limit_go_as_several_entries() -> None:
    async def main() -> None:
        log = InMemoryLog("__consumer_offsets-0")
        driver = CoordinatorDriver(GroupConfig(), lambda p: log, 1, lambda: 1_000_000, prereplay_interval_ms=0)
        driver.max_entry_bytes = 100_000
        await driver.start()
        for _ in range(100):
            if driver.is_active(0):
                break
            await asyncio.sleep(0.01)
        requests = [c.OffsetCommitRequest(f"g{i}", (("t", tuple(c.PartitionCommit(p, i, metadata="m" * 2000)
                                                                   for p in range(10))),))
                    for i in range(30)]  # 30 x 20 KB, all coalesced into one flush: 600 KB
        responses = await asyncio.gather(*(driver.call(0, r) for r in requests))
        assert all(e == ErrorCode.NONE for resp in responses for _, ps in resp.topics for _, e in ps)
        sizes = [len(e.payload) for e in log.read_committed(0)]
        assert len(sizes) > 2 and max(sizes) <= 100_000, sizes
        assert driver.is_active(0)  # served throughout: no reload
        fetched = await driver.call(0, c.OffsetFetchRequest("g29", (("t", (0, 9)),)))
        assert [f.offset for _, fs in fetched.topics for f in fs] == [29, 29]
        await driver.stop()

    asyncio.run(main())
