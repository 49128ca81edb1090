"""``rebalance``: how long until a group's assignment is complete again.

N confluent-kafka members (threads of one process: rebalancing is light, and every member
must be polled to see its assignment) subscribe to one topic of P partitions.

* ``initial``: from the first ``subscribe()`` until the assignment is complete (each member
  has connected and read the topic's metadata before);
* then ``--rounds`` times on the stable group: ``join`` (one more member subscribes) and
  ``leave`` (one member closes, sending LeaveGroup), each timed the same way.

*Complete* at time t, for a measurement started at t0: every live member received an
assignment (``on_assign``) after t0, the live members' assignments are disjoint and cover
all P partitions, and (when N <= P) none is empty. The classic (eager) protocol revokes and
reassigns every member on each rebalance, so this is the end of the rebalance. tansu holds a
new group's first join for 15-23 s, so ``initial`` differs widely; ``join``/``leave`` of an
already-stable group are the figures to compare.

``--group-protocol consumer`` (KIP-848): the coordinator assigns, and a member's callbacks carry
only what it gains or gives up, so the members' assignments are kept incrementally and
*complete* means: some assignment arrived after t0, and the live members' assignments are
disjoint, cover all P partitions and (when N <= P) none is empty. The members that keep their
partitions are never stopped, so the figure is how long the moved partitions were unowned.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from typing import Any

from bench.brokers import BenchError
from bench.common import CLIENT_DEFAULTS, create_topic, run_id
from bench.report import Metric, Reporter, rnd

METRICS = [
    Metric("initial_s", "initial: subscribe -> complete assignment", "s", "lower"),
    Metric("join_median_s", "join of a stable group, median", "s", "lower"),
    Metric("join_max_s", "join, max", "s", "lower"),
    Metric("leave_median_s", "leave of a stable group, median", "s", "lower"),
    Metric("leave_max_s", "leave, max", "s", "lower"),
    Metric("assignments", "on_assign callbacks seen", "", ""),
]


def add_arguments(p: Any) -> None:
    p.add_argument("--members", "-n", type=int, default=10, help="members (default 10)")
    p.add_argument("--partitions", "-p", type=int, default=None, help="partitions (default max(12, members+2))")
    p.add_argument("--rounds", type=int, default=5, help="join+leave rounds on the stable group (default 5)")
    p.add_argument("--heartbeat-ms", type=int, default=500,
                   help="heartbeat.interval.ms of the members (default 500; the rebalance of a stable "
                        "group starts when members see REBALANCE_IN_PROGRESS in a heartbeat)")
    p.add_argument("--session-timeout-ms", type=int, default=10000, help="session.timeout.ms (default 10000)")
    p.add_argument("--assignor", default="range",
                   help="partition.assignment.strategy, classic protocol (default range); with "
                        "--group-protocol consumer: the server assignor (group.remote.assignor), uniform by default")
    p.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic",
                   help="the group protocol of the members (default classic; consumer: KIP-848)")
    p.add_argument("--timeout", type=float, default=120.0, help="give up on one measurement after (s)")


def _partitions(args: Any) -> int:
    return int(args.partitions or max(12, args.members + 2))


def params(args: Any) -> dict[str, Any]:
    return {"members": args.members, "partitions": _partitions(args), "rounds": args.rounds,
            "heartbeat_ms": args.heartbeat_ms, "session_timeout_ms": args.session_timeout_ms,
            "assignor": args.assignor, "group_protocol": args.group_protocol}


def metrics(args: Any) -> list[Metric]:
    return METRICS


def ok(result: dict[str, Any]) -> bool:
    return result.get("initial_s") is not None and result.get("failed_measurements", 1) == 0


class Tracker:
    def __init__(self, partitions: int, incremental: bool = False) -> None:
        self.partitions = partitions
        self.incremental = incremental  # KIP-848: callbacks carry what is added or removed
        self.cond = threading.Condition()
        self.assigned: dict[int, frozenset[int]] = {}
        self.assigned_at: dict[int, float] = {}
        self.live: set[int] = set()
        self.assign_calls = 0
        self.last_assign = -1.0

    def on_assign(self, m: int, parts: list[Any]) -> None:
        now = time.monotonic()
        got = frozenset(tp.partition for tp in parts)
        with self.cond:
            self.assigned[m] = self.assigned.get(m, frozenset()) | got if self.incremental else got
            self.assigned_at[m] = now
            self.last_assign = now
            self.assign_calls += 1
            self.cond.notify_all()

    def on_revoke(self, m: int, parts: list[Any]) -> None:
        with self.cond:
            if self.incremental:
                self.assigned[m] = self.assigned.get(m, frozenset()) - {tp.partition for tp in parts}
            else:
                self.assigned[m] = frozenset()
            self.cond.notify_all()

    def complete_since(self, t0: float) -> bool:
        live = self.live
        if not live:
            return False
        total = 0
        union: set[int] = set()
        need_nonempty = len(live) <= self.partitions
        if self.incremental and self.last_assign < t0:
            return False
        for m in live:
            if not self.incremental and self.assigned_at.get(m, -1.0) < t0:
                return False
            a = self.assigned.get(m, frozenset())
            if need_nonempty and not a:
                return False
            total += len(a)
            union |= a
        return total == self.partitions and len(union) == self.partitions

    def wait_complete(self, t0: float, timeout: float) -> float | None:
        """Seconds from t0 to the first moment the assignment was complete; None on timeout."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not self.complete_since(t0):
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(min(left, 0.5))
            if self.incremental:
                return self.last_assign - t0
            return max(self.assigned_at[m] for m in self.live) - t0


