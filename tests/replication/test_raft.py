"""The pysyncobj-backed ReplicatedLog: replication, fencing, crash-safe compaction, the secret.

Three RaftHosts run in this process on 127.0.0.1 (separate ports, separate data dirs),
which exercises the real pysyncobj transport and journal.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import shutil
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replication.api import NotLeaderError, StaleEpochError
from replication.raft import EntryStore, RaftHost, RaftLog, RaftTimings
from tests.cluster.harness import free_port

TIMINGS = RaftTimings(compaction_min_entries=50, compaction_min_time=3.0)


class Cluster:
    def __init__(self, base: Path, secret: str = "test-secret", preferred: int = 0,
                 timings: RaftTimings = TIMINGS, store: Callable[[], EntryStore] | None = None) -> None:
        self.timings = timings
        self.store = store or (lambda: EntryStore(compact=None, compact_every=10**9))
        self.base = base
        self.secret = secret
        self.addrs = [f"127.0.0.1:{free_port()}" for _ in range(3)]
        self.preferred = preferred
        self.hosts: list[RaftHost] = []
        self.logs: list[RaftLog] = []

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.hosts, self.logs = [], []
        for i, addr in enumerate(self.addrs):
            host = RaftHost(self.secret, self.timings, listen=addr)
            host.balance = False
            peers = [a for a in self.addrs if a != addr]
            self.logs.append(host.add("p0", addr, peers, self.addrs[self.preferred], str(self.base / f"n{i}"),
                                      self.store()))
            host.start(loop)
            self.hosts.append(host)

    def stop(self) -> None:
        for h in self.hosts:
            h.stop()

    async def leader(self, timeout: float = 10.0) -> RaftLog:
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            for lg in self.logs:
                if lg.is_leader():
                    return lg
            await asyncio.sleep(0.01)
        raise AssertionError("no leader elected")


async def append_retrying(c: Cluster, payload: bytes) -> None:
    """Append through whoever leads; on a starved host leadership can move mid-test (an append
    refused as not-leader or stale never applied, so retrying cannot duplicate it)."""
    for _ in range(20):
        leader = await c.leader()
        try:
            await leader.append(payload, leader.leader_epoch())
            return
        except (NotLeaderError, StaleEpochError):
            await asyncio.sleep(0.05)
    raise AssertionError("append kept failing")


def distinct(lg: RaftLog) -> list[bytes]:
    """Payloads in order, a retried append counted once (a not-leader error can come after the
    entry reached the log, and the next leader may still commit it)."""
    return list(dict.fromkeys(payloads(lg)))


def payloads(lg: RaftLog) -> list[bytes]:
    return [e.payload for e in lg.read_committed(0)]


async def wait_for(cond, timeout: float = 10.0, what=lambda: "") -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not reached {what()}")
        await asyncio.sleep(0.02)


def test_appends_replicate_to_every_node(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path)
        c.start(asyncio.get_running_loop())
        try:
            leader = await c.leader()
            offsets = [await leader.append(b"e%d" % i, leader.leader_epoch()) for i in range(20)]
            assert offsets == list(range(20))
            want = [b"e%d" % i for i in range(20)]
            await wait_for(lambda: all(payloads(lg) == want for lg in c.logs))
        finally:
            c.stop()

    asyncio.run(main())


def test_raft_runs_on_the_loop_with_no_thread_and_nothing_handed_over(tmp_path: Path) -> None:
    """Every group is ticked on the event loop: no Raft thread exists, and an append's answer is
    set by the pass that commits it, with nothing handed over between threads."""

    async def main() -> None:
        before = {t.name for t in threading.enumerate()}
        c = Cluster(tmp_path)
        c.start(asyncio.get_running_loop())
        try:
            threads = {t.name for t in threading.enumerate()} - before
            assert "raft-ticker" not in threads, threads
            leader = await c.leader()
            loop = asyncio.get_running_loop()
            handed_over = 0
            original = loop.call_soon_threadsafe

            def counting(*args: Any, **kwargs: Any) -> Any:
                nonlocal handed_over
                handed_over += 1
                return original(*args, **kwargs)

            loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
            try:
                assert await leader.append(b"x", leader.leader_epoch()) == 0
            finally:
                loop.call_soon_threadsafe = original  # type: ignore[method-assign]
            assert handed_over == 0, handed_over  # the commit's answer never crossed threads
            await wait_for(lambda: all(payloads(lg) == [b"x"] for lg in c.logs))
        finally:
            c.stop()

    asyncio.run(main())


def test_the_loop_driver_stops_from_another_thread(tmp_path: Path) -> None:
    """A node stops its host from an executor thread (cluster/raft_cluster.py): the loop driver
    detaches through the loop and every group closes."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        c = Cluster(tmp_path)
        c.start(loop)
        leader = await c.leader()
        await leader.append(b"x", leader.leader_epoch())
        await loop.run_in_executor(None, c.stop)
        with pytest.raises(OSError):  # the hub's listening socket is closed
            socket.create_connection(("127.0.0.1", int(c.addrs[0].rsplit(":", 1)[1])), timeout=1).close()

    asyncio.run(main())


