"""Property tests: random client workloads against the sans-IO runtime with a late-committing log.

A ``World`` drives one ``CoordinatorRuntime`` (partition 0) like a node would, except that the
log commits only when an op says so, appends can fail (the shard is reloaded from the
committed prefix), and the clock moves only when an op says so. After every op it checks:

(a) replaying every record appended so far (round-tripped through the codec's bytes) into a
    fresh shard gives the live shard's durable state, and every Stable group reloads with the
    same generation, leader, member ids and assignments;
(b) within one shard incarnation a group's generation never decreases;
(c) a Stable (or CompletingRebalance) group has exactly one leader, a current member, and its
    durable assignments name only current members;
(d) no response is released while a record written before it was produced is uncommitted
    (the gate each completion needs is recorded when the shard produces it, and checked
    against the driver's own committed offset when the Respond effect arrives);
plus: every token is answered at most once, and at the end of an example every token is
answered or parked in the shard; after a long quiet period every token is answered.

``test_gate_check_catches_early_release`` shows check (d) failing against a runtime whose
``_apply`` releases responses at once.

Examples are derandomized (reproducible in CI); set ``KCOORD_PROPERTY_RANDOM=1`` to explore
with fresh seeds and ``KCOORD_PROPERTY_EXAMPLES=N`` to run more.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator import commands as c
from coordinator.codec import decode_record, encode_key, encode_value
from coordinator.config import GroupConfig
from coordinator.errors import ErrorCode, map_append_error
from coordinator.group import ClassicGroup, GroupState
from coordinator.records import GroupMetadataValue, Record
from coordinator.runtime import Append, CoordinatorRuntime, Reload, Respond
from coordinator.shard import GroupCoordinatorShard
from coordinator.timers import heartbeat_key

from .harness import consumer_subscription

P = 0
GROUPS = ("g0", "g1", "g2")
INSTANCES = ("i0", "i1", "i2")
TOPICS = ("t0", "t1", "t2")
PROTOCOL_SETS: tuple[tuple[tuple[str, bytes], ...], ...] = (
    (("range", consumer_subscription("t0")), ("roundrobin", consumer_subscription("t0"))),
    (("roundrobin", consumer_subscription("t1")),),
    (("range", consumer_subscription("t0", "t1")),),
    (("sticky", b"not-a-subscription"),),
)
SESSIONS = (6_000, 10_000, 30_000)
REBALANCES = (3_000, 10_000, 30_000)
SLEEPS = (1, 500, 1_000, 3_000, 3_000, 3_000, 6_000, 6_000, 10_000, 30_000, 300_000)

BASE_CONFIG = GroupConfig(
    min_session_timeout_ms=10,
    max_session_timeout_ms=600_000,
    initial_rebalance_delay_ms=3_000,
    offsets_retention_ms=120_000,
    offsets_retention_check_interval_ms=40_000,
)


def roundtrip(record: Record) -> Record:
    return decode_record(encode_key(record), encode_value(record))


class World:
    """A node's driver around one partition, with a manually committed in-memory log."""

    def __init__(self, config: GroupConfig = BASE_CONFIG, runtime: CoordinatorRuntime | None = None) -> None:
        self.config = config
        ids = itertools.count(1)
        self.rt = runtime or CoordinatorRuntime(config, new_id=lambda: f"{next(ids):04d}")
        self.now = 0
        self.epoch = 1
        self.committed_log: list[Record] = []  # records of earlier incarnations + committed ones
        self.pending: list[Append] = []  # appended by this incarnation, not yet committed
        self.written = 0  # this incarnation's offsets, as the runtime counts them
        self.committed = 0
        self.tokens = itertools.count(1)
        self.requests: dict[int, c.Request] = {}
        self.responses: dict[int, c.Response] = {}
        self.gates: dict[Any, int] = {}  # token -> offset that must commit before its response
        self.failed_with: dict[int, ErrorCode] = {}  # tokens failed by a failed append
        self.known: dict[str, list[str]] = {g: [] for g in GROUPS}
        self.member_gen: dict[tuple[str, str], int] = {}
        self.seen_gen: dict[str, tuple[ClassicGroup, int]] = {}
        self._handle(self.rt.begin_load(P, self.epoch))
        self._complete_load()

    # ---------------------------------------------------------------- plumbing

    @property
    def shard(self) -> GroupCoordinatorShard:
        s = self.rt.shard(P)
        assert s is not None
        return s

    @property
    def log(self) -> list[Record]:
        # The runtime's outbox too: the live shard has applied it, the next Append carries it.
        return self.committed_log + [r for a in self.pending for r in a.records] + list(self.rt.unsent(P))

    def _complete_load(self) -> None:
        self.pending, self.written, self.committed = [], 0, 0
        self.seen_gen.clear()
        self._handle(self.rt.complete_load(P, self.epoch, list(self.committed_log), self.now))
        self._instrument(self.shard)

    def _instrument(self, shard: GroupCoordinatorShard) -> None:
        """Record, for every completion the shard produces, the offset its records end at."""
        handle, fire_due = shard.handle, shard.fire_due

        def note(result: Any) -> Any:
            if result is not None:
                # The runtime has not counted this result's records yet.
                gate = self.committed + self.rt.uncommitted(P) + len(result.records)
                for token, _ in result.completions:
                    self.gates[token] = gate
            return result

        shard.handle = lambda request, token, now_ms: note(handle(request, token, now_ms))  # type: ignore[method-assign]
        shard.fire_due = lambda now_ms: note(fire_due(now_ms))  # type: ignore[method-assign]

    def _handle(self, effects: list[Any]) -> None:
        reload = None
        for e in effects:
            if isinstance(e, Append):
                assert e.partition == P and e.epoch == self.epoch
                assert e.end_offset == self.written + len(e.records), (e.end_offset, self.written)
                self.written = e.end_offset
                self.pending.append(Append(e.partition, e.epoch, tuple(roundtrip(r) for r in e.records),
                                           e.end_offset))
            elif isinstance(e, Respond):
                self._on_respond(e)
            elif isinstance(e, Reload):
                assert e.partition == P and e.epoch == self.epoch
                reload = e
        if reload is not None:
            self._complete_load()

    def _on_respond(self, e: Respond) -> None:
        token = e.token
        assert token in self.requests, f"response for unknown token {token}"
        assert token not in self.responses, f"token {token} answered twice"
        self.responses[token] = e.response
        if token in self.failed_with:
            assert e.response == c.error_response(self.requests[token], self.failed_with[token])
            return
        assert token in self.gates, f"token {token} answered with a response the shard never produced"
        gate = self.gates.pop(token)
        assert self.committed >= gate, (
            f"response to token {token} released before its records committed: "
            f"committed={self.committed} < gate={gate} ({e.response})")
        self._learn(self.requests[token], e.response)

    def _learn(self, request: c.Request, response: c.Response) -> None:
        if isinstance(request, c.JoinGroupRequest) and isinstance(response, c.JoinGroupResponse):
            g = request.group_id
            if response.error in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED) and response.member_id:
                if response.member_id not in self.known[g]:
                    self.known[g].append(response.member_id)
            if response.error == ErrorCode.NONE:
                self.member_gen[(g, response.member_id)] = response.generation_id

    # ---------------------------------------------------------------- actions

    def submit(self, request: c.Request) -> int:
        token = next(self.tokens)
        self.requests[token] = request
        self._handle(self.rt.submit(P, request, token, self.now))
        return token

    def commit(self, count: int | None = None) -> None:
        """Commit the first ``count`` pending appends (when None: all, including those the
        runtime sends from its outbox as earlier ones commit)."""
        if count is None:
            while self.pending:
                self.commit(len(self.pending))
            return
        n = len(self.pending) if count is None else min(count, len(self.pending))
        if n == 0:
            return
        done, self.pending = self.pending[:n], self.pending[n:]
        for a in done:
            self.committed_log.extend(a.records)
        self.committed = done[-1].end_offset
        self._handle(self.rt.on_committed(P, self.epoch, self.committed))

    def fail(self, error: ErrorCode) -> None:
        """The log rejects the pending appends: they are gone, the shard is reloaded."""
        if not self.pending:
            return
        outstanding = [t for t in self.requests if t not in self.responses]
        for t in outstanding:
            self.failed_with[t] = map_append_error(error)
        self.pending = []
        self._handle(self.rt.on_append_failed(P, self.epoch, error))
        assert all(t in self.responses for t in outstanding), "a waiter survived a failed append"

    def sleep(self, ms: int) -> None:
        target = self.now + ms
        while True:
            deadline = self.rt.next_deadline()
            if deadline is None or deadline > target:
                break
            self.now = max(self.now, deadline)
            self._handle(self.rt.advance(self.now))
        self.now = target
        self._handle(self.rt.advance(self.now))

    # ---------------------------------------------------------------- checks

    def check(self) -> None:
        shard = self.shard
        live_groups, live_offsets = shard.durable_state()
        # (a) replay of the bytes of everything appended so far = the live durable state
        fresh, _ = GroupCoordinatorShard.load([roundtrip(r) for r in self.log], self.now, self.config)
        fresh_groups, fresh_offsets = fresh.durable_state()
        assert fresh_offsets == live_offsets
        assert fresh_groups == live_groups
        for gid, group in shard.groups.items():
            assert group.state is not GroupState.DEAD
            # (b) generations never go backwards while this shard lives
            prev = self.seen_gen.get(gid)
            if prev is not None and prev[0] is group:
                assert group.generation_id >= prev[1], (gid, prev[1], group.generation_id)
            self.seen_gen[gid] = (group, group.generation_id)
            # (c) one leader, a current member; static ids map to their members
            if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                assert group.members, gid
                assert group.leader_id in group.members, (gid, group.leader_id, list(group.members))
            if group.is_in(GroupState.EMPTY):
                assert not group.members
            for instance, member_id in group.static_members.items():
                assert group.members[member_id].group_instance_id == instance
            assert group.pending_sync_members <= set(group.members)
            # a member that is not parked can still expire (else a departed member, and its
            # group, would live forever); so can a pending (KIP-394) member id
            for member in group.members.values():
                if member.awaiting_join is None and member.awaiting_sync is None:
                    assert heartbeat_key(gid, member.member_id) in shard.timers, (
                        f"member {member.member_id} of {gid} ({group.state.value}) has no session timer")
            for member_id in group.pending_join_members:
                assert heartbeat_key(gid, member_id) in shard.timers, (gid, member_id)
            if group.is_in(GroupState.STABLE):
                durable = live_groups.get(gid)
                assert isinstance(durable, GroupMetadataValue), f"Stable group {gid} has no record"
                assert durable.generation == group.generation_id
                assert durable.leader == group.leader_id
                assert [m.member_id for m in durable.members] == list(group.members)
                assert {m.member_id: m.assignment for m in durable.members} == {
                    m.member_id: m.assignment for m in group.members.values()}
                reloaded = fresh.groups[gid]
                assert reloaded.state is GroupState.STABLE
                assert reloaded.generation_id == group.generation_id
                assert reloaded.leader_id == group.leader_id
                assert list(reloaded.members) == list(group.members)
                assert {m: x.assignment for m, x in reloaded.members.items()} == {
                    m: x.assignment for m, x in group.members.items()}
        assert self.rt.uncommitted(P) == self.written + len(self.rt.unsent(P)) - self.committed

    def check_end(self) -> None:
        """Once all is committed, every token is answered or parked; after a long quiet
        period (every timer has fired), every token is answered."""
        self.commit()
        parked = set(self.shard.parked_tokens())
        for token in self.requests:
            assert token in self.responses or token in parked, f"token {token} hangs: {self.requests[token]}"
        assert self.rt.pending(P) == len([t for t in self.requests if t not in self.responses])
        for _ in range(40):
            self.sleep(100_000)
            self.commit()
            self.check()
        hung = {t: self.requests[t] for t in self.requests if t not in self.responses}
        assert not hung, f"requests never answered: {hung}"


