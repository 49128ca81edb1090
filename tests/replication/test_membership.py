"""A Raft group's membership changed through its own log, one server at a time
(``replication/raft/membership.py``): learners, promotion, removal, the leader's guards, a leader
killed mid-change, configurations kept in snapshots and sent to a new member.

Pure tests of the configuration rules first; then groups of real RaftHosts in this process
(separate ports and data directories), as ``test_raft.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgpack
import pytest

from replication.raft import EntryStore, RaftHost, RaftLog, RaftTimings
from replication.raft import membership as ms
from replication.raft.log import MembershipRefused
from replication.raft.membership import History, Members
from tests.cluster.harness import free_port
from tests.replication.test_raft import wait_for

TIMINGS = RaftTimings(compaction_min_entries=10**6, compaction_min_time=10**6)

# ---------------------------------------------------------------- the rules, pure


def _m(voters: str, learners: str = "") -> Members:
    return Members(frozenset(voters.split()), frozenset(learners.split()))


def test_single_server_changes_and_what_is_not_one() -> None:
    m = _m("a b c")
    added = ms.changed(m, ms.ADD_LEARNER, "d", "hub-d")
    assert isinstance(added, Members) and added.learners == {"d"} and added.hub("d") == "hub-d"
    promoted = ms.changed(added, ms.PROMOTE, "d")
    assert isinstance(promoted, Members) and promoted.voters == {"a", "b", "c", "d"} and not promoted.learners
    removed = ms.changed(promoted, ms.REMOVE, "a")
    assert isinstance(removed, Members) and removed.voters == {"b", "c", "d"}
    assert "member already" in str(ms.changed(m, ms.ADD_LEARNER, "a"))
    assert "not a learner" in str(ms.changed(m, ms.PROMOTE, "a"))
    assert "not a member" in str(ms.changed(m, ms.REMOVE, "z"))
    assert "last voter" in str(ms.changed(_m("a"), ms.REMOVE, "a"))
    assert "unknown" in str(ms.changed(m, "swap", "a"))
    # one member per node: a hub is named once, and needed where members are not named by it
    apart = Members(frozenset({"a:101", "b:201"}), hubs={"a:101": "a:100", "b:201": "b:200"})
    assert "is needed" in str(ms.changed(apart, ms.ADD_LEARNER, "c:301"))
    assert "member a:101's already" in str(ms.changed(apart, ms.ADD_LEARNER, "c:301", "a:100"))
    assert isinstance(ms.changed(apart, ms.ADD_LEARNER, "c:301", "c:300"), Members)


def test_the_leaders_guards() -> None:
    m = _m("a b c", "d")
    ok = {"leader": "a", "own_term_committed": True, "change_pending": False, "learner_caught_up": True}
    assert ms.check_change(m, ms.PROMOTE, "d", **ok) is None
    assert "own term" in str(ms.check_change(m, ms.PROMOTE, "d", **{**ok, "own_term_committed": False}))
    assert "not committed" in str(ms.check_change(m, ms.PROMOTE, "d", **{**ok, "change_pending": True}))
    assert "caught up" in str(ms.check_change(m, ms.PROMOTE, "d", **{**ok, "learner_caught_up": False}))
    assert "hand its leadership over" in str(ms.check_change(m, ms.REMOVE, "a", **ok))
    assert ms.check_change(m, ms.REMOVE, "b", **ok) is None


def test_history_falls_back_when_entries_are_truncated_and_a_snapshot_becomes_the_base() -> None:
    h = History(_m("a b c"))
    assert h.added(5, _m("a b c", "d"))
    assert h.added(9, _m("a b c d"))
    assert h.current == _m("a b c d") and h.at(6) == _m("a b c", "d") and h.at(4) == _m("a b c")
    assert h.truncated(9) and h.current == _m("a b c", "d")
    assert not h.truncated(20)
    h.install(7, _m("a b c", "d"))
    assert not h.added(6, _m("x"))  # the snapshot's own entries, added again with it
    assert h.current == _m("a b c", "d") and h.last_index == 7
    h.added(8, _m("a b c"))
    h.cleared()
    assert h.current == _m("a b c", "d")


def test_entries_are_msgpack_and_a_later_format_is_refused() -> None:
    m = Members(frozenset({"a", "b"}), frozenset({"c"}), {"c": "hub-c", "gone": "x"})
    data = ms.encode(m)
    assert ms.decode(data) == Members(frozenset({"a", "b"}), frozenset({"c"}), {"c": "hub-c"})
    with pytest.raises(ms.NewerMembersError, match="newer release"):
        ms.decode(msgpack.packb({**m.as_dict(), "v": ms.FORMAT + 1}))
    for bad in (b"\xc1", msgpack.packb([1, 2]), msgpack.packb({**m.as_dict(), "voters": []}),
                msgpack.packb({**m.as_dict(), "learners": ["a"]}), b"\x80\x04K\x01."):
        with pytest.raises(ms.MembersError):
            ms.decode(bad)


# ---------------------------------------------------------------- live groups


class Group:
    """One Raft group over RaftHosts of this process; members start, stop and join."""

    def __init__(self, base: Path, n: int = 3, timings: RaftTimings = TIMINGS) -> None:
        self.base = base
        self.timings = timings
        self.addrs = [f"127.0.0.1:{free_port()}" for _ in range(n)]
        self.hosts: dict[str, RaftHost] = {}
        self.logs: dict[str, RaftLog] = {}
        self._cut: set[str] = set()

    def start(self, addr: str, members: Members | None = None, peers: list[str] | None = None) -> RaftLog:
        host = RaftHost("test-secret", self.timings, listen=addr)
        host.balance = False
        peers = [a for a in self.addrs if a != addr] if peers is None else peers
        lg = host.add("p0", addr, peers, self.addrs[0], str(self.base / addr.replace(":", "_")),
                      EntryStore(compact=None, compact_every=10**9), members=members)
        host.start(asyncio.get_running_loop())
        self.hosts[addr], self.logs[addr] = host, lg
        return lg

    def start_all(self) -> None:
        for a in self.addrs:
            self.start(a)

    def join(self) -> tuple[str, RaftLog]:
        """A new member's process: it knows the group's members and is none of them yet."""
        addr = f"127.0.0.1:{free_port()}"
        current = list(self.logs)
        self.addrs.append(addr)
        return addr, self.start(addr, Members(frozenset(current)), peers=current)

    def stop(self, addr: str) -> None:
        self.hosts.pop(addr).stop()
        self.logs.pop(addr)

    def stop_all(self) -> None:
        for a in list(self.hosts):
            self.stop(a)

    def cut(self, addr: str, on: bool = True) -> None:
        """Cut ``addr`` off from every other member (both ways), or heal it; others stay as they are."""
        if on:
            self._cut.add(addr)
        else:
            self._cut.discard(addr)
        for a, host in self.hosts.items():
            host.hub.cut = frozenset(x for x in self.addrs if x != a) if a in self._cut else frozenset(self._cut)

    async def leader(self, among: list[str] | None = None, timeout: float = 10.0) -> RaftLog:
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            for a, lg in self.logs.items():
                if (among is None or a in among) and lg.is_leader():
                    return lg
            await asyncio.sleep(0.01)
        raise AssertionError("no leader elected")

    async def append(self, payload: bytes, among: list[str] | None = None) -> None:
        for _ in range(40):
            lg = await self.leader(among)
            try:
                await asyncio.wait_for(lg.append(payload, lg.leader_epoch()), 5.0)
                return
            except Exception:  # noqa: BLE001 - leadership moved: retried (counted once, see distinct)
                await asyncio.sleep(0.05)
        raise AssertionError("append kept failing")

    async def change(self, op: str, addr: str, hub: str | None = None) -> None:
        """Through whoever leads, retried while the leader is not ready for it (its own term's
        entry not committed yet, the previous change still committing, a learner catching up)."""
        for _ in range(200):
            lg = await self.leader()
            try:
                await asyncio.wait_for(lg.change_members(op, addr, hub), 5.0)
                return
            except MembershipRefused as e:
                if "member already" in str(e) or "not a member" in str(e) and op == ms.REMOVE:
                    return  # made by an earlier try whose answer was lost
                await asyncio.sleep(0.05)
            except Exception:  # noqa: BLE001 - leadership moved meanwhile
                await asyncio.sleep(0.05)
        raise AssertionError(f"{op} {addr} never made")


def _payloads(lg: RaftLog) -> list[bytes]:
    return list(dict.fromkeys(e.payload for e in lg.read_committed(0)))


def test_a_new_member_learns_the_log_as_a_learner_then_votes_once_promoted(tmp_path: Path) -> None:
    async def main() -> None:
        g = Group(tmp_path)
        g.start_all()
        try:
            for i in range(30):
                await g.append(b"e%d" % i)
            d, dlog = g.join()
            await asyncio.sleep(0.5)
            assert _payloads(dlog) == [] and not dlog.is_leader()  # not a member: sent nothing
            await g.change(ms.ADD_LEARNER, d)
            want = [b"e%d" % i for i in range(30)]
            await wait_for(lambda: _payloads(dlog) == want, what=lambda: str(len(_payloads(dlog))))
            assert all(lg.members().learners == {d} for lg in g.logs.values())
            await g.change(ms.PROMOTE, d)
            await wait_for(lambda: all(lg.members().voters == set(g.addrs) for lg in g.logs.values()))
            # four voters: the group commits with one of the first three down (3 of 4), and the
            # new member's acknowledgement is one of those counted
            first = g.addrs[0]
            g.stop(first)
            await g.append(b"after")
            await wait_for(lambda: b"after" in _payloads(dlog))
            others = [a for a in g.logs if a != d]
            g.stop(others[0])  # two of four left: no majority, nothing commits
            lg = next((x for x in g.logs.values() if x.is_leader()), None)
            if lg is not None:
                with pytest.raises(Exception):  # noqa: B017,PT011 - not leader, or the append never commits
                    await asyncio.wait_for(lg.append(b"minority", lg.leader_epoch()), 2.0)
            assert all(b"minority" not in _payloads(x) for x in g.logs.values())
        finally:
            g.stop_all()

    asyncio.run(main())


def test_a_learner_counts_for_no_commit_and_does_not_campaign(tmp_path: Path) -> None:
    async def main() -> None:
        g = Group(tmp_path)
        g.start_all()
        try:
            await g.append(b"first")
            d, dlog = g.join()
            await g.change(ms.ADD_LEARNER, d)
            leader = await g.leader()
            followers = [a for a in g.addrs[:3] if a != leader.self_addr]
            for a in followers:  # the leader keeps only the learner
                g.cut(a)
            with pytest.raises(Exception):  # noqa: B017,PT011 - the learner's acknowledgement does not commit it
                await asyncio.wait_for(leader.append(b"learner-only", leader.leader_epoch()), 2.0)
            assert b"learner-only" not in _payloads(dlog)
            for a in followers:
                g.cut(a, False)
            # the learner, cut off from everyone, never campaigns
            g.cut(d)
            term = dlog.current_term()
            await asyncio.sleep(3 * TIMINGS.raft_max_timeout)
            assert dlog.current_term() == term and not dlog.is_leader()
            assert dlog.group.prevotes_started == 0
        finally:
            g.stop_all()

    asyncio.run(main())


def test_one_change_at_a_time_and_a_leader_does_not_remove_itself(tmp_path: Path) -> None:
    async def main() -> None:
        g = Group(tmp_path)
        g.start_all()
        try:
            await g.append(b"x")
            leader = await g.leader()
            with pytest.raises(MembershipRefused, match="hand its leadership over"):
                await leader.change_members(ms.REMOVE, leader.self_addr)
            followers = [a for a in g.addrs if a != leader.self_addr]
            for a in followers:
                g.cut(a)  # the first change cannot commit
            first = asyncio.ensure_future(leader.change_members(ms.ADD_LEARNER, "127.0.0.1:1"))
            await asyncio.sleep(0.05)
            assert leader.members().learners == {"127.0.0.1:1"}  # in force on the leader at once
            with pytest.raises(MembershipRefused, match="not committed"):
                await leader.change_members(ms.REMOVE, followers[0])
            for a in followers:
                g.cut(a, False)
            try:
                await asyncio.wait_for(first, 10.0)
            except Exception:  # noqa: BLE001 - the leader may have stepped down meanwhile (check-quorum)
                pass
        finally:
            g.stop_all()

    asyncio.run(main())


def test_removing_members_shrinks_the_majority_and_a_removed_member_disturbs_nobody(tmp_path: Path) -> None:
    async def main() -> None:
        g = Group(tmp_path, n=5)
        g.start_all()
        try:
            await g.append(b"five")
            leader = await g.leader()
            gone = [a for a in g.addrs if a != leader.self_addr][:2]
            for a in gone:
                await g.change(ms.REMOVE, a)
            # a removed member is sent nothing from the moment the leader appends its removal, so
            # it never learns of it: it still counts itself a voter of the old configuration
            assert all(g.logs[a].members().voters >= {a} for a in gone)
            rest = [a for a in g.addrs if a not in gone]
            await wait_for(lambda: all(g.logs[a].members().voters == set(rest) for a in rest))
            terms = {a: g.logs[a].current_term() for a in rest}
            # the removed members keep running, cut off: whatever they do, the others' terms stay
            for a in gone:
                g.cut(a)
            await asyncio.sleep(3 * TIMINGS.raft_max_timeout)
            for a in gone:
                g.cut(a, False)
            await asyncio.sleep(3 * TIMINGS.raft_max_timeout)
            assert {a: g.logs[a].current_term() for a in rest} == terms
            # three voters: one down, the other two commit
            other = next(a for a in rest if a != leader.self_addr)
            g.stop(other)
            await g.append(b"three-minus-one", among=[a for a in rest if a != other])
            assert b"three-minus-one" in _payloads(leader)
        finally:
            g.stop_all()

    asyncio.run(main())


def test_the_leader_hands_over_then_is_removed(tmp_path: Path) -> None:
    async def main() -> None:
        g = Group(tmp_path)
        g.start_all()
        try:
            await g.append(b"x")
            old = await g.leader()
            target = next(a for a in g.addrs if a != old.self_addr)
            old.preferred = target
            await wait_for(old.elect_preferred, timeout=5.0)
            await wait_for(lambda: g.logs[target].is_leader(), timeout=10.0)
            await g.change(ms.REMOVE, old.self_addr)
            rest = [a for a in g.addrs if a != old.self_addr]
            await wait_for(lambda: all(g.logs[a].members().voters == set(rest) for a in rest))
            await g.append(b"after", among=rest)
        finally:
            g.stop_all()

    asyncio.run(main())


def test_a_change_interrupted_by_the_leaders_death_completes_or_rolls_back_everywhere(tmp_path: Path) -> None:
    """The leader appends a configuration and dies before it commits: either the survivors
    never saw it (rolled back: the old leader's copy is truncated when it returns) or they
    commit it; never two configurations in force afterwards."""

    async def main() -> None:
        for reached_a_follower in (False, True):
            g = Group(tmp_path / str(reached_a_follower))
            g.start_all()
            try:
                await g.append(b"x")
                leader = await g.leader()
                addr = leader.self_addr
                followers = [a for a in g.addrs if a != addr]
                g.cut(followers[0])
                if not reached_a_follower:
                    g.cut(followers[1])
                change = asyncio.ensure_future(leader.change_members(ms.ADD_LEARNER, "127.0.0.1:1"))
                await asyncio.sleep(0.3)
                g.stop(addr)  # killed mid-change
                change.cancel()
                g.cut(followers[0], False)
                g.cut(followers[1], False)
                await g.append(b"after", among=followers)
                survivors = {a: g.logs[a].members() for a in followers}
                want = {"127.0.0.1:1"} if reached_a_follower else set()
                assert all(m.learners == want for m in survivors.values()), survivors
                back, peer = g.start(addr), g.logs[followers[0]]
                await wait_for(lambda b=back: b"after" in _payloads(b), timeout=15.0)
                await wait_for(lambda b=back, p=peer: b.members() == p.members(), timeout=5.0,
                               what=lambda b=back, p=peer: f"{b.members()} vs {p.members()}")
            finally:
                g.stop_all()

    asyncio.run(main())


def test_configurations_survive_restarts_and_reach_a_new_member_in_a_snapshot(tmp_path: Path) -> None:
    async def main() -> None:
        g = Group(tmp_path, timings=RaftTimings(compaction_min_entries=20, compaction_min_time=1.0))
        g.start_all()
        try:
            d, dlog = g.join()
            await g.change(ms.ADD_LEARNER, d)
            await g.change(ms.PROMOTE, d)
            for i in range(80):  # compacted several times past the configuration entries
                await g.append(b"e%d" % i)
            four = set(g.addrs)
            for a in list(g.logs):
                g.stop(a)
            for a in g.addrs:  # restarted from snapshots and journals
                g.start(a, Members(frozenset(g.addrs[:3])) if a == d else None)
            await g.append(b"again")
            assert all(lg.members().voters == four for lg in g.logs.values())
            e, elog = g.join()
            await g.change(ms.ADD_LEARNER, e)
            await wait_for(lambda: b"again" in _payloads(elog), timeout=15.0)
            assert elog.members().voters == four and elog.members().learners == {e}
        finally:
            g.stop_all()

    asyncio.run(main())


def test_members_named_apart_from_their_nodes_hub_as_in_a_cluster(tmp_path: Path) -> None:
    """As the cluster names them: one hub per node, and in each group a member address of its
    own (``host:raft_port + slot``). An added member's entry carries its node's hub."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        hubs = [f"127.0.0.1:{free_port()}" for _ in range(4)]

        def member(node: int, slot: int) -> str:
            host, port = hubs[node].rsplit(":", 1)
            return f"{host}:{int(port) + 100 + slot}"

        hosts: list[RaftHost] = []
        logs: dict[tuple[int, int], RaftLog] = {}

        def start(node: int, nodes: list[int], joining: bool) -> None:
            host = RaftHost("test-secret", TIMINGS, listen=hubs[node])
            host.balance = False
            for slot in (0, 1):
                peers = [member(n, slot) for n in nodes if n != node]
                names = {member(n, slot): hubs[n] for n in nodes}
                members = Members(frozenset(peers), hubs=names) if joining else None
                logs[(node, slot)] = host.add(f"g{slot}", member(node, slot), peers, member(slot, slot),
                                              str(tmp_path / f"n{node}-g{slot}"),
                                              EntryStore(compact=None, compact_every=10**9), names, members)
            host.start(loop)
            hosts.append(host)

        for node in range(3):
            start(node, [0, 1, 2], joining=False)
        try:
            start(3, [0, 1, 2], joining=True)
            for slot in (0, 1):
                async def leader(slot: int = slot) -> RaftLog:
                    while True:
                        found = [lg for (n, s), lg in logs.items() if s == slot and lg.is_leader()]
                        if found:
                            return found[0]
                        await asyncio.sleep(0.02)

                lg = await asyncio.wait_for(leader(), 10.0)
                await lg.append(b"slot-%d" % slot, lg.leader_epoch())
                for op in (ms.ADD_LEARNER, ms.PROMOTE):
                    for _ in range(100):
                        try:
                            await lg.change_members(op, member(3, slot), hubs[3])
                            break
                        except MembershipRefused:
                            await asyncio.sleep(0.05)
                new = logs[(3, slot)]
                await wait_for(lambda new=new, slot=slot: _payloads(new) == [b"slot-%d" % slot])
                assert new.members().voters == {member(n, slot) for n in range(4)}
                assert new.members().hub(member(3, slot)) == hubs[3]
                assert new.members().hub(member(0, slot)) == hubs[0]
        finally:
            for host in hosts:
                host.stop()

    asyncio.run(main())


def test_a_member_that_missed_a_new_members_arrival_follows_it_once_it_leads(tmp_path: Path) -> None:
    """Raft answers a leader whatever the answering replica's configuration says: a follower cut
    off while D was added and promoted must follow D once D leads (found by a review)."""

    async def main() -> None:
        g = Group(tmp_path)
        g.start_all()
        try:
            await g.append(b"x")
            leader = await g.leader()
            lagger = next(a for a in g.addrs if a != leader.self_addr)
            g.cut(lagger)
            d, dlog = g.join()
            await g.change(ms.ADD_LEARNER, d)
            await wait_for(lambda: b"x" in _payloads(dlog), timeout=15)
            await g.change(ms.PROMOTE, d)
            assert d not in g.logs[lagger].members().all
            leader.preferred = d
            await wait_for(leader.elect_preferred, timeout=5.0)
            await wait_for(dlog.is_leader, timeout=10.0)
            g.cut(lagger, False)
            await g.append(b"after", among=[d])
            await wait_for(lambda: b"after" in _payloads(g.logs[lagger]), timeout=10.0)
            assert g.logs[lagger].members().voters == set(g.addrs)
        finally:
            g.stop_all()

    asyncio.run(main())
