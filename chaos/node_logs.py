"""What a chaos run learns from its nodes' logs after the run: the leadership transfers the
nodes made on their own (preferred-leader balancing), which the nemesis did not cause and its
fault log does not hold. Each becomes a ``leader_transfer`` record of ``faults.jsonl``
(``chaos/history.py``): a coordinator partition that moves reloads its groups on the new leader,
so the checker must know when that happened.

Node logs carry wall-clock timestamps (``cluster/logfmt.py``); run.json's ``t0`` puts them on
the run clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

_TRANSFER = re.compile(r"^ts=(\S+) .*event=leadership_transfer partition=(\S+) from=(\S+) to=(\S+) reason=(\S+)")


def _node(name: str) -> int | str:
    return int(name) if name.isdigit() else name


def _matches(log_dir: Path, needle: str, pattern: re.Pattern[str], t0: float) -> Iterator[tuple[int, float, re.Match[str]]]:
    """(node, run-clock time, match) of every line of the ``node-N.log`` files in ``log_dir`` that
    holds ``needle`` and matches ``pattern`` (whose first group is the line's ``ts``)."""
    for f in sorted(log_dir.glob("node-*.log")):
        node = int(f.stem.split("-")[1])
        with open(f, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                m = pattern.match(line) if needle in line else None
                if m is not None:
                    t = datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp() - t0
                    yield node, round(t, 3), m


def leader_transfers(log_dir: Path, t0: float) -> list[dict[str, Any]]:
    """Every ``event=leadership_transfer`` of the ``node-N.log`` files in ``log_dir``, in time
    order: ``t`` (run clock), ``node`` (the one that handed leadership over) and ``detail``
    (``partition``, ``to``, ``reason``)."""
    out: list[dict[str, Any]] = []
    for node, t, m in _matches(log_dir, "event=leadership_transfer", _TRANSFER, t0):
        sender = _node(m.group(3))
        out.append({"t": t, "node": sender if isinstance(sender, int) else node,
                    "detail": {"partition": m.group(2), "to": _node(m.group(4)), "reason": m.group(5)}})
    return sorted(out, key=lambda r: float(r["t"]))


_LEARNER = re.compile(r"^ts=(\S+) .*event=(replica_learner|replica_promoted) node=(\d+) directory=(\S+)"
                      r"(?: .*caught_up_s=([0-9.]+))?")


def learners(log_dir: Path, t0: float) -> list[dict[str, Any]]:
    """Each new replica (a node back on an empty disk) and its catch-up, from the
    ``event=replica_learner`` and ``event=replica_promoted`` lines: ``node``, ``directory``,
    ``learner_t`` and ``promoted_t`` (run clock; None if it never was), ``caught_up_s``."""
    seen: dict[str, dict[str, Any]] = {}
    for _node_log, t, m in _matches(log_dir, "event=replica_", _LEARNER, t0):
        row = seen.setdefault(m.group(4), {"node": int(m.group(3)), "directory": m.group(4),
                                           "learner_t": None, "promoted_t": None, "caught_up_s": None})
        if m.group(2) == "replica_learner":
            row["learner_t"] = t if row["learner_t"] is None else row["learner_t"]
        else:
            row["promoted_t"] = t
            row["caught_up_s"] = float(m.group(5)) if m.group(5) else None
    return sorted(seen.values(), key=lambda r: (r["learner_t"] is None, r["learner_t"] or 0.0))