# ==================================================================== ops

def _pick(items: list[str], idx: int) -> str | None:
    return items[-1 - idx % len(items)] if items else None


class Runner:
    def __init__(self, world: World) -> None:
        self.w = world

    def member(self, g: str, sel: int) -> str:
        """-1: an id never handed out; 0: the leader; 1-2: a current member; 3+: an id some
        response handed out (recent ones first), current or not."""
        if sel < 0:
            return "ghost"
        group = self.w.shard.groups.get(g)
        live = list(group.members) if group is not None else []
        if sel == 0 and group is not None and group.leader_id is not None:
            return group.leader_id
        if sel <= 2 and live:
            return live[sel % len(live)]
        return _pick(self.w.known[g], sel) or ""

    def op_clients(self, g: str, protos: int, mask: int) -> None:
        """Current members of ``g`` (those whose position is in ``mask``; all when it is 0) take
        their natural next step, as clients would; the others only heartbeat (a Java client's
        heartbeat thread keeps going while its application or assignor is slow)."""
        group = self.w.shard.groups.get(g)
        if group is None:
            return
        for pending in sorted(group.pending_join_members):  # rejoin with the id MEMBER_ID_REQUIRED gave
            self.w.submit(c.JoinGroupRequest(g, pending, 10_000, 10_000, "consumer", PROTOCOL_SETS[protos],
                                             client_id="client", client_host="/10.0.0.1"))
            group = self.w.shard.groups.get(g)
            if group is None:
                return
        for i, member in enumerate(list(group.members.values())):
            if member.member_id not in group.members:
                continue
            if mask and not mask >> i & 1:
                if member.awaiting_join is None and member.awaiting_sync is None:
                    self.w.submit(c.HeartbeatRequest(g, group.generation_id, member.member_id,
                                                     member.group_instance_id))
            elif group.is_in(GroupState.PREPARING_REBALANCE) and member.awaiting_join is None:
                self.w.submit(c.JoinGroupRequest(
                    g, member.member_id, member.session_timeout_ms, member.rebalance_timeout_ms,
                    group.protocol_type or "consumer", PROTOCOL_SETS[protos], member.group_instance_id,
                    "client", "/10.0.0.1"))
            elif group.is_in(GroupState.COMPLETING_REBALANCE) and member.awaiting_sync is None:
                assignments = tuple((m, f"assign:{m}".encode()) for m in group.members) \
                    if group.is_leader(member.member_id) else ()
                self.w.submit(c.SyncGroupRequest(g, group.generation_id, member.member_id,
                                                 member.group_instance_id, assignments=assignments))
            elif group.is_in(GroupState.STABLE):
                self.w.submit(c.HeartbeatRequest(g, group.generation_id, member.member_id,
                                                 member.group_instance_id))
            group = self.w.shard.groups.get(g)
            if group is None:
                return

    def generation(self, g: str, member_id: str, how: str) -> int:
        group = self.w.shard.groups.get(g)
        live = group.generation_id if group is not None else 0
        if how == "mine":
            return self.w.member_gen.get((g, member_id), live)
        if how == "live":
            return live
        return live - 1

    def run(self, op: tuple[Any, ...]) -> None:
        kind, *args = op
        getattr(self, "op_" + kind)(*args)

    def op_join(self, g: str, sel: int | None, version: int, instance: str | None, protos: int,
                ptype: str, session: int, rebalance: int) -> None:
        member_id = "" if sel is None else self.member(g, sel)
        if instance is not None and version < 4:
            version = 4  # group.instance.id exists from JoinGroup v5 on
        self.w.submit(c.JoinGroupRequest(
            group_id=g, member_id=member_id, session_timeout_ms=session, rebalance_timeout_ms=rebalance,
            protocol_type=ptype, protocols=PROTOCOL_SETS[protos], group_instance_id=instance,
            client_id="client", client_host="/10.0.0.1",
            require_known_member_id=version >= 4, supports_skip_assignment=version >= 9))

    def op_sync(self, g: str, sel: int, gen: str, instance: str | None, assign: bool,
                ghost_assignment: bool, wrong_protocol: bool) -> None:
        member_id = self.member(g, sel)
        group = self.w.shard.groups.get(g)
        assignments: tuple[tuple[str, bytes], ...] = ()
        if assign:
            ids = list(group.members) if group is not None else list(self.w.known[g])
            if ghost_assignment:
                ids.append("ghost")
            assignments = tuple((m, f"assign:{m}".encode()) for m in ids)
        self.w.submit(c.SyncGroupRequest(
            g, self.generation(g, member_id, gen), member_id, instance,
            "connect" if wrong_protocol else None, None, assignments))

    def op_heartbeat(self, g: str, sel: int, gen: str, instance: str | None) -> None:
        member_id = self.member(g, sel)
        self.w.submit(c.HeartbeatRequest(g, self.generation(g, member_id, gen), member_id, instance))

    def op_leave(self, g: str, who: tuple[tuple[int | None, str | None], ...]) -> None:
        members = tuple(c.LeaveMember("" if sel is None else self.member(g, sel), instance)
                        for sel, instance in who)
        self.w.submit(c.LeaveGroupRequest(g, members))

    def op_commit_offsets(self, g: str, sel: int | None, gen: str, instance: str | None,
                          offsets: tuple[tuple[str, int, int], ...], retention: bool, leader_epoch: int) -> None:
        if sel is None:
            member_id, generation = "", -1
            instance = None
        else:
            member_id = self.member(g, sel)
            generation = self.generation(g, member_id, gen)
        by_topic: dict[str, list[c.PartitionCommit]] = {}
        for topic, partition, offset in offsets:
            # Retention (v2-4) and leader epochs (v6+) never meet in one request.
            by_topic.setdefault(topic, []).append(c.PartitionCommit(
                partition, offset, leader_epoch=-1 if retention else leader_epoch, metadata="m"))
        self.w.submit(c.OffsetCommitRequest(
            g, tuple((t, tuple(ps)) for t, ps in by_topic.items()), generation, member_id, instance,
            30_000 if retention else -1))

    def op_fetch(self, g: str, all_topics: bool) -> None:
        topics = None if all_topics else tuple((t, (0, 1)) for t in TOPICS)
        self.w.submit(c.OffsetFetchRequest(g, topics))

    def op_describe(self, g: str) -> None:
        self.w.submit(c.DescribeGroupsRequest(g))

    def op_list(self) -> None:
        self.w.submit(c.ListGroupsRequest())

    def op_delete_offsets(self, g: str, topics: tuple[str, ...]) -> None:
        self.w.submit(c.OffsetDeleteRequest(g, tuple((t, (0, 1)) for t in topics)))

    def op_delete_groups(self, groups: tuple[str, ...]) -> None:
        self.w.submit(c.DeleteGroupsRequest(groups))

    def op_sleep(self, ms: int) -> None:
        self.w.sleep(ms)

    def op_sleep_to_deadline(self) -> None:
        deadline = self.w.rt.next_deadline()
        if deadline is not None and deadline > self.w.now:
            self.w.sleep(deadline - self.w.now)

    def op_log_commit(self, count: int | None) -> None:
        self.w.commit(count)

    def op_log_fail(self, error: ErrorCode) -> None:
        self.w.fail(error)


