"""Per network-partition fault: how long the cut-off side went on leading, and how soon the
majority served the groups again.

For every ``raft_partition`` window (isolate, majority split, bridge, flapping, loss, ...):

- ``cut_off``: the nodes that could reach fewer than a majority (themselves included);
- ``stepped_down_s``: per cut-off node, from the cut until it had given up the last partition
  it led at the cut (``event=leadership_lost`` in its log; it refuses to answer as leader
  earlier, when its lease lapses);
- ``served_s``: per workload group, from the cut until the first acknowledged commit sent
  after it (requests sent in the first ``IN_FLIGHT_S`` may have got through before the cut);
  ``coordinator_cut_off`` says whether the group's coordinator was on the cut-off side.

Node logs carry wall-clock timestamps; run.json's ``t0`` puts them on the run clock.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator.partitioner import partition_for

IN_FLIGHT_S = 0.25
OFFSETS_PARTITIONS = 16  # for runs whose run.json predates its offsets_partitions
_LEADERSHIP = re.compile(r"^ts=(\S+) .*event=(leader_elected|leadership_lost|node_started)(?: partition=(\S+))?")


def leadership_events(run_dir: str, t0: float) -> list[tuple[float, int, str, str]]:
    """(run-clock time, node, elected|lost|started, partition name) from the copied node logs (a
    killed node logs no loss: its restart, ``started``, ends everything it led)."""
    out: list[tuple[float, int, str, str]] = []
    for f in sorted(Path(run_dir, "logs").glob("node-*.log")):
        node = int(f.stem.split("-")[1])
        with open(f, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if "event=lead" not in line and "event=node_started" not in line:
                    continue
                m = _LEADERSHIP.match(line)
                if m:
                    t = datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp() - t0
                    kind = {"leader_elected": "elected", "leadership_lost": "lost"}.get(m.group(2), "started")
                    out.append((t, node, kind, m.group(3) or ""))
    return sorted(out)


def _cut_off(cuts: dict[str, list[int]], n: int) -> list[int]:
    return sorted(int(i) for i, peers in cuts.items() if (n - len(peers)) * 2 <= n)


def _led_at(events: list[tuple[float, int, str, str]], node: int, t: float) -> set[str]:
    led: set[str] = set()
    for te, nd, kind, part in events:
        if te > t:
            break
        if nd == node and kind == "started":
            led.clear()
        elif nd == node:
            (led.add if kind == "elected" else led.discard)(part)
    return led


def partition_fault_times(spark: SparkSession, run_dir: str, faults: list[dict[str, Any]],
                          commits: DataFrame, nodes: int = 3) -> list[dict[str, Any]]:
    windows = [w for w in faults if w["type"] == "raft_partition"]
    if not windows:
        return []
    info_path = Path(run_dir, "run.json")
    info = json.loads(info_path.read_text()) if info_path.exists() else {}
    t0 = float(info.get("t0", 0.0))
    groups = list(info.get("groups", []))
    n_offsets = int(info.get("offsets_partitions", OFFSETS_PARTITIONS))
    events = leadership_events(run_dir, t0) if t0 else []
    wins = spark.createDataFrame([(w["id"], float(w["start"])) for w in windows], "wid long, w_start double")
    first = (commits.where(F.col("status") == "ok").select("group", "t_inv", "t_res")
             .join(F.broadcast(wins), F.col("t_inv") >= F.col("w_start") + IN_FLIGHT_S)
             .groupBy("wid", "group").agg(F.min("t_res").alias("t_first")).collect())
    served = {(r["wid"], r["group"]): r["t_first"] for r in first}
    out = []
    for w in windows:
        detail = w.get("detail") or {}
        if isinstance(detail, str):  # faults.jsonl is read with detail as a JSON string
            detail = json.loads(detail)
        cuts = detail.get("cuts") or {}
        cut_off = _cut_off(cuts, nodes)
        stepped: dict[str, float | None] = {}
        led_names: set[str] = set()
        for k in cut_off:
            led = _led_at(events, k, w["start"])
            led_names |= led
            lost: dict[str, float] = {}
            for te, nd, kind, part in events:  # the first loss of each after the cut
                if nd == k and kind == "lost" and part in led and te >= w["start"]:
                    lost.setdefault(part, te)
            stepped[str(k)] = (round(max(lost.values()) - w["start"], 3)
                               if led and set(lost) == led else (0.0 if not led else None))
        per_group = {}
        for g in groups:
            t_first = served.get((w["id"], g))
            per_group[g] = {"served_s": None if t_first is None else round(t_first - w["start"], 3),
                            "coordinator_cut_off": f"__consumer_offsets-{partition_for(g, n_offsets)}"
                            in led_names}
        out.append({"id": w["id"], "kind": detail.get("kind"), "net": detail.get("net"), "start": w["start"],
                    "length_s": round(w["end"] - w["start"], 3), "cut_off": cut_off,
                    "stepped_down_s": stepped, "groups": per_group})
    return out


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts per kind and the worst times, for the report's stats."""
    by_kind: dict[str, int] = {}
    for r in rows:
        by_kind[str(r["kind"])] = by_kind.get(str(r["kind"]), 0) + 1
    stepped = [v for r in rows for v in r["stepped_down_s"].values() if v is not None]
    served_cut = [g["served_s"] for r in rows for g in r["groups"].values()
                  if g["coordinator_cut_off"] and g["served_s"] is not None]
    return {"faults_by_kind": by_kind, "stepped_down_max_s": max(stepped) if stepped else None,
            "served_after_cut_max_s": max(served_cut) if served_cut else None,
            "never_stepped_down": sum(1 for r in rows for v in r["stepped_down_s"].values() if v is None)}