def test_append_with_a_stale_epoch_is_rejected(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path)
        c.start(asyncio.get_running_loop())
        try:
            leader = await c.leader()
            await leader.append(b"ok", leader.leader_epoch())
            with pytest.raises(StaleEpochError):
                await leader.append(b"stale", leader.leader_epoch() - 1)
            # A stale append that reaches the log anyway is not applied (the fence).
            done: asyncio.Future[object] = asyncio.get_running_loop().create_future()
            leader.group.append(leader.leader_epoch() - 1, b"late",
                                callback=lambda r, e: asyncio.get_running_loop().call_soon_threadsafe(
                                    done.set_result, r) if False else c.hosts[0].call_in_loop(done.set_result, r))
            assert await asyncio.wait_for(done, 5) == -1
            assert payloads(leader) == [b"ok"]
        finally:
            c.stop()

    asyncio.run(main())


def test_full_restart_after_compaction_keeps_every_acknowledged_entry(tmp_path: Path) -> None:
    """Compaction has run on every node, then all three stop without a clean shutdown."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        c = Cluster(tmp_path)
        c.start(loop)
        acked: list[bytes] = []
        try:
            for i in range(400):
                p = b"v%d" % i
                await append_retrying(c, p)
                acked.append(p)
            await wait_for(lambda: all(len(distinct(lg)) == 400 for lg in c.logs))
            await wait_for(lambda: all(os.path.exists(tmp_path / f"n{i}" / "raft.snapshot") for i in range(3)), 20)
        finally:
            c.stop()
        c.start(loop)
        try:
            await c.leader()
            await wait_for(lambda: all(distinct(lg)[:400] == acked for lg in c.logs), 20)
            await append_retrying(c, b"after")
            await wait_for(lambda: all(distinct(lg) == acked + [b"after"] for lg in c.logs), 20)
        finally:
            c.stop()

    asyncio.run(main())


def test_restart_in_the_window_between_snapshot_and_journal_truncation(tmp_path: Path) -> None:
    """The case pysyncobj 0.3.17 gets wrong: the snapshot exists but the journal still starts at
    index 1. Its loader clears the journal and loses the entries after the snapshot; ours keeps them."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        c = Cluster(tmp_path, timings=RaftTimings(compaction_min_entries=10**6, compaction_min_time=3600,
                                                  compaction_split=False))
        c.start(loop)
        a = [b"a%d" % i for i in range(60)]
        b = [b"b%d" % i for i in range(40)]
        try:
            for p in a:
                await append_retrying(c, p)
            await wait_for(lambda: all(distinct(lg) == a for lg in c.logs))
            await asyncio.sleep(0.3)
            for i in range(3):  # journals before compaction: index 1 onwards
                shutil.copy(tmp_path / f"n{i}" / "raft.kcj", tmp_path / f"n{i}" / "journal.before")
            for lg in c.logs:
                lg.group.forceLogCompaction()
            await wait_for(lambda: all(os.path.exists(tmp_path / f"n{i}" / "raft.snapshot") for i in range(3)))
            await asyncio.sleep(0.3)
            for p in b:
                await append_retrying(c, p)
            await wait_for(lambda: all(distinct(lg) == a + b for lg in c.logs))
            await asyncio.sleep(0.3)
        finally:
            c.stop()
        # On every node: the snapshot, next to a journal that still starts at index 1 and runs to the
        # end, which is what a crash between writing the snapshot and truncating the journal leaves.
        for i in range(3):
            journal = tmp_path / f"n{i}" / "raft.kcj"
            before = (tmp_path / f"n{i}" / "journal.before").read_bytes()
            journal.write_bytes(_merge_journals(before, journal.read_bytes()))
        c.start(loop)
        try:
            await c.leader()
            await wait_for(lambda: all(distinct(lg) == a + b for lg in c.logs), 20,
                           lambda: [len(distinct(lg)) for lg in c.logs])
        finally:
            c.stop()

    asyncio.run(main())


def _merge_journals(before: bytes, after: bytes) -> bytes:
    """Entries of ``before`` followed by the entries of ``after`` with a higher index."""
    head = struct.Struct("<IIQQ")  # body length, crc, index, term (replication/journal.py)

    def entries(data: bytes) -> list[tuple[int, bytes]]:
        out, pos = [], 4
        while pos + head.size <= len(data):
            size, _, idx, _ = head.unpack_from(data, pos)
            out.append((idx, data[pos: pos + head.size + size]))
            pos += head.size + size
        return out

    old = entries(before)
    new = entries(after)
    last = old[-1][0]
    assert new[0][0] <= last + 1, "the journals must overlap to make one contiguous journal"
    return before[:4] + b"".join(f for _, f in old) + b"".join(f for i, f in new if i > last)