class Member(threading.Thread):
    def __init__(self, idx: int, conf: dict[str, Any], topic: str, tracker: Tracker) -> None:
        super().__init__(daemon=True, name=f"member-{idx}")
        self.idx = idx
        self.conf = conf
        self.topic = topic
        self.tracker = tracker
        self.ready = threading.Event()
        self.go = threading.Event()
        self.leave = threading.Event()
        self.closed = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        from confluent_kafka import Consumer

        tr = self.tracker
        try:
            c = Consumer(self.conf)
            # Connected, with the topic's metadata, before the clock starts: the figure is the
            # group protocol's, not a client's bootstrap (librdkafka retries a coordinator query
            # that found no broker up only a second later).
            c.list_topics(self.topic, timeout=30)
        except Exception as e:  # noqa: BLE001
            self.error = repr(e)
            self.ready.set()
            return
        self.ready.set()
        self.go.wait()
        c.subscribe([self.topic], on_assign=lambda _c, ps: tr.on_assign(self.idx, ps),
                    on_revoke=lambda _c, ps: tr.on_revoke(self.idx, ps),
                    on_lost=lambda _c, ps: tr.on_revoke(self.idx, ps))
        try:
            while not self.leave.is_set():
                m = c.poll(0.1)
                err = m.error() if m is not None else None
                if err is not None and self.error is None and err.fatal():
                    self.error = str(err)
        finally:
            c.close()
            self.closed.set()


def run_one(name: str, bootstrap: str, args: Any, rep: Reporter) -> dict[str, Any]:
    parts = _partitions(args)
    rid = run_id()
    topic, group = f"bench-rebalance-{rid}", f"bench-rebalance-{rid}"
    create_topic(bootstrap, topic, parts)
    conf = dict(CLIENT_DEFAULTS, **{
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "latest",
    })
    consumer_protocol = args.group_protocol == "consumer"
    if consumer_protocol:
        # the heartbeat interval and session timeout are the coordinator's (group.consumer.*)
        conf["group.protocol"] = "consumer"
        if args.assignor != "range":
            conf["group.remote.assignor"] = args.assignor
    else:
        conf.update({"heartbeat.interval.ms": args.heartbeat_ms, "session.timeout.ms": args.session_timeout_ms,
                     "partition.assignment.strategy": args.assignor})
    tr = Tracker(parts, incremental=consumer_protocol)
    members: list[Member] = []
    next_idx = 0

    def new_member() -> Member:
        nonlocal next_idx
        m = Member(next_idx, conf, topic, tr)
        next_idx += 1
        m.start()
        m.ready.wait(30)
        if m.error:
            raise BenchError(f"{name}: member {m.idx}: {m.error}")
        members.append(m)
        return m

    def settle() -> None:
        # let the group settle into heartbeating; the jitter keeps the start of a measurement from
        # lining up with the members' (synchronised) heartbeat timers
        time.sleep(1.0 + random.uniform(0, args.heartbeat_ms / 1000.0))

    result: dict[str, Any] = {}
    failed = 0
    try:
        rep.note(f"{name}: creating {args.members} members on {bootstrap} (topic {topic}, {parts} partitions)")
        first = [new_member() for _ in range(args.members)]
        with rep.phase(f"{name} initial: {args.members} members subscribe",
                       count=lambda: tr.assign_calls, unit="assignments"):
            t0 = time.monotonic()
            with tr.cond:
                tr.live = {m.idx for m in first}
            for m in first:
                m.go.set()
            d = tr.wait_complete(t0, args.timeout)
        result["initial_s"] = rnd(d, 3)
        if d is None:
            raise BenchError(f"{name}: no complete assignment {args.timeout}s after subscribe")
        joins: list[float] = []
        leaves: list[float] = []
        for r in range(args.rounds):
            settle()
            m = new_member()
            with rep.phase(f"{name} round {r + 1}/{args.rounds}: join (member {m.idx})"):
                t0 = time.monotonic()
                with tr.cond:
                    tr.live = tr.live | {m.idx}
                m.go.set()
                d = tr.wait_complete(t0, args.timeout)
            if d is None:
                failed += 1
                rep.err.print(f"[red]{name}: join {r + 1} not complete in {args.timeout}s[/red]")
            else:
                joins.append(d)
            settle()
            victim = next(x for x in members if x.idx in tr.live)
            with rep.phase(f"{name} round {r + 1}/{args.rounds}: leave (member {victim.idx})"):
                t0 = time.monotonic()
                with tr.cond:
                    tr.live = tr.live - {victim.idx}
                victim.leave.set()
                d = tr.wait_complete(t0, args.timeout)
            if d is None:
                failed += 1
                rep.err.print(f"[red]{name}: leave {r + 1} not complete in {args.timeout}s[/red]")
            else:
                leaves.append(d)
        result["join_median_s"] = rnd(statistics.median(joins), 3) if joins else None
        result["join_max_s"] = rnd(max(joins), 3) if joins else None
        result["leave_median_s"] = rnd(statistics.median(leaves), 3) if leaves else None
        result["leave_max_s"] = rnd(max(leaves), 3) if leaves else None
        result["joins_s"] = [rnd(x, 3) for x in joins]
        result["leaves_s"] = [rnd(x, 3) for x in leaves]
        result["assignments"] = tr.assign_calls
        result["failed_measurements"] = failed
        errs = [f"member {m.idx}: {m.error}" for m in members if m.error]
        if errs:
            result["member_errors"] = errs[:10]
    finally:
        with rep.phase(f"{name} closing {sum(1 for m in members if not m.closed.is_set())} members"):
            for m in members:
                m.go.set()
                m.leave.set()
            for m in members:
                m.join(30)
    return result
