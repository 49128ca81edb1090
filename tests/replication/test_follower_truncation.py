"""A follower truncates its log only on a real conflict (Raft §5.3).

pysyncobj 0.3.17 deleted every entry after ``prevLogIdx`` on any AppendEntries, so a delayed or
duplicated one (a resend after a reconnect, the burst when a partition heals) cut entries the
follower had already acknowledged, which the leader may count in a majority: a leader failure
then could lose a commit. These feed one follower group AppendEntries as a leader would send
them, reordered and duplicated, and read its journal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replication.raft import EntryStore, RaftHost, RaftLog, RaftTimings
from tests.cluster.harness import free_port


class Follower:
    def __init__(self, tmp_path: Path) -> None:
        self.me, self.leader, other = (f"127.0.0.1:{free_port()}" for _ in range(3))
        self.host = RaftHost("secret", RaftTimings(), listen=self.me)
        self.lg: RaftLog = self.host.add("p0", self.me, [self.leader, other], self.me, str(tmp_path), EntryStore())
        assert self.lg.transport is not None
        self.node = self.lg.transport._node_of[self.leader]
        self.sent: list[dict[str, Any]] = []
        self.lg.transport.send = lambda node, message: self.sent.append(message) or True  # type: ignore[method-assign]

    def ae(self, term: int, prev: tuple[int, int], entries: list[tuple[int, int]], commit: int) -> dict[str, Any]:
        message = {"type": "append_entries", "term": term, "prevLogIdx": prev[0], "prevLogTerm": prev[1],
                   "entries": [(b"c%d.%d" % (idx, t), idx, t) for idx, t in entries], "commit_index": commit}
        self.lg.group._SyncObj__onMessageReceived(self.node, message)
        return self.sent[-1]

    @property
    def log(self) -> list[tuple[int, int]]:
        journal = self.lg.group.__dict__["_SyncObj__raftLog"]
        return [(idx, term) for _c, idx, term in journal[:]]

    @property
    def commit(self) -> int:
        return int(self.lg.group.__dict__["_SyncObj__raftCommitIndex"])

    def close(self) -> None:
        self.lg.group.__dict__["_SyncObj__raftLog"]._destroy()
        self.host.hub.close()


def test_a_stale_append_entries_does_not_cut_acknowledged_entries(tmp_path: Path) -> None:
    f = Follower(tmp_path)
    try:
        reply = f.ae(1, (1, 0), [(2, 1), (3, 1), (4, 1)], commit=1)
        assert reply["success"] and reply["next_node_idx"] == 5
        assert f.log == [(1, 0), (2, 1), (3, 1), (4, 1)]
        # the same leader's earlier message, delivered late: nothing to delete
        reply = f.ae(1, (1, 0), [(2, 1)], commit=1)
        assert f.log == [(1, 0), (2, 1), (3, 1), (4, 1)]
        assert reply["success"] and reply["next_node_idx"] == 3
        # a late heartbeat (no entries) from before entry 3: still nothing deleted, and the commit
        # index moves only as far as the message covers
        reply = f.ae(1, (2, 1), [], commit=4)
        assert f.log == [(1, 0), (2, 1), (3, 1), (4, 1)] and f.commit == 2
        assert reply["success"] and reply["next_node_idx"] == 3
        # the current heartbeat covers everything
        f.ae(1, (4, 1), [], commit=4)
        assert f.commit == 4
    finally:
        f.close()


def test_a_real_conflict_still_truncates(tmp_path: Path) -> None:
    f = Follower(tmp_path)
    try:
        f.ae(1, (1, 0), [(2, 1), (3, 1), (4, 1)], commit=2)
        # a new leader (term 2) that never had entries 3 and 4 of term 1 overwrites them
        reply = f.ae(2, (2, 1), [(3, 2)], commit=2)
        assert f.log == [(1, 0), (2, 1), (3, 2)]
        assert reply["success"] and reply["next_node_idx"] == 4
        # a duplicate whose first entries are held and whose last conflicts: cut from the conflict
        f.ae(2, (1, 0), [(2, 1), (3, 2), (4, 2)], commit=2)
        reply = f.ae(3, (1, 0), [(2, 1), (3, 2), (4, 3)], commit=2)
        assert f.log == [(1, 0), (2, 1), (3, 2), (4, 3)] and reply["next_node_idx"] == 5
        # an entry the follower does not have yet: the leader is told to go back
        reply = f.ae(3, (9, 3), [(10, 3)], commit=2)
        assert not reply["success"] and f.log == [(1, 0), (2, 1), (3, 2), (4, 3)]
    finally:
        f.close()


def test_no_acknowledged_entry_is_lost_when_messages_are_delayed_duplicated_and_reordered(tmp_path: Path) -> None:
    """Every hub delays (up to 150 ms), duplicates and reorders what it sends while entries are
    appended; then the leader is stopped. The new leader holds every acknowledged entry."""
    import asyncio
    import os

    from replication.api import NotLeaderError, ReplicationError, StaleEpochError
    from replication.link_faults import LinkFaults
    from tests.replication.test_raft import Cluster, distinct, wait_for

    seed = int(os.environ.get("KCOORD_TEST_SEED", "1207"))
    print(f"seed={seed} (KCOORD_TEST_SEED to replay)")

    async def main() -> None:
        c = Cluster(tmp_path)
        c.start(asyncio.get_running_loop())
        acked: list[bytes] = []
        try:
            await c.leader()
            for i, host in enumerate(c.hosts):
                host.hub.faults = LinkFaults(seed + i, delay_s=0.15, hold=0.3, duplicate=0.3)
            for i in range(150):
                payload = b"e%d" % i
                lg = await c.leader()
                try:
                    await asyncio.wait_for(lg.append(payload, lg.leader_epoch()), 5.0)
                    acked.append(payload)
                except (NotLeaderError, StaleEpochError, ReplicationError, TimeoutError):
                    pass  # not acknowledged: may or may not be in the log
            assert len(acked) > 100, f"only {len(acked)} appends acknowledged (seed {seed})"
            old = await c.leader()
            k = c.logs.index(old)
            c.hosts[k].stop()
            rest = [lg for j, lg in enumerate(c.logs) if j != k]

            def leader_of_rest() -> bool:
                return any(lg.is_leader() for lg in rest)

            await wait_for(leader_of_rest, timeout=10.0, what=lambda: f"(seed {seed})")
            new = next(lg for lg in rest if lg.is_leader())
            await new.append(b"after", new.leader_epoch())
            await wait_for(lambda: all(distinct(lg)[-1:] == [b"after"] for lg in rest), timeout=10.0,
                           what=lambda: f"(seed {seed})")
            for lg in rest:
                held = set(distinct(lg))
                lost = [p for p in acked if p not in held]
                assert not lost, f"acknowledged entries lost on {lg.name}: {lost[:5]} (seed {seed})"
        finally:
            c.stop()

    asyncio.run(main())
