"""Check-quorum: a Raft leader cut off from its followers (but not from its clients) steps down
within about one election timeout, and the majority side elects a leader and commits.

pysyncobj's default leaderFallbackTimeout of 30 s let the isolated leader keep answering as
leader for 30 s. The cut is injected in the hub (``RaftHub.cut``): messages to and from the
other nodes are dropped both ways while the connections stay up, as a network partition.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from replication.api import NotLeaderError, StaleEpochError
from replication.raft import RaftLog
from tests.replication.test_raft import Cluster, distinct, wait_for


def _cut(c: Cluster, i: int, on: bool) -> None:
    """Cut node ``i`` off from the others (both ways), or heal it."""
    for j, host in enumerate(c.hosts):
        if j == i:
            host.hub.cut = frozenset(a for k, a in enumerate(c.addrs) if k != i) if on else frozenset()
        else:
            host.hub.cut = frozenset({c.addrs[i]}) if on else frozenset()


def test_an_isolated_leader_steps_down_and_the_majority_takes_over(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path)
        c.start(asyncio.get_running_loop())
        try:
            old = await c.leader()
            epoch = old.leader_epoch()
            for i in range(5):
                await old.append(b"before-%d" % i, epoch)
            i_old = c.logs.index(old)
            await wait_for(old.lease_valid, timeout=2.0, what=lambda: "(no lease in a healthy group)")
            others = [lg for k, lg in enumerate(c.logs) if k != i_old]

            def new_leader() -> RaftLog | None:
                return next((lg for lg in others if lg.is_leader()), None)

            cut_at = time.monotonic()
            _cut(c, i_old, True)
            lease_lapsed = new_elected = None
            while new_elected is None and time.monotonic() - cut_at < 3.0:
                if lease_lapsed is None and not old.lease_valid():
                    lease_lapsed = time.monotonic() - cut_at
                if new_leader() is not None:
                    new_elected = time.monotonic() - cut_at
                await asyncio.sleep(0.002)
            assert new_elected is not None, "no leader on the majority side"
            # the old leader stopped answering reads before anyone else could lead
            assert lease_lapsed is not None and lease_lapsed < new_elected, (lease_lapsed, new_elected)
            await wait_for(lambda: not old.is_leader(), timeout=2.0, what=lambda: "(old leader still leads)")
            stepped_down = time.monotonic() - cut_at
            new = new_leader()
            assert new is not None
            for i in range(5):
                await new.append(b"during-%d" % i, new.leader_epoch())
            took_over = time.monotonic() - cut_at
            # the isolated node refuses writes: it is not the leader, whatever it believed
            try:
                await asyncio.wait_for(old.append(b"stale", epoch), 1.0)
                raise AssertionError("the isolated old leader acknowledged a write")
            except (NotLeaderError, StaleEpochError, TimeoutError):
                pass
            _cut(c, i_old, False)
            want = [b"before-%d" % i for i in range(5)] + [b"during-%d" % i for i in range(5)]
            await wait_for(lambda: all([p for p in distinct(lg) if p != b"stale"] == want for lg in c.logs),
                           timeout=15.0, what=lambda: f"{[distinct(lg) for lg in c.logs]}")
            print(f"old leader's lease lapsed after {lease_lapsed:.2f}s, stepped down after {stepped_down:.2f}s; "
                  f"new leader after {new_elected:.2f}s, committed after {took_over:.2f}s")
            assert stepped_down < 2.0
        finally:
            c.stop()

    asyncio.run(main())


def test_a_follower_cut_off_for_a_while_does_not_unseat_the_leader(tmp_path: Path) -> None:
    """Pre-vote and sticky voters: the cut-off follower's timer runs out again and again, but it
    never raises its term (a pre-vote changes no term), so when the link heals the leader it
    would otherwise have deposed with a higher-term RequestVote keeps leading, in its term."""
    async def main() -> None:
        c = Cluster(tmp_path)
        c.start(asyncio.get_running_loop())
        try:
            leader = await c.leader()
            await leader.append(b"a", leader.leader_epoch())
            term = leader.current_term()
            k = next(i for i, lg in enumerate(c.logs) if lg is not leader)
            # the follower to cut off must have heard this leader (and its term) first: the entry
            # commits with the other follower's acknowledgement alone
            await wait_for(lambda: distinct(c.logs[k]) == [b"a"], timeout=5.0, what=lambda: f"{distinct(c.logs[k])}")
            _cut(c, k, True)
            await asyncio.sleep(4.0)  # several election timeouts
            cut_off = c.logs[k]
            assert cut_off.group.prevotes_started >= 2  # it did try
            assert cut_off.current_term() == term  # ...without raising its term
            _cut(c, k, False)
            await leader.append(b"b", leader.leader_epoch())
            await wait_for(lambda: distinct(cut_off) == [b"a", b"b"], timeout=5.0,
                           what=lambda: f"{distinct(cut_off)}")
            await asyncio.sleep(1.5)
            assert leader.is_leader() and leader.current_term() == term
        finally:
            c.stop()

    asyncio.run(main())


def test_the_leaders_successor_takes_over_and_the_cut_off_node_names_it(tmp_path: Path) -> None:
    """Followers' election timeouts are ranked from their leader (replication/raft.py): the
    successor stands first and wins, so a node cut off from the others can tell its clients
    who leads now (``likely_leader``) without hearing it. Three cuts, three right guesses."""
    async def main() -> None:
        c = Cluster(tmp_path)
        c.start(asyncio.get_running_loop())
        try:
            for round_ in range(3):
                old = await c.leader()
                await asyncio.sleep(1.0)  # the followers have heard their new leader
                i_old = c.logs.index(old)
                _cut(c, i_old, True)
                others = [lg for k, lg in enumerate(c.logs) if k != i_old]
                await wait_for(lambda o=old, rest=others: any(lg.is_leader() for lg in rest)  # type: ignore[misc]
                               and not o.is_leader(), timeout=5.0, what=lambda: "(no takeover)")
                new = next(lg for lg in others if lg.is_leader())
                assert new.self_addr == old.group.successor(old.self_addr), (round_, old.self_addr, old.group.order)
                assert old.likely_leader() == new.self_addr
                _cut(c, i_old, False)
                await wait_for(lambda o=old, n=new: o.leader_address() == n.self_addr,  # type: ignore[misc]
                               timeout=10.0,
                               what=lambda: "(the healed node does not follow the new leader)")
                assert old.likely_leader() == new.self_addr  # the known leader, once heard again
        finally:
            c.stop()

    asyncio.run(main())


def test_a_cut_off_leader_names_the_follower_with_the_longer_log(tmp_path: Path) -> None:
    """Raft elects only a node whose log is at least as long as its voters'. When the
    successor fell behind before the leader was cut off (here its link to the leader was
    down while an entry committed through the other follower), the other follower wins, and
    the cut-off leader names it: it remembers what each follower had acknowledged."""
    async def main() -> None:
        c = Cluster(tmp_path)
        c.start(asyncio.get_running_loop())
        try:
            old = await c.leader()
            await asyncio.sleep(1.0)
            i_old = c.logs.index(old)
            succ = old.group.successor(old.self_addr)
            i_succ = c.addrs.index(succ)
            c.hosts[i_old].hub.cut = frozenset({succ})  # the successor misses the next entry
            c.hosts[i_succ].hub.cut = frozenset({old.self_addr})
            await old.append(b"only-one-follower-has-it", old.leader_epoch())
            _cut(c, i_old, True)
            others = [lg for k, lg in enumerate(c.logs) if k != i_old]
            await wait_for(lambda: any(lg.is_leader() for lg in others) and not old.is_leader(), timeout=8.0,
                           what=lambda: "(no takeover)")
            new = next(lg for lg in others if lg.is_leader())
            assert new.self_addr != succ, "the successor's log was shorter: it cannot have won"
            assert old.likely_leader() == new.self_addr
        finally:
            c.stop()

    asyncio.run(main())


def test_an_append_in_flight_at_the_step_down_fails_then_not_at_the_heal(tmp_path: Path) -> None:
    """An entry the cut-off leader proposed cannot commit on its side; its caller (a produce, a
    commit) learns so when the leader steps down, not when the cut heals and the new leader's
    commit index reaches it (a produce to an isolated leader hung for the whole cut)."""

    async def main() -> None:
        c = Cluster(tmp_path)
        c.start(asyncio.get_running_loop())
        try:
            old = await c.leader()
            epoch = old.leader_epoch()
            await old.append(b"before", epoch)
            i_old = c.logs.index(old)
            cut_at = time.monotonic()
            _cut(c, i_old, True)
            try:
                await asyncio.wait_for(old.append(b"during-the-cut", epoch), 6.0)
                raise AssertionError("an isolated leader acknowledged a write")
            except NotLeaderError:
                failed_after = time.monotonic() - cut_at
            except TimeoutError:
                raise AssertionError("the append still hangs 6 s after the cut "
                                     f"(old leader still leads: {old.is_leader()})") from None
            assert not old.is_leader()
            print(f"the in-flight append failed {failed_after:.2f}s after the cut")
            assert failed_after < 2.5, failed_after
            _cut(c, i_old, False)
        finally:
            c.stop()

    asyncio.run(main())


def test_a_group_of_one_node_guesses_no_other_leader(tmp_path: Path) -> None:
    """A one-node Raft cluster (1 to 7 nodes are allowed): before its group has elected itself
    there is nobody else to name (the guess divided by the number of other nodes: zero)."""
    from replication.raft import RaftHost
    from tests.replication.test_raft import TIMINGS, free_port

    async def main() -> None:
        addr = f"127.0.0.1:{free_port()}"
        host = RaftHost("test-secret", TIMINGS, listen=addr)
        from replication.raft.entry_store import EntryStore

        lg = host.add("p0", addr, [], addr, str(tmp_path / "n0"), EntryStore(compact=None, compact_every=10**9))
        assert lg.likely_leader() in (None, addr)  # before the loop runs: not elected yet
        host.start(asyncio.get_running_loop())
        try:
            await wait_for(lambda: lg.is_leader(), 10.0)
            assert lg.likely_leader() is None  # leading itself: no other node is named
        finally:
            host.stop()

    asyncio.run(main())