groups = st.sampled_from(GROUPS[:1] * 4 + GROUPS[1:])
member_sel = st.integers(min_value=-1, max_value=5)
instances = st.one_of(st.none(), st.none(), st.sampled_from(INSTANCES))
gens = st.sampled_from(("mine", "mine", "live", "stale"))

join_op = st.tuples(
    st.just("join"), groups, st.one_of(st.none(), st.none(), st.integers(0, 5)), st.sampled_from((3, 4, 9)),
    instances,
    st.sampled_from((0, 0, 0, 1, 2, 3)), st.sampled_from(("consumer",) * 5 + ("connect",)),
    st.sampled_from(SESSIONS), st.sampled_from(REBALANCES))
sync_op = st.tuples(st.just("sync"), groups, member_sel, gens, instances, st.booleans(),
                    st.booleans(), st.sampled_from((False,) * 7 + (True,)))
heartbeat_op = st.tuples(st.just("heartbeat"), groups, member_sel, gens, instances)
leave_op = st.tuples(st.just("leave"), groups, st.lists(
    st.tuples(st.one_of(st.none(), member_sel), instances), min_size=1, max_size=2).map(tuple))
commit_offsets_op = st.tuples(
    st.just("commit_offsets"), groups, st.one_of(st.none(), member_sel), gens, instances,
    st.lists(st.tuples(st.sampled_from(TOPICS), st.integers(0, 1), st.integers(0, 1000)),
             min_size=1, max_size=3).map(tuple),
    st.sampled_from((False,) * 4 + (True,)), st.sampled_from((-1, 0, 7)))
