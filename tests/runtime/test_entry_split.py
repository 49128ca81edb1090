"""The asyncio driver (one for every coordinator) splits what it coalesces at the entry limit: many requests' records that
together exceed one replicated entry go as several entries, and every request is answered once
the entry holding its last record commits (one oversized entry used to fail the partition's
append and reload its shard)."""

from __future__ import annotations

import asyncio

from cluster.coordinator_driver import CoordinatorDriver
from cluster.txn_driver import TxnDriver
from cluster.txn_entries import decode_entry
from coordinator import commands as c
from coordinator.config import GroupConfig
from coordinator.errors import ErrorCode
from replication.memory import InMemoryLog
from transactions import commands as tc
from transactions.config import TxnConfig
from transactions.errors import TxnError


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


def test_the_transaction_coordinator_coalesces_and_splits_the_same_way() -> None:
    """One driver under both coordinators: transaction records made while an append is in flight
    leave together, split at the entry limit, in order, and every producer is answered."""
    async def main() -> None:
        log = InMemoryLog("__transaction_state-0")

        async def markers(*_: object) -> tuple[tuple[str, int], ...]:
            return ()

        driver = TxnDriver(TxnConfig(), lambda p: log, 1, lambda: 1_000_000, markers)
        driver.max_entry_bytes = 2_000
        await driver.start()
        for _ in range(100):
            if driver.runtime.shard(0) is not None:
                break
            await asyncio.sleep(0.01)
        requests = [tc.InitProducerId(f"t{i:03}" + "x" * 100, 60_000, fresh_producer_id=i) for i in range(60)]
        responses = await asyncio.gather(*(driver.call(0, r) for r in requests))
        assert [r.error for r in responses] == [TxnError.NONE] * 60
        sizes = [len(e.payload) for e in log.read_committed(0)]
        assert 3 < len(sizes) < 60 and max(sizes) <= 2_000, sizes  # coalesced, then split
        ids = [r.transactional_id for e in log.read_committed(0) for r in decode_entry(e.payload)]
        assert ids == [r.transactional_id for r in requests]  # in the order they were made
        await driver.stop()

    asyncio.run(main())