class _Evil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, (f"touch {self.marker}",))


def test_a_peer_without_the_secret_cannot_make_a_node_load_its_pickle(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path)
        c.start(asyncio.get_running_loop())
        try:
            await c.leader()
            marker = tmp_path / "pwned"
            frame = zlib.compress(pickle.dumps(_Evil(str(marker))), 3)
            for addr in c.addrs:
                host, port = addr.split(":")
                with socket.create_connection((host, int(port)), timeout=2) as s:
                    s.sendall(struct.pack("i", len(frame)) + frame)
                    await asyncio.sleep(0.2)
            await asyncio.sleep(0.5)
            assert not marker.exists(), "the Raft port unpickled an unauthenticated frame"
            await append_retrying(c, b"still-serving")  # the cluster still serves
        finally:
            c.stop()

    asyncio.run(main())


def test_a_host_refuses_to_start_without_a_secret() -> None:
    with pytest.raises(ValueError, match="secret"):
        RaftHost("")


def test_refence_starts_a_new_epoch_that_fences_the_old_one(tmp_path: Path) -> None:
    """After a failed append the driver re-fences: appends of the previous epoch can never apply."""

    async def main() -> None:
        c = Cluster(tmp_path)
        c.start(asyncio.get_running_loop())
        try:
            leader = await c.leader()
            old = leader.leader_epoch()
            await leader.append(b"before", old)
            seen: list[int] = []
            leader.subscribe(lambda change: seen.append(change.epoch))
            assert leader.refence()
            await wait_for(lambda: leader.leader_epoch() == old + 1)
            assert seen[-1] == old + 1
            with pytest.raises(StaleEpochError):
                await leader.append(b"late", old)
            done: asyncio.Future[object] = asyncio.get_running_loop().create_future()
            leader.group.append(old, b"in-flight", callback=lambda r, e: c.hosts[0].call_in_loop(done.set_result, r))
            assert await asyncio.wait_for(done, 5) == -1
            await leader.append(b"after", old + 1)
            assert payloads(leader) == [b"before", b"after"]
        finally:
            c.stop()

    asyncio.run(main())


def test_entry_store_entries_since_detects_compaction_and_snapshot_install() -> None:
    """A follower's pre-replayed image continues from ``entries_since``; once the entries it needs
    live only in the compacted base, it must be told to start over (None)."""
    store = EntryStore(compact=lambda payloads: payloads[-1:], compact_every=4)
    for i in range(3):
        store.apply(1, b"e%d" % i)
    entries, nxt = store.entries_since(0) or ([], -1)
    assert [(e.offset, e.payload) for e in entries] == [(0, b"e0"), (1, b"e1"), (2, b"e2")] and nxt == 3
    assert store.entries_since(3) == ([], 3)
    assert [e.payload for e in (store.entries_since(1) or ([], 0))[0]] == [b"e1", b"e2"]
    store.apply(1, b"e3")  # the 4th entry triggers a compaction into the base
    store.apply(1, b"e4")
    assert store.entries_since(2) is None  # e2, e3 are only in the base now
    assert [e.payload for e in (store.entries_since(4) or ([], 0))[0]] == [b"e4"]
    assert store.entries_since(6) is None  # beyond the end
    everything, nxt = store.entries_since(0) or ([], -1)
    assert [(e.offset, e.payload) for e in everything] == [(-1, b"e3"), (4, b"e4")] and nxt == 5
    other = EntryStore()
    other.restore(store.snapshot())
    assert other.entries_since(4) is None and other.entries_since(5) == ([], 5)


def test_a_host_tells_its_listeners_when_a_group_learns_or_changes_its_leader(tmp_path: Path) -> None:
    """FindCoordinator and topic creation wait for leaders on this event, not on a poll: every
    node hears of the first leader, nothing more while it stays, and the survivors hear of its
    successor when it dies."""
    async def main() -> None:
        c = Cluster(tmp_path)
        c.start(asyncio.get_running_loop())
        seen: list[list[str | None]] = [[] for _ in c.hosts]
        for i, host in enumerate(c.hosts):
            host.on_leader_seen(lambda i=i: seen[i].append(c.logs[i].leader_address()))  # type: ignore[misc]
        try:
            first = await c.leader()
            await wait_for(lambda: all(s and s[-1] == first.self_addr for s in seen), what=lambda: f"{seen}")
            calls = [len(s) for s in seen]
            await asyncio.sleep(1.0)  # heartbeats from the same leader are no news
            assert [len(s) for s in seen] == calls
            k = c.logs.index(first)
            c.hosts[k].stop()
            survivors = [i for i in range(3) if i != k]

            def successor_seen() -> bool:
                leaders = [lg for i, lg in enumerate(c.logs) if i in survivors and lg.is_leader()]
                return bool(leaders) and all(seen[i][-1] == leaders[0].self_addr for i in survivors)

            await wait_for(successor_seen, what=lambda: f"{seen}")
        finally:
            c.stop()

    asyncio.run(main())