clients_op = st.tuples(st.just("clients"), groups, st.sampled_from((0, 0, 0, 1, 2)),
                       st.sampled_from((0, 0, 1, 2, 3, 4, 5, 6)))
ops = st.one_of(
    join_op, join_op, join_op, join_op, join_op,
    sync_op, sync_op,
    clients_op, clients_op, clients_op, clients_op, clients_op,
    heartbeat_op,
    leave_op,
    commit_offsets_op,
    st.tuples(st.just("fetch"), groups, st.booleans()),
    st.tuples(st.just("describe"), groups),
    st.tuples(st.just("list")),
    st.tuples(st.just("delete_offsets"), groups, st.lists(st.sampled_from(TOPICS), min_size=1, max_size=2)
              .map(tuple)),
    st.tuples(st.just("delete_groups"), st.lists(st.sampled_from(GROUPS + ("nope",)), min_size=1, max_size=2)
              .map(tuple)),
    st.tuples(st.just("sleep"), st.sampled_from(SLEEPS)),
    st.tuples(st.just("sleep_to_deadline")),
    st.tuples(st.just("log_commit"), st.one_of(st.none(), st.integers(1, 3))),
    st.tuples(st.just("log_commit"), st.none()),
    st.tuples(st.just("log_commit"), st.none()),
    st.tuples(st.just("sleep"), st.sampled_from(SLEEPS)),
)
rare_ops = st.tuples(st.just("log_fail"), st.sampled_from(
    (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT)))
