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


def test_each_new_replica_and_its_catch_up_are_read_from_the_node_logs(tmp_path: Path) -> None:
    from chaos.node_logs import learners

    (tmp_path / "node-1.log").write_text(
        _line(30.0, "event=replica_learner node=1 directory=d1new voter_directory=d1old detail='...'")
        + _line(33.5, "event=replica_promoted node=1 directory=d1new replaced=d1old caught_up_s=3.5")
        + _line(80.0, "event=replica_learner node=1 directory=d1third voter_directory=d1new detail='...'"))
    assert learners(tmp_path, T0) == [
        {"node": 1, "directory": "d1new", "learner_t": 30.0, "promoted_t": 33.5, "caught_up_s": 3.5},
        {"node": 1, "directory": "d1third", "learner_t": 80.0, "promoted_t": None, "caught_up_s": None},
    ]
    assert "disk_loss" in FAULT_TYPES


def test_a_lost_disk_is_emptied_and_the_next_waits_until_every_node_votes(tmp_path: Path) -> None:
    from chaos.nemesis import all_voters, wipe_dir

    class Layout:
        def __init__(self, d: Path) -> None:
            self.data_dir = d

    class Nodes:
        def __init__(self) -> None:
            self.layout = [Layout(tmp_path / str(i)) for i in range(4)]  # node 3: a node that left
            self.members = [0, 1, 2]

        def alive(self, i: int) -> bool:
            return True

    nodes = Nodes()
    for i, n in enumerate(nodes.layout):
        (n.data_dir / "raft" / "g").mkdir(parents=True)
        (n.data_dir / "raft" / "g" / "raft.kcj").write_bytes(b"x" * 100)
        (n.data_dir / "node.identity").write_text(json.dumps({"directory_id": f"d{i}"}))
    voters = {"voters": {"0": "d0", "1": "d1", "2": "d2"}}
    for n in nodes.layout:
        (n.data_dir / "voters.json").write_text(json.dumps(voters))
    assert all_voters(nodes)  # type: ignore[arg-type]
    assert wipe_dir(nodes.layout[1].data_dir) > 100 and not list(nodes.layout[1].data_dir.iterdir())
    assert not all_voters(nodes)  # type: ignore[arg-type]
    (nodes.layout[1].data_dir / "node.identity").write_text(json.dumps({"directory_id": "d1new"}))
    (nodes.layout[1].data_dir / "voters.json").write_text(json.dumps(voters))
    assert not all_voters(nodes)  # type: ignore[arg-type]  # a learner: not yet the voter
    for n in nodes.layout:
        (n.data_dir / "voters.json").write_text(json.dumps({"voters": {"0": "d0", "1": "d1new", "2": "d2"}}))
    assert all_voters(nodes)  # type: ignore[arg-type]
    # a node that left is still named in voters.json (its last directory): the members' are what counts
    for n in nodes.layout:
        (n.data_dir / "voters.json").write_text(json.dumps({"voters": {"0": "d0", "1": "d1new", "2": "d2",
                                                                       "3": "d3"}}))
    assert all_voters(nodes)  # type: ignore[arg-type]
