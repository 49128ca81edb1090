"""Raft link faults set from outside a running node, for chaos runs and tests.

With ``raft_fault_injection`` on, the node reads ``<data_dir>/raft-faults.json`` every 200 ms
and applies it to its Raft hub: ``{"cut": [node ids]}`` drops every Raft message to and from
those nodes (both ways, connections kept: a network partition as Raft sees it), ``{"mute":
[node ids]}`` drops only what it sends them (one-way loss), and ``{"delay_s", "hold",
"duplicate", "loss", "seed"}`` delay, reorder, duplicate and lose what it sends
(``replication/link_faults.py``). A missing file or ``{}`` means no faults. Client traffic is
untouched: a cut node still serves whoever reaches its Kafka port, which is the case a
partition test is about. Off by default; the file is ignored then.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable
from typing import Any

from replication.hub import RaftHub
from replication.link_faults import LinkFaults

log = logging.getLogger("kcoord.link_control")

FILE_NAME = "raft-faults.json"
POLL_S = 0.2


def apply(hub: RaftHub, spec: dict[str, Any], hub_of: Callable[[int], str | None]) -> None:
    cut = {hub_of(int(n)) for n in spec.get("cut", [])}
    hub.cut = frozenset(a for a in cut if a is not None)
    mute = {hub_of(int(n)) for n in spec.get("mute", [])}
    hub.mute = frozenset(a for a in mute if a is not None)
    if any(spec.get(k) for k in ("delay_s", "hold", "duplicate", "loss")):
        hub.faults = LinkFaults(int(spec.get("seed", 0)), delay_s=float(spec.get("delay_s", 0.0)),
                                hold=float(spec.get("hold", 0.0)), duplicate=float(spec.get("duplicate", 0.0)),
                                loss=float(spec.get("loss", 0.0)))
    else:
        hub.faults = None


async def follow(data_dir: str, hub: RaftHub, hub_of: Callable[[int], str | None]) -> None:
    """Apply the fault file whenever it changes (a task for the node's lifetime)."""
    path = os.path.join(data_dir, FILE_NAME)
    seen: tuple[float, int] | None = None
    while True:
        try:
            st = os.stat(path)
            stamp: tuple[float, int] | None = (st.st_mtime, st.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp != seen:
            seen = stamp
            try:
                spec: dict[str, Any] = {}
                if stamp is not None:
                    with open(path, encoding="utf-8") as fh:
                        spec = json.loads(fh.read() or "{}")
                apply(hub, spec, hub_of)
                log.warning("event=raft_faults_applied spec=%s", json.dumps(spec, sort_keys=True))
            except (OSError, ValueError, TypeError) as e:
                log.error("event=raft_faults_unreadable path=%s error=%r", path, str(e))
        await asyncio.sleep(POLL_S)