all_ops = st.one_of(ops, ops, ops, ops, ops, ops, ops, ops, rare_ops)
configs = st.sampled_from((BASE_CONFIG, BASE_CONFIG, GroupConfig(
    min_session_timeout_ms=10, max_session_timeout_ms=600_000, initial_rebalance_delay_ms=0, max_size=2,
    offsets_retention_ms=120_000, offsets_retention_check_interval_ms=40_000)))

EXAMPLES = int(os.environ.get("KCOORD_PROPERTY_EXAMPLES", "200"))
RANDOM = os.environ.get("KCOORD_PROPERTY_RANDOM") == "1"


def run_ops(config: GroupConfig, op_list: list[tuple[Any, ...]], runtime: CoordinatorRuntime | None = None) -> World:
    world = World(config, runtime)
    runner = Runner(world)
    world.check()
    for op in op_list:
        runner.run(op)
        world.check()
    world.check_end()
    return world


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(configs, st.lists(all_ops, min_size=20, max_size=100))
def test_random_workloads_keep_the_invariants(config: GroupConfig, op_list: list[tuple[Any, ...]]) -> None:
    run_ops(config, op_list)


# ==================================================================== the checker itself

EARLY_RELEASE_SCRIPT: list[tuple[Any, ...]] = [
    ("commit_offsets", "g0", None, "live", None, (("t0", 0, 5),), False, -1),
]


