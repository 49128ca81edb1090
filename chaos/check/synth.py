"""A synthetic, *valid* chaos-run history of a chosen size, to time and sanity-check the checker.

    python -m chaos.check.synth /tmp/run10m --events 10000000
    python -m chaos check /tmp/run10m --master 'local[2]'

The mix follows a real run: producers (acks=all; ~1% fail, ~0.5% time out and land half the
time), consumer groups polling and committing (latency rising inside fault windows; ~0.5% of
commits fail, ~0.5% are ambiguous and take effect half the time), member crashes and restarts
(eager rebalances: revoke, assign, OffsetFetch of the resume points), and a coordinator fault
window (kill/restart, pause/resume, partition/heal, leader transfer) every ``fault_every`` s.
Every invariant holds, so the checker must report no violation. Lines are written by hand-
formatted f-strings (values are plain identifiers), ~10M lines/min on one core.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from typing import Any, TextIO

FAULT_KINDS = (("kill", "restart"), ("pause", "resume"), ("partition", "heal"), ("transfer", None))


class Synth:
    def __init__(self, out: str, events: int, seed: int = 1, topics: int = 4, partitions: int = 6,
                 groups: int = 8, members: int = 3, producers: int = 4, dt: float = 0.01,
                 fault_every: float = 120.0, crash_every: float = 40.0) -> None:
        self.out, self.target, self.rng = out, events, random.Random(seed)
        self.topics = [f"topic-{i}" for i in range(topics)]
        self.nparts, self.dt = partitions, dt
        self.ngroups, self.nmembers, self.nproducers = groups, members, producers
        self.fault_every, self.crash_every = fault_every, crash_every
        self.lines = 0
        self.fh: dict[str, TextIO] = {}
        self.log: dict[tuple[str, int], list[str]] = {(t, p): [] for t in self.topics for p in range(partitions)}

    def w(self, proc: str, line: str) -> None:
        fh = self.fh.get(proc)
        if fh is None:
            fh = self.fh[proc] = open(os.path.join(self.out, "history", f"{proc}.jsonl"), "w",  # noqa: SIM115
                                      encoding="utf-8", buffering=1 << 20)
        fh.write(line)
        self.lines += 1

    # ---------------------------------------------------------------- groups

    def _assign(self, g: dict[str, Any], t: float) -> None:
        """Eager rebalance: everyone revokes, the generation advances, round-robin assignment."""
        gid = g["id"]
        for m in g["live"]:
            parts = g["owned"].get(m, [])
            proc = g["procs"][m]
            self.w(proc, f'{{"t":{t:.6f},"proc":"{proc}","type":"revoke","group":"{gid}","member":"{m}",'
                         f'"generation":{g["gen"]},"partitions":{json.dumps([[g["topic"], p] for p in parts])}}}\n')
        g["gen"] += 1
        live = sorted(g["live"])
        g["owned"] = {m: [p for p in range(self.nparts) if live[p % len(live)] == m] for m in live}
        t2 = t + 0.2
        for m in live:
            proc, parts = g["procs"][m], g["owned"][m]
            pl = json.dumps([[g["topic"], p] for p in parts])
            self.w(proc, f'{{"t":{t2:.6f},"proc":"{proc}","type":"assign","group":"{gid}","member":"{m}",'
                         f'"generation":{g["gen"]},"partitions":{pl}}}\n')
            offs = [[g["topic"], p, g["committed"].get(p, -1)] for p in parts]
            self.w(proc, f'{{"t":{t2 + 0.005:.6f},"proc":"{proc}","type":"fetch_committed","group":"{gid}",'
                         f'"member":"{m}","offsets":{json.dumps(offs)}}}\n')
            for p in parts:
                g["pos"][p] = max(0, g["committed"].get(p, 0))
        g["busy_until"] = t2 + 0.01

    def _group_tick(self, g: dict[str, Any], t: float, slow: bool) -> None:
        rng, gid, topic = self.rng, g["id"], g["topic"]
        if t < g["busy_until"]:
            return
        for m in list(g["live"]):
            proc = g["procs"][m]
            recs = []
            for p in g["owned"][m]:
                log, pos = self.log[(topic, p)], g["pos"][p]
                n = min(len(log) - pos, 3)
                for o in range(pos, pos + n):
                    recs.append(f'["{topic}",{p},{o},"{log[o]}"]')
                g["pos"][p] = pos + n
            if recs:
                self.w(proc, f'{{"t":{t:.6f},"proc":"{proc}","type":"poll","group":"{gid}","member":"{m}",'
                             f'"generation":{g["gen"]},"records":[{",".join(recs)}]}}\n')
            g["ticks"][m] = g["ticks"].get(m, 0) + 1
            if g["ticks"][m] % 5 == 0 and g["owned"][m]:
                g["nop"] += 1
                op = f"{proc}:{g['nop']}"
                offs = {p: g["pos"][p] for p in g["owned"][m]}
                ol = ",".join(f'["{topic}",{p},{o}]' for p, o in offs.items())
                self.w(proc, f'{{"t":{t:.6f},"proc":"{proc}","type":"commit.invoke","op":"{op}","group":"{gid}",'
                             f'"member":"{m}","generation":{g["gen"]},"offsets":[{ol}]}}\n')
                lat = rng.uniform(0.5, 3.0) if slow else rng.uniform(0.002, 0.012)
                x = rng.random()
                status = "ok" if x < 0.99 else ("fail" if x < 0.995 else "unknown")
                err = "null" if status == "ok" else ('"NOT_COORDINATOR"' if status == "fail" else '"timeout"')
                self.w(proc, f'{{"t":{t + lat:.6f},"proc":"{proc}","type":"commit.{status}","op":"{op}",'
                             f'"error":{err}}}\n')
                if status == "ok" or (status == "unknown" and rng.random() < 0.5):
                    g["committed"].update(offs)
                    g["clog"].extend((gid, topic, p, o) for p, o in offs.items())

    def _crash_or_restart(self, g: dict[str, Any], t: float) -> None:
        gid = g["id"]
        if len(g["live"]) == self.nmembers:
            m = self.rng.choice(sorted(g["live"]))
            self.w(g["procs"][m], f'{{"t":{t:.6f},"proc":"{g["procs"][m]}","type":"crash","group":"{gid}",'
                                  f'"member":"{m}"}}\n')
            g["live"].discard(m)
            g["owned"].pop(m, None)
            g["dead"].append(g["procs"][m])
        else:
            proc = g["dead"].pop()
            g["inc"] += 1
            m = f"{proc}-i{g['inc']}"  # a restarted dynamic member gets a new member id
            g["procs"][m] = proc
            g["live"].add(m)
        self._assign(g, t + 0.05)

    # ---------------------------------------------------------------- run

    def run(self) -> dict[str, Any]:
        os.makedirs(os.path.join(self.out, "history"), exist_ok=True)
        rng = self.rng
        groups: list[dict[str, Any]] = []
        for i in range(self.ngroups):
            procs = {f"g{i}-m{j}": f"consumer-{i}-{j}" for j in range(self.nmembers)}
            g: dict[str, Any] = {"id": f"group-{i}", "topic": self.topics[i % len(self.topics)], "gen": 0, "procs": procs,
                 "live": set(procs), "owned": {}, "pos": {}, "committed": {}, "ticks": {}, "nop": 0,
                 "busy_until": 0.0, "dead": [], "inc": 0, "clog": [],
                 "next_churn": self.crash_every * (0.5 + rng.random())}
            groups.append(g)
            self._assign(g, 0.5)
        faults: list[dict[str, Any]] = []
        fault_end, next_fault = -1.0, self.fault_every / 2
        nprod = [0] * self.nproducers
        t = 1.0
        while self.lines < self.target:
            if t >= next_fault:
                start, end = FAULT_KINDS[len(faults) % len(FAULT_KINDS)]
                node = rng.randint(1, 3)
                dur = 0.0 if end is None else rng.uniform(2.0, 8.0)
                faults.append({"t": round(t, 6), "type": start, "node": node, "detail": "coordinator leader"})
                if end is not None:
                    faults.append({"t": round(t + dur, 6), "type": end, "node": node, "detail": None})
                fault_end, next_fault = t + dur, t + self.fault_every
            slow = t <= fault_end
            for i in range(self.nproducers):
                proc = f"producer-{i}"
                nprod[i] += 1
                op, value = f"{proc}:{nprod[i]}", f"v{i}-{nprod[i]}"
                topic = self.topics[rng.randrange(len(self.topics))]
                self.w(proc, f'{{"t":{t:.6f},"proc":"{proc}","type":"produce.invoke","op":"{op}","topic":"{topic}",'
                             f'"value":"{value}"}}\n')
                x = rng.random()
                lat = rng.uniform(0.5, 2.0) if slow else rng.uniform(0.002, 0.008)
                if x < 0.985:
                    p = rng.randrange(self.nparts)
                    log = self.log[(topic, p)]
                    log.append(value)
                    self.w(proc, f'{{"t":{t + lat:.6f},"proc":"{proc}","type":"produce.ok","op":"{op}",'
                                 f'"topic":"{topic}","partition":{p},"offset":{len(log) - 1},"value":"{value}"}}\n')
                elif x < 0.995:
                    self.w(proc, f'{{"t":{t + lat:.6f},"proc":"{proc}","type":"produce.fail","op":"{op}",'
                                 f'"value":"{value}","error":"NOT_ENOUGH_REPLICAS"}}\n')
                else:
                    if rng.random() < 0.5:  # the timed-out send landed after all
                        self.log[(topic, rng.randrange(self.nparts))].append(value)
                    self.w(proc, f'{{"t":{t + 5:.6f},"proc":"{proc}","type":"produce.unknown","op":"{op}",'
                                 f'"value":"{value}","error":"timeout"}}\n')
            for g in groups:
                # membership churn only away from fault windows (a rebalance inside one would be I6's business)
                if t >= g["next_churn"] and t > fault_end + 20 and t < next_fault - 20:
                    self._crash_or_restart(g, t)
                    g["next_churn"] = t + self.crash_every * (0.5 + rng.random())
                self._group_tick(g, t + rng.uniform(0, self.dt / 2), slow)
            t += self.dt
        for fh in self.fh.values():
            fh.close()
        with open(os.path.join(self.out, "faults.jsonl"), "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(f) + "\n" for f in faults)
        for node in (1, 2, 3):
            with open(os.path.join(self.out, f"offsets-node-{node}.jsonl"), "w", encoding="utf-8") as fh:
                for i, g in enumerate(groups):
                    for n, (gid, topic, p, o) in enumerate(g["clog"]):
                        fh.write(f'{{"partition":{i % 50},"group":"{gid}","topic":"{topic}","topic_partition":{p},'
                                 f'"offset":{o},"metadata":"","commit_timestamp":{n}}}\n')
        return {"events": self.lines, "run_seconds": round(t, 2), "faults": len(faults), "files": len(self.fh)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m chaos.check.synth", description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--groups", type=int, default=8)
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    info = Synth(a.out, a.events, seed=a.seed, groups=a.groups).run()
    info["seconds"] = round(time.monotonic() - t0, 1)
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
