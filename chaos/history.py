"""The chaos run's recorded history: one JSON object per line, one file per client process.

Every event has ``t`` (seconds since the run started, float, from one monotonic clock
shared by the run's processes via ``KCOORD_CHAOS_T0``), ``proc`` (the client process id,
e.g. ``"ck-consumer-2"``) and ``type``. The types and their fields:

- ``produce.invoke``  ``op, topic, value``                    (value: unique string)
- ``produce.ok``      ``op, topic, partition, offset, value``  (acks=all acknowledged)
- ``produce.fail``    ``op, value, error``                     (definitely not written)
- ``produce.unknown`` ``op, value, error``                     (timeout: may or may not be written)
- ``assign``          ``group, member, generation, partitions: [[topic, partition], ...]``
- ``revoke``          ``group, member, generation, partitions``
- ``poll``            ``group, member, generation, records: [[topic, partition, offset, value], ...]``
- ``commit.invoke``   ``op, group, member, generation, offsets: [[topic, partition, offset], ...]``
- ``commit.ok`` / ``commit.fail`` / ``commit.unknown``  ``op, error`` (error null for ok)
- ``fetch_committed`` ``group, member, offsets: [[topic, partition, offset], ...]`` (what an
  OffsetFetch returned, e.g. the resume points after an assignment; -1 = none)
- ``leave``           ``group, member``                        (clean close)
- ``crash``           ``group, member``                        (the client process was killed)
- ``txn.commit.invoke`` ``op, group, txn, outputs, records``   (an exactly-once worker's transaction:
  its input records, ``outputs`` output records tagged ``txn``; chaos/eos_workload.py)
- ``txn.commit.ok`` / ``txn.commit.fail`` / ``txn.commit.unknown``  ``op, error``
- ``read``            ``records``                              (a read_committed reader's records)

The fault timeline (``faults.jsonl``) has ``t, type, node, detail`` with ``type`` one of
``kill, restart, pause, resume, partition, heal, transfer, kill_all, restart_all`` and an
``end`` time for windowed faults; and ``leader_transfer`` (``node`` handed ``detail.partition``
to ``detail.to``, for ``detail.reason``, e.g. balance): a move the nodes made on their own,
read from their logs after the run (``chaos/node_logs.py``). Offsets log exports (``offsets-node-N.jsonl``) have one
replayed record per line: ``partition, group, topic, topic_partition, offset, metadata,
commit_timestamp`` or ``group, tombstone: true``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, TextIO

EVENT_TYPES = frozenset({
    "produce.invoke", "produce.ok", "produce.fail", "produce.unknown",
    "assign", "revoke", "poll",
    "commit.invoke", "commit.ok", "commit.fail", "commit.unknown",
    "fetch_committed", "leave", "crash",
    "txn.commit.invoke", "txn.commit.ok", "txn.commit.fail", "txn.commit.unknown", "read",
})
FAULT_TYPES = frozenset({"kill", "restart", "pause", "resume", "partition", "heal", "transfer",
                         "kill_all", "restart_all", "raft_partition", "raft_heal", "power_loss",
                         "power_loss_all", "leader_transfer", "disk_loss", "add_node", "remove_node"})


def run_clock() -> float:
    """Seconds since the run started (``KCOORD_CHAOS_T0`` = the run's time.time() at start)."""
    t0 = float(os.environ.get("KCOORD_CHAOS_T0", "0") or 0)
    return time.time() - t0 if t0 else time.monotonic()


class HistoryWriter:
    """Thread-safe JSONL writer; every line is flushed so a SIGKILLed client loses nothing."""

    def __init__(self, path: str, proc: str) -> None:
        self.proc = proc
        self._fh: TextIO = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        self._lock = threading.Lock()
        self._ops = 0

    def next_op(self) -> str:
        with self._lock:
            self._ops += 1
            return f"{self.proc}:{self._ops}"

    def write(self, type_: str, **fields: Any) -> None:
        if type_ not in EVENT_TYPES and type_ not in FAULT_TYPES:
            raise ValueError(f"unknown history event type {type_!r}")
        event = {"t": round(run_clock(), 6), "proc": self.proc, "type": type_, **fields}
        line = json.dumps(event, separators=(",", ":"))
        with self._lock:
            self._fh.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            self._fh.close()