def test_script_passes_on_the_real_runtime() -> None:
    world = run_ops(BASE_CONFIG, EARLY_RELEASE_SCRIPT)
    assert world.committed_log[0].value is not None  # the commit, before expiry tombstoned it


def test_gate_check_catches_early_release(monkeypatch: pytest.MonkeyPatch) -> None:
    """Check (d) is not vacuous: a runtime that releases responses at once is caught."""

    def broken_apply(self: CoordinatorRuntime, partition: int, ctx: Any, result: Any) -> list[Any]:
        effects: list[Any] = self._write(partition, ctx, result.records)
        for token, response in result.completions:
            if ctx.outstanding.pop(token, None) is not None:
                effects.append(Respond(token, response))  # released before its records commit
        return effects

    monkeypatch.setattr(CoordinatorRuntime, "_apply", broken_apply)
    with pytest.raises(AssertionError, match="released before its records committed"):
        run_ops(BASE_CONFIG, EARLY_RELEASE_SCRIPT)


def test_gate_check_catches_a_read_overtaking_a_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """A runtime that gates only responses with records of their own lets a read overtake an
    uncommitted write; the checker sees it."""

    def leaky_apply(self: CoordinatorRuntime, partition: int, ctx: Any, result: Any) -> list[Any]:
        effects: list[Any] = self._write(partition, ctx, result.records)
        for token, response in result.completions:
            if token not in ctx.outstanding:
                continue
            if not result.records:
                del ctx.outstanding[token]
                effects.append(Respond(token, response))
            else:
                ctx.gated.append((ctx.written, token, response))
        return effects

    monkeypatch.setattr(CoordinatorRuntime, "_apply", leaky_apply)
    script = EARLY_RELEASE_SCRIPT + [("fetch", "g0", True)]
    with pytest.raises(AssertionError, match="released before its records committed"):
        run_ops(BASE_CONFIG, script)


def test_regression_a_parked_sync_answered_by_a_rebalance_rearms_the_session() -> None:
    """Found while writing these properties (classic_groups.prepare_rebalance): a member whose session
    timer fired while its SyncGroup was parked (ignored: it is waiting) was answered
    REBALANCE_IN_PROGRESS without re-arming the timer, so it could never expire; an absent
    static member then kept its group in PreparingRebalance forever. Kafka's
    propagateAssignment re-arms it."""
    script: list[tuple[Any, ...]] = [
        ("join", "g0", None, 9, "i0", 0, "consumer", 6000, 30000),
        ("join", "g0", None, 9, "i1", 0, "consumer", 6000, 30000),
        ("sleep", 6000),  # the join completes: generation 1, leader i0
        ("clients", "g0", 0, 2),  # i1 syncs and waits for the leader; the leader only heartbeats
        ("sleep", 6000),  # i1's session fires while parked; then the leader's: it leaves, rebalance
    ]
    world = run_ops(BASE_CONFIG, script)  # the session-timer check fails without the fix
    assert "g0" not in world.shard.groups  # everyone expired; the empty group was cleaned up
