"""Applying an entry never raises into pysyncobj: an entry the state machine refuses is skipped
on every replica and its caller told, and the partition keeps going. (pysyncobj retried such an
entry on every tick after dropping its callbacks: the partition froze and its callers hung.)
An OSError while applying (a fault of the machine, not of the entry) stops the node instead."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from replication import failstop
from replication.api import LogEntry, ReplicationError
from replication.raft import EntryStore
from tests.replication.test_raft import TIMINGS, Cluster, wait_for


class Picky(EntryStore):
    """Refuses b"poison" (a bug or a bad entry) and hits a disk fault on b"enospc"."""

    def apply(self, epoch: int, payload: bytes) -> int:
        if payload == b"poison":
            raise ValueError("cannot apply this entry")
        if payload == b"enospc":
            raise OSError(28, "No space left on device")
        return super().apply(epoch, payload)


def _payloads(entries: list[LogEntry]) -> list[bytes]:
    return [e.payload for e in entries]


def test_an_entry_that_cannot_be_applied_is_skipped_and_the_partition_goes_on(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path, timings=TIMINGS, store=lambda: Picky(compact=None, compact_every=10**9))
        c.start(asyncio.get_running_loop())
        try:
            leader = await c.leader()
            await leader.append(b"before", leader.leader_epoch())
            with pytest.raises(ReplicationError, match="could not be applied"):
                await asyncio.wait_for(leader.append(b"poison", leader.leader_epoch()), 10)
            offset = await asyncio.wait_for(leader.append(b"after", leader.leader_epoch()), 10)
            assert offset == 1
            want = [b"before", b"after"]
            await wait_for(lambda: all(_payloads(lg.read_committed(0)) == want for lg in c.logs))
        finally:
            c.stop()

    asyncio.run(main())


def test_an_os_error_while_applying_stops_the_node(tmp_path: Path) -> None:
    stopped: list[tuple[str, str, int]] = []
    failstop.set_action(lambda component, reason, code: stopped.append((component, reason, code)))

    async def main() -> None:
        c = Cluster(tmp_path, timings=TIMINGS, store=lambda: Picky(compact=None, compact_every=10**9))
        c.start(asyncio.get_running_loop())
        try:
            leader = await c.leader()
            leader.group.append(leader.leader_epoch(), b"enospc", callback=lambda r, e: None)
            await wait_for(lambda: len(stopped) >= 1)
        finally:
            c.stop()

    try:
        asyncio.run(main())
    finally:
        failstop.reset_action()
    component, reason, code = stopped[0]
    assert component == "raft_apply" and "No space left on device" in reason and code == failstop.EXIT_FAIL_STOP
