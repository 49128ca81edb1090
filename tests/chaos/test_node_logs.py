"""The leadership transfers the nodes make on their own join a chaos run's fault timeline: read
from the node logs (chaos/node_logs.py), written as ``leader_transfer`` records, and made
moments of fault for the groups of the partition that moved (chaos/check/model.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from chaos.check.model import Options, fault_windows, offsets_partition, touches
from chaos.history import FAULT_TYPES
from chaos.node_logs import leader_transfers

T0 = datetime(2026, 11, 27, 12, 0, 0, tzinfo=UTC).timestamp()


def _line(at: float, msg: str) -> str:
    ts = datetime.fromtimestamp(T0 + at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return f"ts={ts} level=info logger=kcoord.raft {msg}\n"


def test_every_transfer_a_node_logged_is_a_record_on_the_run_clock(tmp_path: Path) -> None:
    (tmp_path / "node-0.log").write_text(
        _line(12.5, "event=leader_elected partition=__consumer_offsets-3 epoch=1048576 term=1")
        + _line(70.25, "event=leadership_transfer partition=__consumer_offsets-3 from=0 to=2 reason=balance"))
    (tmp_path / "node-1.log").write_text(
        _line(40.0, "event=leadership_transfer partition=chaos-topic-1 from=1 to=0 reason=balance"))
    got = leader_transfers(tmp_path, T0)
    assert got == [
        {"t": 40.0, "node": 1, "detail": {"partition": "chaos-topic-1", "to": 0, "reason": "balance"}},
        {"t": 70.25, "node": 0, "detail": {"partition": "__consumer_offsets-3", "to": 2, "reason": "balance"}},
    ]
    assert "leader_transfer" in FAULT_TYPES


def test_a_transfer_is_a_moment_of_fault_for_its_own_partitions_groups() -> None:
    opts = Options()
    own, other = offsets_partition("g", opts), offsets_partition("h", opts)
    assert own != other
    rows = [{"t": 5.0, "type": "kill", "node": "1", "detail": "x", "end": 9.0},
            {"t": 7.0, "type": "leader_transfer", "node": "0", "end": None,
             "detail": json.dumps({"partition": own, "to": 2, "reason": "balance"})}]
    kill, moved = fault_windows(rows, 100.0)
    assert (moved["type"], moved["start"], moved["end"], moved["open"]) == ("leader_transfer", 7.0, 7.0, False)
    assert touches(moved, "g", opts) and not touches(moved, "h", opts)
    assert touches(kill, "g", opts) and touches(kill, "h", opts)  # a node fault concerns every group
