"""The drivers tell leadership balancing when a partition must stay where it is
(``CoordinatorLog.set_busy``): a ``__consumer_offsets`` partition while it loads or one of its
groups rebalances (a move would start the rebalance over), a ``__transaction_state`` partition
while it loads or holds open transactions."""

from __future__ import annotations

import asyncio

from cluster.coordinator_driver import CoordinatorDriver
from cluster.txn_driver import TxnDriver
from coordinator.config import GroupConfig
from coordinator.consumer_group.group import ConsumerGroup
from coordinator.consumer_group.group import Member as ConsumerMember
from coordinator.group import ClassicGroup, GroupState
from replication.memory import InMemoryLog
from transactions.config import TxnConfig


async def _until(cond: object) -> None:
    for _ in range(200):
        if cond():  # type: ignore[operator]
            return
        await asyncio.sleep(0.005)
    raise AssertionError("not reached")


def test_an_offsets_partition_is_busy_while_a_group_rebalances() -> None:
    async def main() -> None:
        log = InMemoryLog("__consumer_offsets-0")
        driver = CoordinatorDriver(GroupConfig(), lambda p: log, 1, lambda: 1_000_000, prereplay_interval_ms=0)
        await driver.start()
        await _until(lambda: driver.is_active(0))
        shard = driver.runtime.shard(0)
        assert shard is not None
        assert not log.busy()
        for state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE):
            shard.groups["g"] = ClassicGroup("g", state=state)
            assert log.busy(), state
        shard.groups["g"] = ClassicGroup("g", state=GroupState.STABLE)
        assert not log.busy()
        modern = ConsumerGroup("cg")  # KIP-848: a member whose assignment is not computed yet
        modern.members["m"] = ConsumerMember("m")
        modern.epoch = 1
        shard.consumer_groups["cg"] = modern
        assert log.busy()
        del shard.consumer_groups["cg"]
        log.set_leadership(False, 2)  # not leading it: nothing to keep here
        await _until(lambda: driver.runtime.epoch_of(0) is None)
        assert not log.busy()
        await driver.stop()

    asyncio.run(main())


def test_a_transaction_partition_is_busy_while_it_holds_open_transactions() -> None:
    async def main() -> None:
        log = InMemoryLog("__transaction_state-0")

        async def markers(*_: object) -> tuple[tuple[str, int], ...]:
            return ()

        driver = TxnDriver(TxnConfig(), lambda p: log, 1, lambda: 1_000_000, markers)
        await driver.start()
        await _until(lambda: driver.runtime.shard(0) is not None)
        shard = driver.runtime.shard(0)
        assert shard is not None and not log.busy()
        shard.open = 1
        assert log.busy()
        shard.open = 0
        assert not log.busy()
        await driver.stop()

    asyncio.run(main())
