"""What the chaos checker concludes, without Spark: the invariants, a verdict per invariant, the
report, the options, and the fault windows (pure Python over the fault timeline). The report
writer (chaos/check/report.py) imports only this."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from coordinator.partitioner import partition_for

INVARIANTS = {
    "I1": "committed offsets never regress",
    "I2": "the resume point after assignment is a committed offset (or the start)",
    "I3": "ambiguous commits accepted both ways; failed commits never take effect",
    "I4": "commit <= position, commits and records only for assigned partitions",
    "I5": "at most one owner per partition at any moment (and per generation); stale commits rejected",
    "I6": "no rebalance caused by a coordinator failover",
    "I7": "a bounced static member causes no revocation on the others",
    "I8": "delivery: no lost ack'd produce, no duplicates, no inconsistent offsets, no aborted reads",
    "I9": "liveness: progress within a bound after each fault window ends",
    "I10": "exactly-once: every input record once in the committed output; no aborted record read_committed",
}
# start type -> the type that ends its window (same node unless the start has no node)
WINDOW_ENDS = {"kill": "restart", "pause": "resume", "partition": "heal", "kill_all": "restart_all",
               "raft_partition": "raft_heal", "power_loss": "restart", "power_loss_all": "restart_all",
               "disk_loss": "restart",
               # a node joining (until it votes in every group) or leaving (until it stopped): each
               # written with its end, moving leaderships as it goes
               "add_node": "restart", "remove_node": "restart"}
# a power loss is a kill that also loses what the disk did not have: judged as the kill it is
TOTAL_OUTAGES = ("kill_all", "power_loss_all")
# Faults of a moment, windows with ``end`` = ``start`` unless given one: the nemesis' transfer
# storm, and a move the nodes made on their own (``leader_transfer``: ``detail.partition``). A
# ``leader_transfer`` concerns only the groups of that partition (``touches``).
INSTANT = ("transfer", "leader_transfer")


@dataclass
class Verdict:
    id: str
    title: str
    status: str  # pass | fail | skipped | inconclusive
    violations: int = 0
    counterexamples: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    run_dir: str
    ok: bool
    verdicts: dict[str, Verdict]
    stats: dict[str, Any]
    timings: dict[str, float]
    faults: list[dict[str, Any]]
    out_dir: str | None = None
    partition_faults: list[dict[str, Any]] = field(default_factory=list)  # chaos/check/fault_times.py
    plots: dict[str, Any] = field(default_factory=dict, repr=False)  # data for the HTML plots

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("plots", None)
        return d


@dataclass
class Options:
    max_examples: int = 10
    fault_grace: float = 15.0       # a fault's effects may outlast its window by this much (I6, I7)
    liveness_bound: float = 35.0    # I9: max(35 s, 2 x session timeout), Kafka's harness default
    session_timeout: float = 10.0   # I6/I7: the workload's session timeout
    offsets_partitions: int = 16    # the nodes' __consumer_offsets partitions (run.json): which is a group's
    heartbeat_interval: float = 1.0  # I6/I7: the workload's heartbeat interval
    latency_sample: int = 20000
    progress: bool = False          # one stderr line per phase (the CLI sets it)



def fault_windows(rows: list[dict[str, Any]], t_end: float) -> list[dict[str, Any]]:
    """Pair fault starts with their ends (``end`` field, else the matching end event)."""
    out: list[dict[str, Any]] = []
    open_: dict[tuple[str, str | None], dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: r["t"]):
        typ, node = r["type"], r.get("node")
        if typ in WINDOW_ENDS or typ in INSTANT:
            w = {"id": len(out), "type": typ, "node": node, "detail": r.get("detail"), "start": r["t"],
                 "end": r.get("end"), "open": False}
            if w["end"] is None and typ in INSTANT:
                w["end"] = r["t"]
            out.append(w)
            if w["end"] is None:
                open_[(WINDOW_ENDS[typ], node)] = w
        else:
            w2 = open_.pop((typ, node), None)
            if w2 is None:  # an end without a node (heal, restart_all) closes any open start of its kind
                for k in [k for k in open_ if k[0] == typ]:
                    w2 = open_.pop(k)
                    break
            if w2 is not None:
                w2["end"] = r["t"]
    for w in out:
        if w["end"] is None:
            w["end"], w["open"] = t_end, True
    return out


def detail_of(w: dict[str, Any]) -> dict[str, Any]:
    """A window's ``detail`` as a dict (faults.jsonl read by Spark gives it as a JSON string; a
    plain string says nothing structured)."""
    d = w.get("detail")
    if isinstance(d, str):
        try:
            d = json.loads(d)
        except ValueError:
            return {}
    return d if isinstance(d, dict) else {}


def offsets_partition(group: str, opts: Options) -> str:
    """The ``__consumer_offsets`` partition (Raft group name) that coordinates ``group``."""
    return f"__consumer_offsets-{partition_for(group, opts.offsets_partitions)}"


def touches(w: dict[str, Any], group: str, opts: Options) -> bool:
    """Whether fault window ``w`` can have affected ``group``: every node and network fault
    does; a ``leader_transfer`` only if it moved the group's own coordinator partition."""
    return w["type"] != "leader_transfer" or detail_of(w).get("partition") == offsets_partition(group, opts)
