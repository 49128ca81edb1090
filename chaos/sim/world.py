"""The deterministic simulator: 3 nodes, their real ``CoordinatorRuntime``s, simulated Raft logs,
simulated consumers, one seeded ``random.Random`` and a simulated clock.

A step pops the earliest event (message delivery, replication, coordinator timer, client
wake-up or timeout, election, nemesis) and runs it; the invariants are checked as the
step's effects happen and again at its end. A violation raises ``SimFailure`` carrying the
seed and step, so ``run(seed, steps)`` replays it exactly.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import random
from dataclasses import dataclass, field
from typing import Any

from coordinator import commands as c
from coordinator.config import GroupConfig
from coordinator.errors import ErrorCode
from coordinator.group import GroupState
from coordinator.partitioner import partition_for
from coordinator.records import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, Record, TxnMarkerKey
from coordinator.runtime import Append, ContextState, CoordinatorRuntime, Effect, Reload, Respond
from coordinator.shard import GroupCoordinatorShard, Result

from .bugs import inject
from .client import PROTOCOL_TYPE, PROTOCOLS, TOPIC, Client, InFlight, decode_assignment, range_assign
from .log import Entry, LogInvariantError, Origin, PartitionLog

E = ErrorCode
NODES = (0, 1, 2)
NUM_PARTITIONS = 4
GROUPS = ("orders", "payments", "audit", "billing")
CLIENTS_PER_GROUP = 3
SESSION_MS = 10_000
REBALANCE_MS = 10_000
HEARTBEAT_MS = 3_000
REQUEST_TIMEOUT_MS = 5_000
STEPDOWN_MS = 400  # an isolated leader steps down (check-quorum) before...
ELECTION_MS = (900, 2_000)  # ...the majority elects a new one: no two serving leaders at once

SIM_CONFIG = GroupConfig(
    min_session_timeout_ms=10,
    max_session_timeout_ms=600_000,
    initial_rebalance_delay_ms=300,
    offsets_retention_ms=60_000,
    offsets_retention_check_interval_ms=15_000,
)

Token = tuple[str, int]
TP = tuple[str, int]


class SimFailure(AssertionError):
    def __init__(self, seed: int, step: int, invariant: str, detail: str) -> None:
        self.seed, self.step, self.invariant, self.detail = seed, step, invariant, detail
        super().__init__(f"SIM FAILURE seed={seed} step={step} invariant={invariant}: {detail}\n"
                         f"replay: python -m chaos.sim --seed {seed} --steps {step + 1}")


class Violation(AssertionError):
    def __init__(self, invariant: str, detail: str) -> None:
        self.invariant, self.detail = invariant, detail
        super().__init__(f"{invariant}: {detail}")


@dataclass(slots=True)
class Node:
    nid: int
    alive: bool = True
    isolated: bool = False
    gen: int = 0  # process incarnation
    rt: CoordinatorRuntime | None = None
    believes: dict[int, int] = field(default_factory=dict)  # partition -> epoch it serves at
    inc: dict[int, int] = field(default_factory=dict)  # partition -> runtime context incarnation
    committed_end: dict[int, int] = field(default_factory=dict)  # what we told on_committed
    reload_wait: set[int] = field(default_factory=set)
    view: dict[int, int | None] = field(default_factory=dict)  # partition -> believed leader
    timer_at: int | None = None


@dataclass(frozen=True, slots=True)
class Gate:
    node: int
    gen: int
    partition: int
    inc: int
    offset: int
    response: c.Response


@dataclass(slots=True)
class SimResult:
    seed: int
    steps: int
    now_ms: int
    digest: str
    stats: dict[str, int]


class Simulator:
    def __init__(self, seed: int, bug: str | None = None) -> None:
        self.seed = seed
        self.bug = bug
        self.rng = random.Random(seed)
        self.now = 0
        self.step_no = 0
        self._seq = itertools.count()
        self._events: list[tuple[int, int, str, tuple[Any, ...]]] = []
        self._ids = itertools.count(1)
        self.nodes = {n: Node(n) for n in NODES}
        self.logs = {p: PartitionLog(p, list(NODES)) for p in range(NUM_PARTITIONS)}
        self.repl_pending: set[tuple[int, int]] = set()
        self.noop_index: dict[int, int] = {}
        self.origin_index: dict[tuple[int, Origin], int] = {}
        self.tokens: dict[Token, tuple[str, int, c.Request, int, int]] = {}
        self.gates: dict[Token, Gate] = {}
        self.loss = self.rng.choice((0.0, 0.01, 0.03))
        self.stats: dict[str, int] = {k: 0 for k in (
            "requests", "responses", "lost_messages", "timeouts", "acked_commits", "fetches", "elections",
            "crashes", "isolations", "transfers", "client_crashes", "client_leaves", "reloads",
            "writes", "appends", "append_rejections", "failover_checks", "stable_syncs", "max_generation")}
        # --- the model of the committed logs, and what clients were told
        self.model_offsets: dict[tuple[str, TP], int] = {}
        self.offset_history: dict[tuple[str, TP], set[int]] = {}
        self.last_tombstone: dict[tuple[str, TP], int] = {}
        self.durable_gen: dict[str, int] = {}
        self.gen_leader: dict[tuple[str, int], str] = {}
        self.acked: dict[tuple[str, TP], list[tuple[int, int]]] = {}  # (offset, log index)
        self.observed_fetch: dict[tuple[str, TP], int] = {}
        self.owners: dict[tuple[str, int], dict[TP, str]] = {}
        self.failover_expect: dict[int, dict[str, tuple[int, frozenset[str]]]] = {}
        self.touched: set[int] = set()
        # --- clients
        self.clients: dict[str, Client] = {}
        for g in GROUPS:
            for i in range(CLIENTS_PER_GROUP):
                cid = f"{g}-c{i}"
                static = i == 0 and self.rng.random() < 0.7
                cl = Client(cid, g, f"{g}-i{i}" if static else None, self.rng.choice((4, 9)))
                self.clients[cid] = cl
                self._push(self.rng.randint(0, 500), "wake", (cid, cl.incarnation))
        for n in NODES:
            self._start_node(self.nodes[n])
        for p in range(NUM_PARTITIONS):
            self._elect(p, preferred=p % len(NODES))
        self._push(self.rng.randint(2_000, 5_000), "nemesis", ())

    # ================================================================ plumbing

    def _push(self, delay: int, kind: str, args: tuple[Any, ...]) -> None:
        heapq.heappush(self._events, (self.now + max(delay, 0), next(self._seq), kind, args))

    def _delay(self) -> int:
        return self.rng.randint(1, 40) if self.rng.random() > 0.03 else self.rng.randint(200, 1_500)

    def _lost(self) -> bool:
        if self.loss and self.rng.random() < self.loss:
            self.stats["lost_messages"] += 1
            return True
        return False

    def _fail(self, invariant: str, detail: str) -> None:
        raise Violation(invariant, detail)

    def _start_node(self, node: Node) -> None:
        node.gen += 1
        node.alive = True
        rt = CoordinatorRuntime(SIM_CONFIG, new_id=lambda: f"{next(self._ids):06x}")
        inject(rt, self.bug)
        node.rt = rt
        node.believes.clear()
        node.inc.clear()
        node.committed_end.clear()
        node.reload_wait.clear()
        node.timer_at = None
        for p, log in self.logs.items():
            node.view[p] = log.leader

    def connected(self, n: int) -> bool:
        node = self.nodes[n]
        return node.alive and not node.isolated

    # ================================================================ the run

    def run(self, steps: int) -> SimResult:
        try:
            while self.step_no < steps and self._events:
                t, _, kind, args = heapq.heappop(self._events)
                self.now = max(self.now, t)
                self.touched.clear()
                getattr(self, "_ev_" + kind)(*args)
                self._arm_timers()
                self._check_step()
                self.step_no += 1
            self._check_step(all_partitions=True)
        except (Violation, LogInvariantError) as v:
            inv = v.invariant if isinstance(v, Violation) else "replicated-log"
            raise SimFailure(self.seed, self.step_no, inv, str(v)) from v
        except Exception as exc:  # a crash inside the coordinator is a failure too
            raise SimFailure(self.seed, self.step_no, "exception", f"{type(exc).__name__}: {exc}") from exc
        return SimResult(self.seed, self.step_no, self.now, self.digest(), dict(self.stats))

    def digest(self) -> str:
        h = hashlib.sha256()
        for p, log in sorted(self.logs.items()):
            h.update(repr((p, log.epoch, log.leader, log.committed, log.committed_records())).encode())
        for cid, cl in sorted(self.clients.items()):
            h.update(repr((cid, cl.state, cl.member_id, cl.generation, sorted(cl.positions.items()))).encode())
        h.update(repr((self.now, sorted(self.stats.items()))).encode())
        return h.hexdigest()

    # ================================================================ coordinator effects

    def _handle(self, node: Node, effects: list[Effect]) -> None:
        for e in effects:
            if isinstance(e, Append):
                self._on_append(node, e)
            elif isinstance(e, Respond):
                self._on_respond(node, e)
            elif isinstance(e, Reload):
                self.stats["reloads"] += 1
                node.reload_wait.add(e.partition)
                self._maybe_load(node, e.partition)

    def _on_append(self, node: Node, e: Append) -> None:
        log = self.logs[e.partition]
        self.touched.add(e.partition)
        self.stats["appends"] += 1
        origin: Origin = (node.nid, node.gen, e.epoch, node.inc[e.partition], e.end_offset)
        if self.rng.random() < 0.01 and log.leader == node.nid:
            # The log refused it before appending anything (queue full): a definite failure.
            self.stats["append_rejections"] += 1
            assert node.rt is not None
            self._handle(node, node.rt.on_append_failed(e.partition, e.epoch, E.NOT_ENOUGH_REPLICAS))
            return
        index = len(log.logs[node.nid])
        entry = log.append(node.nid, e.epoch, e.records, origin)
        if entry is None:
            log.local_append(node.nid, e.epoch, e.records, origin)  # a deposed leader, unaware
        else:
            self.origin_index[(e.partition, origin)] = index
            self._replicate_soon(e.partition)

    def _replicate_soon(self, p: int) -> None:
        log = self.logs[p]
        if log.leader is None:
            return
        for f in NODES:
            if f != log.leader and (p, f) not in self.repl_pending:
                self.repl_pending.add((p, f))
                self._push(self._delay(), "repl", (p, f, log.epoch))

    def _on_respond(self, node: Node, e: Respond) -> None:
        token: Token = e.token  # type: ignore[assignment]
        cid, seq, request, _, p = self.tokens.pop(token)
        self.stats["responses"] += 1
        gate = self.gates.pop(token, None)
        produced = gate is not None and gate.response is e.response
        if produced:
            assert gate is not None
            done = node.committed_end.get(p, 0)
            if node.gen != gate.gen or node.inc.get(p) != gate.inc or done < gate.offset:
                self._fail("response-before-commit",
                           f"node {node.nid} released {type(e.response).__name__} for {token} at committed "
                           f"offset {done} < {gate.offset} (records written before it are not committed)")
            self._note_released(node, p, request, e.response, gate)
        if not self._lost():
            self._push(self._delay(), "resp", (cid, seq, e.response))

    def _note_released(self, node: Node, p: int, request: c.Request, response: c.Response, gate: Gate) -> None:
        if isinstance(request, c.OffsetCommitRequest) and isinstance(response, c.OffsetCommitResponse):
            if not all(err == E.NONE for _, ps in response.topics for _, err in ps):
                return
            index = self._entry_holding(p, (node.nid, node.gen, node.believes.get(p, -1), gate.inc), gate.offset)
            log = self.logs[p]
            if index is None or index >= log.committed:
                self._fail("ack-not-committed", f"commit {request} acknowledged but its entry is not committed")
            assert index is not None
            for topic, parts in request.topics:
                for pc in parts:
                    key = (request.group_id, (topic, pc.partition))
                    self.acked.setdefault(key, []).append((pc.offset, index))
                    self.stats["acked_commits"] += 1
        elif isinstance(request, c.OffsetFetchRequest) and isinstance(response, c.OffsetFetchResponse):
            if response.error != E.NONE:
                return
            for topic, fetched in response.topics:
                for f in fetched:
                    key = (request.group_id, (topic, f.partition))
                    if f.offset != -1 and f.offset not in self.offset_history.get(key, ()):
                        self._fail("fetch-not-committed", f"{key} fetched {f.offset}, never committed")
                    floor = self.observed_fetch.get(key, -1)
                    if f.offset < floor:
                        self._fail("offset-regressed", f"{key} served {f.offset} after {floor} with no "
                                   "explicit lower commit or deletion in between")
                    self.observed_fetch[key] = f.offset

    def _entry_holding(self, p: int, incarnation: tuple[int, int, int, int], offset: int) -> int | None:
        """The log index of the entry that carries record ``offset`` of this runtime incarnation:
        the first of its Appends that ends at or after it (the runtime coalesces many requests'
        records into one Append)."""
        ends = [(o[4], i) for (q, o), i in self.origin_index.items() if q == p and o[:4] == incarnation
                and o[4] >= offset]
        return min(ends)[1] if ends else None

    def _instrument(self, node: Node, p: int, shard: GroupCoordinatorShard) -> None:
        """Note, for each completion the shard produces, the offset its records end at."""
        handle, fire_due = shard.handle, shard.fire_due
        rt = node.rt
        assert rt is not None
        inc = node.inc[p]

        def note(result: Result | None) -> Result | None:
            if result is not None:
                self.stats["writes"] += bool(result.records)  # > appends: the runtime coalesced
                gate = node.committed_end.get(p, 0) + rt.uncommitted(p) + len(result.records)
                for token, response in result.completions:
                    self.gates[token] = Gate(node.nid, node.gen, p, inc, gate, response)  # type: ignore[index]
            return result

        def h(request: c.Request, token: Any, now_ms: int) -> Result:
            r = note(handle(request, token, now_ms))
            assert r is not None
            return r

        shard.handle = h  # type: ignore[method-assign]
        shard.fire_due = lambda now_ms: note(fire_due(now_ms))  # type: ignore[method-assign]

    # ================================================================ leadership

    def _elect(self, p: int, preferred: int | None = None) -> None:
        log = self.logs[p]
        if log.leader is not None:
            return
        eligible = [n for n in NODES if self.connected(n)]
        if len(eligible) * 2 <= len(NODES):
            self._push(self.rng.randint(*ELECTION_MS), "elect", (p,))
            return
        candidates = [n for n in eligible if sum(log.up_to_date(n, m) for m in eligible) * 2 > len(NODES)]
        winner = preferred if preferred in candidates else self.rng.choice(candidates)
        epoch = log.elect(winner)
        self.noop_index[p] = len(log.logs[winner]) - 1
        self.stats["elections"] += 1
        self.touched.add(p)
        for n in eligible:
            node = self.nodes[n]
            node.view[p] = winner
            if n != winner and p in node.believes:
                self._lose(node, p)
        node = self.nodes[winner]
        assert node.rt is not None
        node.believes[p] = epoch
        self._handle(node, node.rt.begin_load(p, epoch))
        self._replicate_soon(p)

    def _lose(self, node: Node, p: int) -> None:
        """``node`` stops serving ``p`` (it learnt of a newer epoch, or stepped down)."""
        self._snapshot_for_failover(node, p)
        epoch = node.believes.pop(p)
        node.reload_wait.discard(p)
        assert node.rt is not None
        self._handle(node, node.rt.unload(p, max(epoch, self.logs[p].epoch)))

    def _snapshot_for_failover(self, node: Node, p: int) -> None:
        """Remember the groups of ``p`` that are Stable with every member settled (I6)."""
        if node.rt is None or node.rt.state_of(p) is not ContextState.ACTIVE or p in self.failover_expect:
            return
        shard = node.rt.shard(p)
        assert shard is not None
        log = self.logs[p]
        tail = log.logs[node.nid][log.committed:]
        dirty = {r.key.group for e in tail for r in e.records if isinstance(r.key, GroupMetadataKey)}
        expect: dict[str, tuple[int, frozenset[str]]] = {}
        for gid, group in shard.groups.items():
            if not group.is_in(GroupState.STABLE) or not group.members or gid in dirty:
                continue
            settled = all(any(cl.alive and cl.group == gid and cl.member_id == m and cl.state == "stable"
                              and cl.generation == group.generation_id and cl.hb_ok
                              for cl in self.clients.values()) for m in group.members)
            if settled:
                expect[gid] = (group.generation_id, frozenset(group.members))
        self.failover_expect[p] = expect

    def _maybe_load(self, node: Node, p: int) -> None:
        log = self.logs[p]
        rt = node.rt
        if rt is None or log.leader != node.nid or node.believes.get(p) != log.epoch:
            return
        if rt.state_of(p) is not ContextState.LOADING:
            return
        election = p not in node.reload_wait
        if election and log.committed <= self.noop_index[p]:
            return  # Raft's leader completeness: serve only once its own no-op is committed
        if not election and not log.all_resolved():
            return  # entries of the failed incarnation may still commit: wait for them
        node.reload_wait.discard(p)
        node.inc[p] = node.inc.get(p, 0) + 1
        node.committed_end[p] = 0
        self._handle(node, rt.complete_load(p, log.epoch, log.committed_records(), self.now))
        shard = rt.shard(p)
        if shard is None:
            return
        self._instrument(node, p, shard)
        self._check_acked(p, shard, "after load")
        if election:
            for gid, (gen, members) in self.failover_expect.pop(p, {}).items():
                self.stats["failover_checks"] += 1
                group = shard.groups.get(gid)
                if group is None or not group.is_in(GroupState.STABLE) or group.generation_id != gen \
                        or frozenset(group.members) != members:
                    got = None if group is None else (group.state.value, group.generation_id, sorted(group.members))
                    self._fail("failover-rebalance", f"group {gid} was Stable at generation {gen} with "
                               f"{sorted(members)} before p{p} moved; node {node.nid} loaded {got}")

    def _log_committed(self, p: int, entries: list[Entry]) -> None:
        if not entries:
            return
        log = self.logs[p]
        self.touched.add(p)
        base = log.committed - len(entries)
        for i, entry in enumerate(entries):
            for r in entry.records:
                self._model_apply(r, base + i)
        assert log.leader is not None
        node = self.nodes[log.leader]
        if node.rt is not None and node.rt.state_of(p) is ContextState.ACTIVE and p in node.inc:
            mine = (node.nid, node.gen, log.epoch, node.inc[p])
            ends = [e.origin[4] for e in entries if e.origin is not None and e.origin[:4] == mine]
            if ends:
                node.committed_end[p] = max(ends)
                self._handle(node, node.rt.on_committed(p, log.epoch, max(ends)))
        self._maybe_load(node, p)

    def _model_apply(self, r: Record, index: int) -> None:
        key = r.key
        if isinstance(key, TxnMarkerKey) or r.producer_id >= 0:
            return  # the simulated clients commit no offsets in transactions
        if isinstance(key, OffsetCommitKey):
            k = (key.group, (key.topic, key.partition))
            if r.value is None:
                self.last_tombstone[k] = index
                self.model_offsets.pop(k, None)
                self.observed_fetch.pop(k, None)
            else:
                off = r.value.offset  # type: ignore[union-attr]
                prev = self.model_offsets.get(k)
                if prev is not None and off < prev:
                    self.observed_fetch.pop(k, None)  # an explicit lower commit
                self.model_offsets[k] = off
                self.offset_history.setdefault(k, set()).add(off)
            return
        value = r.value
        if value is None:
            # Deleted: a group created again under the name restarts at generation 0 (as Kafka's
            # cleanupGroupMetadata and DeleteGroups leave it), so the old one's generations go.
            self.durable_gen.pop(key.group, None)
            for gen in [g for g in self.gen_leader if g[0] == key.group]:
                del self.gen_leader[gen]
            for owned in [o for o in self.owners if o[0] == key.group]:
                del self.owners[owned]
            return
        assert isinstance(value, GroupMetadataValue)
        last = self.durable_gen.get(key.group, -1)
        if value.generation < last:
            self._fail("generation-regressed", f"group {key.group}: committed generation {value.generation} "
                       f"after {last}")
        self.durable_gen[key.group] = value.generation
        self.stats["max_generation"] = max(self.stats["max_generation"], value.generation)
        if value.members:
            leader = next((m for m in value.members if m.member_id == value.leader), None)
            if leader is None:
                self._fail("one-leader", f"group {key.group} generation {value.generation}: leader "
                           f"{value.leader} is not a member")
            assert leader is not None
            ident = leader.group_instance_id or leader.member_id
            prev_leader = self.gen_leader.setdefault((key.group, value.generation), ident)
            if prev_leader != ident:
                self._fail("one-leader", f"group {key.group} generation {value.generation} has leaders "
                           f"{prev_leader} and {ident}")

    # ================================================================ invariant checks

    def _acked_floor(self, key: tuple[str, TP]) -> int:
        tomb = self.last_tombstone.get(key, -1)
        return max((off for off, idx in self.acked.get(key, ()) if idx > tomb), default=-1)

    def _check_acked(self, p: int, shard: GroupCoordinatorShard, when: str) -> None:
        for key in self.acked:
            g, (topic, part) = key
            if partition_for(g, NUM_PARTITIONS) != p:
                continue
            floor = self._acked_floor(key)
            if floor < 0:
                continue
            v = shard.offsets.get(g, {}).get((topic, part))
            have = -1 if v is None else v.offset
            if have < floor:
                self._fail("acked-commit-lost", f"{key}: the coordinator would serve {have} {when}, "
                           f"but {floor} was acknowledged")

    def _check_step(self, all_partitions: bool = False) -> None:
        parts = range(NUM_PARTITIONS) if all_partitions else sorted(self.touched)
        for p in parts:
            log = self.logs[p]
            if log.leader is None:
                continue
            node = self.nodes[log.leader]
            if node.rt is None or node.rt.state_of(p) is not ContextState.ACTIVE:
                continue
            shard = node.rt.shard(p)
            assert shard is not None
            self._check_acked(p, shard, "now")
            for gid, group in shard.groups.items():
                if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE) and \
                        (group.leader_id is None or group.leader_id not in group.members):
                    self._fail("one-leader", f"group {gid} is {group.state.value} without a current leader")

    def _arm_timers(self) -> None:
        for node in self.nodes.values():
            if node.rt is None or not node.alive:
                continue
            d = node.rt.next_deadline()
            if d is not None and d != node.timer_at:
                node.timer_at = d
                self._push(d - self.now, "timer", (node.nid, node.gen, d))

    # ================================================================ events: cluster

    def _ev_timer(self, nid: int, gen: int, deadline: int) -> None:
        node = self.nodes[nid]
        if node.gen != gen or node.timer_at != deadline or node.rt is None:
            return
        node.timer_at = None
        self.touched.update(node.believes)
        self._handle(node, node.rt.advance(self.now))

    def _ev_repl(self, p: int, follower: int, epoch: int) -> None:
        self.repl_pending.discard((p, follower))
        log = self.logs[p]
        if log.leader is None or log.epoch != epoch:
            return
        if not (self.connected(log.leader) and self.connected(follower)):
            return  # resent when the follower is back (heal/restart)
        if self._lost():
            self.repl_pending.add((p, follower))
            self._push(self.rng.randint(50, 200), "repl", (p, follower, epoch))  # Raft resends
            return
        log.replicate(follower)
        self._log_committed(p, log.advance_commit())
        if log.match[follower] < len(log.leader_log()):
            self._replicate_soon(p)

    def _ev_elect(self, p: int) -> None:
        self._elect(p)

    def _ev_stepdown(self, nid: int, p: int, epoch: int) -> None:
        node = self.nodes[nid]
        if node.alive and node.believes.get(p) == epoch and (node.isolated or self.logs[p].leader != nid):
            self._lose(node, p)

    def _leader_gone(self, nid: int) -> None:
        for p, log in self.logs.items():
            if log.leader == nid:
                log.step_down()
                self.touched.add(p)
                self._push(self.rng.randint(*ELECTION_MS), "elect", (p,))

    def _rejoin_cluster(self, node: Node) -> None:
        for p, log in self.logs.items():
            node.view[p] = log.leader
            if p in node.believes and (log.leader != node.nid or log.epoch != node.believes[p]):
                self._lose(node, p)
            if log.leader is not None:
                self._replicate_soon(p)
            else:
                self._push(self.rng.randint(*ELECTION_MS), "elect", (p,))

    def _ev_nemesis(self) -> None:
        self._push(self.rng.randint(1_500, 6_000), "nemesis", ())
        faulty = [n for n in self.nodes.values() if not n.alive or n.isolated]
        r = self.rng.random()
        if faulty and r < 0.6:
            node = faulty[0]
            if not node.alive:
                self._start_node(node)
            node.isolated = False
            self._rejoin_cluster(node)
            return
        if not faulty and r < 0.25:
            node = self.nodes[self.rng.choice(NODES)]
            self.stats["crashes"] += 1
            for p in list(node.believes):
                self._snapshot_for_failover(node, p)
            node.alive = False
            node.rt = None
            node.believes.clear()
            self._leader_gone(node.nid)
        elif not faulty and r < 0.45:
            node = self.nodes[self.rng.choice(NODES)]
            self.stats["isolations"] += 1
            for p in list(node.believes):
                self._snapshot_for_failover(node, p)
                self._push(STEPDOWN_MS, "stepdown", (node.nid, p, node.believes[p]))
            node.isolated = True
            self._leader_gone(node.nid)
        elif r < 0.65:
            p = self.rng.randrange(NUM_PARTITIONS)
            log = self.logs[p]
            targets = [n for n in NODES if n != log.leader and self.connected(n)]
            if log.leader is None or not targets or not self.connected(log.leader):
                return
            self.stats["transfers"] += 1
            target = self.rng.choice(targets)
            if self.rng.random() < 0.5:
                log.replicate(target)  # a graceful transfer first brings the target up to date
                self._log_committed(p, log.advance_commit())
            old = self.nodes[log.leader]
            log.step_down()
            if p in old.believes:
                self._lose(old, p)
            self._elect(p, preferred=target)
        elif r < 0.85:
            cl = self.clients[self.rng.choice(sorted(self.clients))]
            if cl.alive:
                self.stats["client_crashes"] += 1
                self._client_down(cl)
        else:
            live = [cl for cl in self.clients.values()
                    if cl.alive and cl.instance is None and cl.state == "stable" and cl.inflight is None]
            if live:
                cl = self.rng.choice(sorted(live, key=lambda x: x.cid))
                self.stats["client_leaves"] += 1
                cl.state = "leave"
                self._client_act(cl)

    # ================================================================ events: clients

    def _client_down(self, cl: Client) -> None:
        cl.alive = False
        cl.state = "dead"
        cl.inflight = None
        cl.incarnation += 1
        self._push(self.rng.randint(2_000, 15_000), "restart", (cl.cid, cl.incarnation))

    def _ev_restart(self, cid: str, incarnation: int) -> None:
        cl = self.clients[cid]
        if cl.incarnation != incarnation or cl.alive:
            return
        cl.alive = True
        cl.state = "join"
        cl.member_id = ""
        cl.generation = -1
        cl.assignment = []
        cl.positions = {}
        cl.coordinator = None
        cl.hb_ok = False
        self._client_act(cl)

    def _ev_wake(self, cid: str, incarnation: int) -> None:
        cl = self.clients[cid]
        if cl.incarnation == incarnation and cl.alive:
            self._client_act(cl)

    def _sleep(self, cl: Client, ms: int) -> None:
        cl.wake_at = self.now + ms
        self._push(ms, "wake", (cl.cid, cl.incarnation))

    def _client_act(self, cl: Client) -> None:
        if not cl.alive or cl.inflight is not None or self.now < cl.wake_at:
            return
        if cl.state == "find" and cl.generation >= 0 and not cl.member_id:
            cl.state = "join"
        if cl.coordinator is None:
            return self._send(cl, "find", self.rng.choice(NODES), None)
        g, mid, inst = cl.group, cl.member_id, cl.instance
        if cl.state in ("join", "find"):
            cl.state = "join"
            req: c.Request = c.JoinGroupRequest(
                g, mid, SESSION_MS, REBALANCE_MS, PROTOCOL_TYPE, PROTOCOLS, inst, cl.cid, "/10.0.0.1",
                require_known_member_id=True, supports_skip_assignment=cl.version >= 9)
            return self._send(cl, "join", cl.coordinator, req)
        if cl.state == "sync":
            assignments: dict[str, bytes] = {}
            if cl.leader == mid and not cl.skip_assignment:
                assignments = range_assign([m.member_id for m in cl.join_members])
            req = c.SyncGroupRequest(g, cl.generation, mid, inst, PROTOCOL_TYPE, "range",
                                     tuple(sorted(assignments.items())))
            return self._send(cl, "sync", cl.coordinator, req)
        if cl.state == "fetch":
            req = c.OffsetFetchRequest(g, ((TOPIC, tuple(p for _, p in cl.assignment)),))
            return self._send(cl, "fetch", cl.coordinator, req)
        if cl.state == "leave":
            req = c.LeaveGroupRequest(g, (c.LeaveMember(mid, inst),))
            return self._send(cl, "leave", cl.coordinator, req)
        if cl.state == "stable":
            if self.now >= cl.next_hb:
                return self._send(cl, "heartbeat", cl.coordinator, c.HeartbeatRequest(g, cl.generation, mid, inst))
            if cl.assignment and self.now >= cl.next_commit:
                for tp in cl.assignment:
                    cl.positions[tp] = cl.positions.get(tp, 0) + self.rng.randint(0, 10)
                commits = tuple(c.PartitionCommit(p, cl.positions[(TOPIC, p)]) for _, p in cl.assignment)
                req = c.OffsetCommitRequest(g, ((TOPIC, commits),), cl.generation, mid, inst)
                return self._send(cl, "commit", cl.coordinator, req)
            nxt = min(cl.next_hb, cl.next_commit) if cl.assignment else cl.next_hb
            self._sleep(cl, max(nxt - self.now, 1))

    def _send(self, cl: Client, kind: str, node: int | None, request: c.Request | None) -> None:
        seq = next(self._seq)
        flight = InFlight(seq, kind, node, request, self.now)
        if isinstance(request, c.OffsetFetchRequest):
            flight.acked_floor = {tp: self._acked_floor((cl.group, tp)) for tp in cl.assignment}
        cl.inflight = flight
        self.stats["requests"] += 1
        timeout = REBALANCE_MS + 5_000 if kind == "join" else REQUEST_TIMEOUT_MS
        self._push(timeout, "timeout", (cl.cid, seq))
        if self._lost():
            return
        if kind == "find":
            self._push(self._delay(), "find", (node, cl.cid, seq, partition_for(cl.group, NUM_PARTITIONS)))
        else:
            self._push(self._delay(), "req", (node, cl.cid, seq, request))

    def _ev_find(self, nid: int, cid: str, seq: int, p: int) -> None:
        node = self.nodes[nid]
        if not node.alive:
            return
        if not self._lost():
            self._push(self._delay(), "resp", (cid, seq, node.view.get(p)))

    def _ev_req(self, nid: int, cid: str, seq: int, request: c.Request) -> None:
        node = self.nodes[nid]
        if not node.alive or node.rt is None:
            return
        p = partition_for(request.group_id, NUM_PARTITIONS)  # type: ignore[union-attr]
        token: Token = (cid, seq)
        self.tokens[token] = (cid, seq, request, nid, p)
        self.touched.add(p)
        self._handle(node, node.rt.submit(p, request, token, self.now))

    def _ev_timeout(self, cid: str, seq: int) -> None:
        cl = self.clients[cid]
        if cl.inflight is None or cl.inflight.seq != seq:
            return
        self.stats["timeouts"] += 1
        kind = cl.inflight.kind
        cl.inflight = None
        cl.coordinator = None
        if kind == "sync":
            cl.state = "join"
        elif kind == "leave":
            self._client_down(cl)
            return
        self._sleep(cl, self.rng.randint(50, 300))

    def _ev_resp(self, cid: str, seq: int, response: Any) -> None:
        cl = self.clients[cid]
        flight = cl.inflight
        if not cl.alive or flight is None or flight.seq != seq:
            return
        cl.inflight = None
        getattr(self, "_on_" + flight.kind)(cl, flight, response)
        if cl.alive and cl.inflight is None and cl.wake_at <= self.now:
            self._client_act(cl)

    # ---------------------------------------------------------------- responses

    def _retriable(self, cl: Client, error: ErrorCode) -> bool:
        if error in (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE):
            cl.coordinator = None
            self._sleep(cl, self.rng.randint(50, 300))
            return True
        if error == E.COORDINATOR_LOAD_IN_PROGRESS:
            self._sleep(cl, self.rng.randint(50, 300))
            return True
        return False

    def _rejoin(self, cl: Client, error: ErrorCode) -> None:
        if error == E.FENCED_INSTANCE_ID:
            self._client_down(cl)  # fatal for a static member, as in the Java client
            return
        if error in (E.UNKNOWN_MEMBER_ID,):
            cl.member_id = ""
        cl.state = "join"
        cl.hb_ok = False

    def _on_find(self, cl: Client, flight: InFlight, leader: int | None) -> None:
        if leader is None:
            self._sleep(cl, self.rng.randint(100, 300))
        else:
            cl.coordinator = leader

    def _on_join(self, cl: Client, flight: InFlight, r: c.JoinGroupResponse) -> None:
        if self._retriable(cl, r.error):
            return
        if r.error == E.MEMBER_ID_REQUIRED:
            cl.member_id = r.member_id
        elif r.error == E.NONE:
            cl.member_id, cl.generation, cl.leader = r.member_id, r.generation_id, r.leader
            cl.join_members, cl.skip_assignment = r.members, r.skip_assignment
            cl.state = "sync"
        elif r.error == E.REBALANCE_IN_PROGRESS:
            self._sleep(cl, 10)
        else:
            self._rejoin(cl, r.error)
            if r.error not in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
                self._sleep(cl, self.rng.randint(100, 500))

    def _on_sync(self, cl: Client, flight: InFlight, r: c.SyncGroupResponse) -> None:
        if self._retriable(cl, r.error):
            return
        if r.error != E.NONE:
            return self._rejoin(cl, r.error)
        self.stats["stable_syncs"] += 1
        cl.assignment = decode_assignment(r.assignment)
        owners = self.owners.setdefault((cl.group, cl.generation), {})
        ident = cl.instance or cl.member_id
        for tp in cl.assignment:
            prev = owners.setdefault(tp, ident)
            if prev != ident:
                self._fail("one-owner", f"group {cl.group} generation {cl.generation}: {tp} assigned to "
                           f"{prev} and {ident}")
        cl.positions = {}
        cl.hb_ok = False
        cl.state = "fetch" if cl.assignment else "stable"
        cl.next_hb = self.now + HEARTBEAT_MS
        cl.next_commit = self.now + self.rng.randint(200, 2_000)

    def _on_fetch(self, cl: Client, flight: InFlight, r: c.OffsetFetchResponse) -> None:
        if self._retriable(cl, r.error):
            return
        if r.error != E.NONE:
            return self._rejoin(cl, r.error)
        self.stats["fetches"] += 1
        got = {(t, f.partition): f.offset for t, fs in r.topics for f in fs}
        for tp, floor in flight.acked_floor.items():
            key = (cl.group, tp)
            if self.last_tombstone.get(key, -1) >= 0 and self._acked_floor(key) < floor:
                continue  # deleted or expired since the fetch was sent
            if got.get(tp, -1) < floor:
                self._fail("acked-commit-lost", f"{cl.cid} resumed {key} at {got.get(tp, -1)} but {floor} "
                           "was acknowledged before its OffsetFetch")
        cl.positions = {tp: max(got.get(tp, -1), 0) for tp in cl.assignment}
        cl.state = "stable"

    def _on_heartbeat(self, cl: Client, flight: InFlight, r: c.HeartbeatResponse) -> None:
        if self._retriable(cl, r.error):
            return
        if r.error == E.NONE:
            cl.hb_ok = cl.state == "stable"
            cl.next_hb = self.now + HEARTBEAT_MS
        else:
            self._rejoin(cl, r.error)

    def _on_commit(self, cl: Client, flight: InFlight, r: c.OffsetCommitResponse) -> None:
        errors = {err for _, ps in r.topics for _, err in ps}
        cl.next_commit = self.now + self.rng.randint(200, 2_000)
        if errors == {E.NONE}:
            return
        error = next(iter(sorted(errors - {E.NONE})))
        if self._retriable(cl, error):
            return
        self._rejoin(cl, error)

    def _on_leave(self, cl: Client, flight: InFlight, r: c.LeaveGroupResponse) -> None:
        if r.error in (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS):
            self._retriable(cl, r.error)
            return
        self._client_down(cl)


def run(seed: int, steps: int = 3_000, bug: str | None = None) -> SimResult:
    """Run one seeded simulation; raises ``SimFailure`` (with the seed) on a violated invariant."""
    return Simulator(seed, bug).run(steps)
