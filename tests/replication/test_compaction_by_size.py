"""A journal past ``compaction_bytes`` is compacted at once, even when the entry count and the
interval say not yet, and even outside this node's turn of the split schedule: with large
entries (coalesced commits) a journal, held in memory, grew for ten minutes before."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from replication.raft import RaftTimings
from tests.replication.test_raft import Cluster, append_retrying, distinct, wait_for


def test_a_large_journal_is_compacted_by_size(tmp_path: Path) -> None:
    timings = RaftTimings(compaction_min_entries=10**6, compaction_min_time=3600.0, compaction_split=True,
                          compaction_bytes=1 << 20)

    async def main() -> None:
        c = Cluster(tmp_path, timings=timings)
        c.start(asyncio.get_running_loop())
        try:
            payloads = [b"%03d" % i + b"x" * 100_000 for i in range(30)]  # 3 MB of entries
            for p in payloads:
                await append_retrying(c, p)
            await wait_for(lambda: all(distinct(lg) == payloads for lg in c.logs))
            snapshots = [tmp_path / f"n{i}" / "raft.snapshot" for i in range(3)]
            await wait_for(lambda: all(s.exists() for s in snapshots), 15)
            await wait_for(lambda: all(os.path.getsize(tmp_path / f"n{i}" / "raft.kcj") < 1 << 20 for i in range(3)), 15)
            assert all(distinct(lg) == payloads for lg in c.logs)  # nothing lost by compacting
        finally:
            c.stop()

    asyncio.run(main())
