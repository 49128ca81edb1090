"""The sans-IO runtime against a toy node: an in-memory log that commits only when told to.

These pin the runtime's rules: a response leaves only once every record written before it
is committed (reads and no-record writes included); a failed append fails its waiters with
the mapped retriable error and reloads from the committed log; stale epochs change nothing;
unload fails everything with NOT_COORDINATOR; a load keeps Stable groups Stable; timers
fire only when due.
"""

from __future__ import annotations

import itertools
from typing import Any

from coordinator import commands as c
from coordinator.codec import decode_batch, encode_batch
from coordinator.config import GroupConfig
from coordinator.errors import ErrorCode as E
from coordinator.group import GroupState
from coordinator.records import Record
from coordinator.runtime import Append, ContextState, CoordinatorRuntime, GroupsObserved, Reload, Respond

P = 3
CONFIG = GroupConfig(min_session_timeout_ms=10, max_session_timeout_ms=600_000, initial_rebalance_delay_ms=3_000)
PROTOCOLS = (("range", b"meta"),)


class ToyLog:
    """One partition's replicated log: entries are appended, and commit only on demand."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, bytes, int]] = []  # (epoch, payload, runtime end offset)
        self.committed = 0  # number of committed entries

    def append(self, a: Append) -> None:
        self.entries.append((a.epoch, encode_batch(a.records), a.end_offset))

    def committed_records(self) -> list[Record]:
        return [r for _, payload, _ in self.entries[: self.committed] for r in decode_batch(payload)]

    def drop_uncommitted(self) -> None:
        del self.entries[self.committed:]


class Node:
    def __init__(self, log: ToyLog | None = None, epoch: int = 1, now: int = 0, load: bool = True,
                 max_in_flight: int = 1) -> None:
        self.log = log or ToyLog()
        ids = itertools.count(1)
        self.rt = CoordinatorRuntime(CONFIG, new_id=lambda: f"{next(ids)}", max_in_flight=max_in_flight)
        self.epoch = epoch
        self.now = now
        self.responses: dict[int, Any] = {}
        self.reloads: list[Reload] = []
        self.appends: list[Append] = []
        self.observed: list[GroupsObserved] = []
        self._tokens = itertools.count(1)
        if load:
            self.load(epoch)

    # ---------------------------------------------------------------- plumbing

    def run(self, effects: list[Any]) -> list[Any]:
        for e in effects:
            if isinstance(e, Append):
                assert e.partition == P
                self.appends.append(e)
                self.log.append(e)
            elif isinstance(e, Respond):
                assert e.token not in self.responses, f"token {e.token} answered twice"
                self.responses[e.token] = e.response
            elif isinstance(e, Reload):
                self.reloads.append(e)
            elif isinstance(e, GroupsObserved):
                self.observed.append(e)
        return effects

    def load(self, epoch: int) -> None:
        self.epoch = epoch
        self.run(self.rt.begin_load(P, epoch))
        self.run(self.rt.complete_load(P, epoch, self.log.committed_records(), self.now))

    def commit(self, entries: int | None = None) -> None:
        """Commit the next ``entries`` uncommitted entries (all when None) and tell the runtime."""
        target = len(self.log.entries) if entries is None else min(self.log.committed + entries,
                                                                     len(self.log.entries))
        if target <= self.log.committed:
            return
        self.log.committed = target
        epoch, _, end = self.log.entries[target - 1]
        self.run(self.rt.on_committed(P, epoch, end))

    def fail(self, error: E) -> None:
        self.log.drop_uncommitted()
        self.run(self.rt.on_append_failed(P, self.epoch, error))

    def send(self, request: c.Request) -> int:
        token = next(self._tokens)
        self.run(self.rt.submit(P, request, token, self.now))
        return token

    def answer(self, token: int) -> Any:
        assert token in self.responses, f"request {token} is still pending"
        return self.responses[token]

    def advance(self, ms: int) -> None:
        """Move the clock, firing due timers at their deadlines, in order (a driver's real timers)."""
        target = self.now + ms
        while (deadline := self.rt.next_deadline()) is not None and deadline <= target:
            self.now = max(self.now, deadline)
            self.run(self.rt.advance(self.now))
        self.now = target
        self.run(self.rt.advance(self.now))

    @property
    def shard(self) -> Any:
        s = self.rt.shard(P)
        assert s is not None
        return s

    # ---------------------------------------------------------------- requests

    def join(self, group: str = "g", member_id: str = "", session_ms: int = 10_000,
             rebalance_ms: int = 10_000) -> int:
        return self.send(c.JoinGroupRequest(group, member_id, session_ms, rebalance_ms, "consumer", PROTOCOLS,
                                            require_known_member_id=False))

    def offset_commit(self, group: str = "g", offset: int = 10, generation: int = -1,
                      member_id: str = "") -> int:
        return self.send(c.OffsetCommitRequest(group, (("t", (c.PartitionCommit(0, offset),)),),
                                               generation, member_id))

    def fetch(self, group: str = "g") -> int:
        return self.send(c.OffsetFetchRequest(group, (("t", (0,)),)))

    def fetched_offset(self, token: int) -> int:
        return int(self.answer(token).topics[0][1][0].offset)

    def stable_group(self, group: str = "g", n: int = 2, session_ms: int = 10_000) -> tuple[int, list[str]]:
        """n members, Stable, everything committed; returns (generation, [leader, others...])."""
        joins = [self.join(group, session_ms=session_ms) for _ in range(n)]
        for _ in range(10):
            self.advance(CONFIG.initial_rebalance_delay_ms)
            self.commit()
            if all(t in self.responses for t in joins):
                break
        rs = [self.answer(t) for t in joins]
        assert all(r.error == E.NONE for r in rs), rs
        gen, leader = rs[0].generation_id, rs[0].leader
        ids = [r.member_id for r in rs]
        syncs = [self.send(c.SyncGroupRequest(group, gen, m, assignments=tuple((x, x.encode()) for x in ids)
                                              if m == leader else ())) for m in ids]
        self.commit()
        assert all(self.answer(t).error == E.NONE for t in syncs)
        return gen, [leader] + [m for m in ids if m != leader]


# ==================================================================== commit gating


def test_offset_commit_response_waits_for_commit() -> None:
    node = Node()
    t = node.offset_commit(offset=42)
    assert t not in node.responses
    assert node.rt.uncommitted(P) == 1 and node.rt.pending(P) == 1
    node.commit()
    assert node.answer(t).topics == (("t", ((0, E.NONE),)),)
    assert node.rt.uncommitted(P) == 0 and node.rt.pending(P) == 0


def test_sync_group_leader_response_waits_for_commit() -> None:
    node = Node()
    joins = [node.join() for _ in range(2)]
    node.advance(6_000)  # the initial delay, extended once for the second member
    node.commit()
    rs = [node.answer(t) for t in joins]
    gen, leader = rs[0].generation_id, rs[0].leader
    follower = next(r.member_id for r in rs if r.member_id != leader)
    f = node.send(c.SyncGroupRequest("g", gen, follower))
    assert f not in node.responses  # parked until the leader syncs
    ld = node.send(c.SyncGroupRequest("g", gen, leader, assignments=((leader, b"A"), (follower, b"B"))))
    assert node.appends[-1].records[0].value is not None  # the assignment record
    assert f not in node.responses and ld not in node.responses  # gated on the assignment record
    assert node.shard.groups["g"].state is GroupState.STABLE
    node.commit()
    assert node.answer(ld) == c.SyncGroupResponse(E.NONE, b"A", "consumer", "range")
    assert node.answer(f) == c.SyncGroupResponse(E.NONE, b"B", "consumer", "range")


def test_offset_fetch_behind_an_uncommitted_write_waits_for_it() -> None:
    node = Node()
    w = node.offset_commit(offset=7)
    r = node.fetch()
    assert w not in node.responses and r not in node.responses
    node.commit()
    assert list(node.responses) == [w, r]  # in order
    assert node.fetched_offset(r) == 7


def test_heartbeat_and_describe_behind_an_uncommitted_write_wait_for_it() -> None:
    node = Node()
    gen, (leader, follower) = node.stable_group()
    w = node.offset_commit(offset=1, generation=gen, member_id=leader)
    hb = node.send(c.HeartbeatRequest("g", gen, follower))
    d = node.send(c.DescribeGroupsRequest("g"))
    assert not {w, hb, d} & set(node.responses)
    node.commit()
    assert node.answer(hb).error == E.NONE
    assert node.answer(d).state == "Stable"


def test_reads_with_nothing_uncommitted_are_answered_at_once() -> None:
    node = Node()
    w = node.offset_commit(offset=5)
    node.commit()
    r = node.fetch()
    assert node.fetched_offset(r) == 5
    lg = node.send(c.ListGroupsRequest())
    assert node.answer(lg).error == E.NONE
    assert w in node.responses


def test_a_partial_commit_releases_only_what_it_covers() -> None:
    node = Node()
    a = node.offset_commit(offset=1)
    b = node.offset_commit(offset=2)
    read = node.fetch()
    node.commit(1)
    assert a in node.responses and b not in node.responses and read not in node.responses
    node.commit(1)
    assert b in node.responses and node.fetched_offset(read) == 2


def test_commit_notice_beyond_what_was_written_is_clamped() -> None:
    node = Node()
    a = node.offset_commit(offset=1)
    node.run(node.rt.on_committed(P, node.epoch, 1))
    assert a in node.responses
    node.run(node.rt.on_committed(P, node.epoch, 99))  # more than written: clamped
    b = node.offset_commit(offset=2)
    assert b not in node.responses and node.rt.uncommitted(P) == 1


# ==================================================================== group commit


def test_writes_made_while_an_append_is_in_flight_leave_together_when_it_commits() -> None:
    node = Node()
    a = node.offset_commit(offset=1)
    b = node.offset_commit(offset=2)
    c2 = node.offset_commit(group="h", offset=3)
    assert [len(x.records) for x in node.appends] == [1]  # b and c wait in the outbox
    assert node.rt.unsent(P) and node.rt.uncommitted(P) == 3
    node.commit()
    assert a in node.responses and b not in node.responses and c2 not in node.responses
    assert [(len(x.records), x.end_offset) for x in node.appends] == [(1, 1), (2, 3)]
    node.commit()
    assert b in node.responses and c2 in node.responses and not node.rt.unsent(P)


def test_with_two_in_flight_a_second_append_leaves_at_once_and_a_third_waits() -> None:
    node = Node(max_in_flight=2)
    node.offset_commit(offset=1)
    b = node.offset_commit(offset=2)
    node.offset_commit(offset=3)
    node.offset_commit(offset=4)
    assert [x.end_offset for x in node.appends] == [1, 2]
    node.commit(1)
    assert [x.end_offset for x in node.appends] == [1, 2, 4]  # the outbox went when one slot freed
    assert b not in node.responses
    node.commit()
    assert node.rt.uncommitted(P) == 0 and node.rt.pending(P) == 0


def test_a_commit_notice_covers_only_what_was_sent() -> None:
    node = Node()
    node.offset_commit(offset=1)
    b = node.offset_commit(offset=2)  # in the outbox, not in the log
    node.run(node.rt.on_committed(P, node.epoch, 2))
    assert b not in node.responses and node.rt.uncommitted(P) == 1


def test_a_failed_append_drops_the_outbox_with_it() -> None:
    node = Node()
    node.offset_commit(offset=1)
    b = node.offset_commit(offset=2)
    node.fail(E.NOT_LEADER_OR_FOLLOWER)
    assert node.answer(b).topics == (("t", ((0, E.NOT_COORDINATOR),)),)
    assert node.rt.unsent(P) == () and len(node.appends) == 1


# ==================================================================== failed appends and reload


def test_failed_append_not_leader_fails_waiters_with_not_coordinator_and_reloads() -> None:
    node = Node()
    node.offset_commit(offset=1)
    node.commit()
    w = node.offset_commit(offset=2)
    read = node.fetch()
    parked = node.join("other")  # a parked JoinGroup (initial delay) whose group record is uncommitted
    assert not {w, read, parked} & set(node.responses)
    node.fail(E.NOT_LEADER_OR_FOLLOWER)
    assert node.answer(w).topics == (("t", ((0, E.NOT_COORDINATOR),)),)
    assert node.answer(read).error == E.NOT_COORDINATOR
    assert node.answer(parked).error == E.NOT_COORDINATOR
    assert node.reloads == [Reload(P, node.epoch)]
    assert node.rt.state_of(P) is ContextState.LOADING and node.rt.pending(P) == 0


def test_failed_append_timeout_fails_waiters_with_coordinator_not_available() -> None:
    node = Node()
    parked = node.join()
    w = node.offset_commit("g2", offset=3)
    node.fail(E.REQUEST_TIMED_OUT)
    assert node.answer(parked) == c.JoinGroupResponse(E.COORDINATOR_NOT_AVAILABLE)
    assert node.answer(w).topics == (("t", ((0, E.COORDINATOR_NOT_AVAILABLE),)),)
    assert len(node.reloads) == 1


def test_requests_during_reload_get_load_in_progress_but_heartbeats_none() -> None:
    node = Node()
    node.offset_commit()
    node.fail(E.NOT_LEADER_OR_FOLLOWER)
    assert node.answer(node.fetch()).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert node.answer(node.join()).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert node.answer(node.offset_commit()).topics == (("t", ((0, E.COORDINATOR_LOAD_IN_PROGRESS),)),)
    assert node.answer(node.send(c.HeartbeatRequest("g", 1, "m"))).error == E.NONE
    assert node.rt.next_deadline() is None  # a loading partition has no timers


def test_reload_restores_the_committed_state_only() -> None:
    node = Node()
    node.offset_commit(offset=1)
    node.commit()
    node.offset_commit(offset=2)  # never commits
    read = node.fetch()  # sees offset 2, so it is gated behind it
    node.fail(E.REQUEST_TIMED_OUT)
    assert node.answer(read).error == E.COORDINATOR_NOT_AVAILABLE
    node.run(node.rt.complete_load(P, node.epoch, node.log.committed_records(), node.now))
    assert node.rt.state_of(P) is ContextState.ACTIVE
    assert node.fetched_offset(node.fetch()) == 1
    offsets = node.shard.durable_state()[1]
    assert offsets["g"][("t", 0)].offset == 1


# ==================================================================== epochs and unload


def test_stale_epoch_calls_change_nothing() -> None:
    node = Node(epoch=5)
    w = node.offset_commit(offset=1)
    shard = node.shard
    assert node.rt.begin_load(P, 5) == [] and node.rt.begin_load(P, 4) == []
    assert node.rt.complete_load(P, 4, [], node.now) == []
    assert node.rt.complete_load(P, 5, [], node.now) == []  # already active
    assert node.rt.unload(P, 4) == []
    assert node.rt.on_committed(P, 4, 1) == []
    assert node.rt.on_append_failed(P, 4, E.NOT_LEADER_OR_FOLLOWER) == []
    assert node.rt.shard(P) is shard and node.rt.epoch_of(P) == 5
    assert node.rt.state_of(P) is ContextState.ACTIVE
    assert w not in node.responses and node.rt.uncommitted(P) == 1 and node.rt.pending(P) == 1
    node.commit()
    assert node.answer(w).topics == (("t", ((0, E.NONE),)),)


def test_stale_complete_load_after_a_newer_begin_load_is_ignored() -> None:
    node = Node(load=False)
    node.run(node.rt.begin_load(P, 1))
    node.run(node.rt.begin_load(P, 2))
    assert node.rt.complete_load(P, 1, [], 0) == []
    assert node.rt.state_of(P) is ContextState.LOADING
    node.run(node.rt.complete_load(P, 2, [], 0))
    assert node.rt.state_of(P) is ContextState.ACTIVE and node.rt.epoch_of(P) == 2


def test_unload_fails_every_waiter_and_later_requests_get_not_coordinator() -> None:
    node = Node()
    gen, (leader, follower) = node.stable_group()
    w = node.offset_commit(offset=9, generation=gen, member_id=leader)
    rejoin = node.join(member_id=follower)  # parked: the group is now rebalancing
    assert not {w, rejoin} & set(node.responses)
    node.run(node.rt.unload(P, node.epoch + 1))
    assert node.answer(w).topics == (("t", ((0, E.NOT_COORDINATOR),)),)
    assert node.answer(rejoin).error == E.NOT_COORDINATOR
    assert node.rt.state_of(P) is None and node.rt.partitions() == []
    assert node.answer(node.fetch()).error == E.NOT_COORDINATOR
    assert node.answer(node.send(c.HeartbeatRequest("g", gen, leader))).error == E.NOT_COORDINATOR
    assert node.rt.on_committed(P, node.epoch, 99) == []  # a late commit notice goes nowhere


def test_a_newer_begin_load_fails_the_old_leaderships_waiters() -> None:
    node = Node()
    w = node.offset_commit()
    node.run(node.rt.begin_load(P, node.epoch + 1))
    assert node.answer(w).topics == (("t", ((0, E.NOT_COORDINATOR),)),)
    assert node.rt.state_of(P) is ContextState.LOADING


def test_requests_for_a_partition_never_loaded_get_not_coordinator() -> None:
    rt = CoordinatorRuntime(CONFIG)
    [effect] = rt.submit(7, c.OffsetFetchRequest("g", None), "tok", 0)
    assert effect == Respond("tok", c.OffsetFetchResponse(E.NOT_COORDINATOR))
    assert rt.unload(7, 1) == [] and rt.on_committed(7, 1, 1) == [] and rt.next_deadline() is None


# ==================================================================== load keeps groups


def test_load_keeps_stable_groups_stable_and_members_must_heartbeat_within_a_session() -> None:
    first = Node()
    gen, (leader, follower) = first.stable_group(session_ms=10_000)
    first.offset_commit(offset=3, generation=gen, member_id=leader)
    first.commit()
    # Leadership moves: a new node loads the committed log at a later time.
    node = Node(first.log, epoch=2, now=first.now + 60_000)
    assert node.appends == []  # loading writes nothing: no rebalance
    group = node.shard.groups["g"]
    assert group.state is GroupState.STABLE and group.generation_id == gen
    assert group.leader_id == leader and set(group.members) == {leader, follower}
    assert node.fetched_offset(node.fetch()) == 3
    assert node.rt.next_deadline() == node.now + 10_000  # every member's session re-armed at load
    node.advance(9_000)
    assert node.answer(node.send(c.HeartbeatRequest("g", gen, leader))).error == E.NONE
    assert node.shard.groups["g"].state is GroupState.STABLE
    node.advance(1_000)  # the follower never heartbeated within its session: it is removed
    group = node.shard.groups["g"]
    assert set(group.members) == {leader} and group.state is GroupState.PREPARING_REBALANCE
    assert node.answer(node.send(c.HeartbeatRequest("g", gen, leader))).error == E.REBALANCE_IN_PROGRESS


# ==================================================================== timers


def test_timers_fire_only_when_due_and_next_deadline_is_right() -> None:
    node = Node()
    expire_at = CONFIG.offsets_retention_check_interval_ms
    assert node.rt.next_deadline() == expire_at  # the offset-expiry job, armed at load
    j = node.join(session_ms=10_000, rebalance_ms=5_000)
    node.commit()
    assert node.rt.next_deadline() == 3_000  # the initial rebalance delay
    node.advance(2_999)
    assert j not in node.responses
    assert node.rt.next_deadline() == 3_000
    node.advance(1)
    assert node.answer(j).error == E.NONE
    # The join completed: next, the sync deadline (rebalance timeout) and the session timeout.
    assert node.rt.next_deadline() == 3_000 + 5_000
    assert node.rt.advance(node.now) == []  # nothing else is due now
    node.advance(4_999)
    assert node.shard.groups["g"].state is GroupState.COMPLETING_REBALANCE
    node.advance(1)  # the leader never synced: removed, and the group is empty again
    assert node.shard.groups["g"].state is GroupState.EMPTY
    assert node.rt.next_deadline() == expire_at


def test_next_deadline_is_the_earliest_over_active_partitions_only() -> None:
    rt = CoordinatorRuntime(CONFIG)
    rt.begin_load(1, 1)
    rt.complete_load(1, 1, [], 100)
    rt.begin_load(2, 1)
    assert rt.next_deadline() == 100 + CONFIG.offsets_retention_check_interval_ms
    rt.complete_load(2, 1, [], 50)
    assert rt.next_deadline() == 50 + CONFIG.offsets_retention_check_interval_ms
    rt.unload(2, 2)
    assert rt.next_deadline() == 100 + CONFIG.offsets_retention_check_interval_ms


# ==================================================================== group census (metrics from events)


def views(node: Node) -> list[tuple[str, str | None, int, bool]]:
    """What the runtime reported since the last call: (group, state, members, reset)."""
    got = [(v.group_id, v.state, v.members, o.reset) for o in node.observed for v in o.groups]
    got += [("*", None, 0, True) for o in node.observed if o.reset and not o.groups]
    node.observed.clear()
    return got


def test_the_runtime_reports_a_groups_changes_and_only_its_changes() -> None:
    node = Node()
    assert views(node) == [("*", None, 0, True)]  # loaded an empty partition
    node.stable_group("g", n=2, session_ms=1_000)
    seen = views(node)
    assert seen[0] == ("g", "PreparingRebalance", 1, False)
    assert seen[-1] == ("g", "Stable", 2, False)
    gen, leader = node.shard.groups["g"].generation_id, next(iter(node.shard.groups["g"].members))
    node.send(c.HeartbeatRequest("g", gen, leader))
    node.offset_commit("g", 5, gen, leader)
    node.commit()
    assert views(node) == []  # a heartbeat and a commit changed neither state nor members
    node.advance(1_500)  # both sessions expire: the group empties
    assert views(node)[-1] == ("g", "Empty", 0, False)
    node.run(node.rt.unload(P, node.epoch + 1))
    assert views(node) == [("*", None, 0, True)]


def test_a_load_reports_every_group_it_rebuilt() -> None:
    first = Node()
    first.stable_group("a")
    first.stable_group("b", n=1)
    node = Node(first.log, epoch=2, now=first.now)
    assert sorted(views(node)) == [("a", "Stable", 2, True), ("b", "Stable", 1, True)]