def test_the_survivors_elect_once_the_old_leaders_lease_is_over_not_at_the_next_round(tmp_path: Path) -> None:
    """A dropped connection steps the groups that used it at once, and the hastened election
    deadline brings the next round forward. The survivors do not elect before the dead leader's
    lease has run out (they stay sticky for the minimum election timeout after its last
    message: the drop could have been on their side only), but with rounds 1.2 s apart, a
    successor is elected well within a round of that."""
    slow = RaftTimings(raft_min_timeout=3.0, raft_max_timeout=6.0, append_entries_period=0.4, tick_period=1.2,
                       compaction_min_entries=10**9, compaction_min_time=3600.0)

    async def main() -> None:
        c = Cluster(tmp_path, timings=slow)
        c.start(asyncio.get_running_loop())
        try:
            first = await c.leader(timeout=30.0)
            await append_retrying(c, b"before")  # every node knows the leader and is connected to it
            await wait_for(lambda: all(payloads(lg) == [b"before"] for lg in c.logs), timeout=15.0)
            k = c.logs.index(first)
            loop = asyncio.get_running_loop()
            c.hosts[k].stop()
            died = loop.time()
            survivors = [lg for i, lg in enumerate(c.logs) if i != k]
            sticky = max(lg.group.sticky_left() for lg in survivors)  # until both may vote
            await wait_for(lambda: any(lg.is_leader() for lg in survivors), timeout=15.0)
            took = loop.time() - died
            print(f"elected {took:.2f}s after the leader died, {took - sticky:.2f}s after the stickiness")
            assert sticky <= took < sticky + 0.6, f"elected {took:.2f}s after the leader died ({sticky:.2f}s sticky)"
        finally:
            c.stop()

    asyncio.run(main())


def test_the_loop_driver_rearms_after_a_round_due_at_once_under_uvloop(tmp_path: Path) -> None:
    """uvloop answers call_later(0) with a plain Handle (no ``when``): a pass that finds its next
    round already due must still arm the timer without an error in the loop's handler."""
    import uvloop

    async def main() -> None:
        loop = asyncio.get_running_loop()
        errors: list[object] = []
        loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
        c = Cluster(tmp_path)
        c.start(loop)
        try:
            leader = await c.leader()
            ticker = c.hosts[0]._ticker
            assert ticker is not None
            run_pass = ticker.run_pass
            ticker.run_pass = lambda wait=False: None  # type: ignore[method-assign]  # a pass that leaves the round due
            ticker.next_round = 0.0  # due at once: the timer is a call_later(0)
            ticker._on_loop()
            ticker._on_loop()  # re-arming against that timer
            ticker.run_pass = run_pass  # type: ignore[method-assign]
            await asyncio.sleep(0.05)
            await leader.append(b"after", leader.leader_epoch())
            assert errors == []
        finally:
            c.stop()

    uvloop.run(main())


def test_a_leadership_transfer_goes_through_and_ends_the_old_leaders_lease_at_once(tmp_path: Path) -> None:
    """The target's election passes the sticky voters (the old leader among them) in one term,
    and the old leader answers no read under its lease from the moment it sent TimeoutNow."""
    async def main() -> None:
        c = Cluster(tmp_path)
        c.start(asyncio.get_running_loop())
        try:
            old = await c.leader()
            await old.append(b"a", old.leader_epoch())
            await wait_for(old.lease_valid, timeout=2.0, what=lambda: "(no lease in a healthy group)")
            term = old.current_term()
            target = next(lg for lg in c.logs if lg is not old)
            await wait_for(lambda: distinct(target) == [b"a"], timeout=5.0)
            sent = False
            hub = old.host.hub
            send = hub.send

            def sending(peer: str, gid: str, message: Any) -> bool:
                nonlocal sent
                sent = sent or message.get("type") == "timeout_now"
                return send(peer, gid, message)

            hub.send = sending  # type: ignore[method-assign]
            old.preferred = target.self_addr
            old.start_transfer(time.monotonic())
            deadline = time.monotonic() + 3.0
            while not target.is_leader():
                assert not (sent and old.lease_valid()), "a lease after TimeoutNow"
                assert time.monotonic() < deadline, "the transfer did not go through"
                await asyncio.sleep(0.001)
            assert target.current_term() == term + 1  # the transfer's election, not a later one
        finally:
            c.stop()

    asyncio.run(main())
