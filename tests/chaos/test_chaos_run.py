"""A bounded chaos run end to end: ``python -m chaos run --scenario bounded`` for ~60 s, with
``--group-protocol mixed``: the first group's confluent-kafka members speak KIP-848 beside its
classic kafka-python members, the second group stays classic, so one run covers both protocols.

Checks the run directory is complete and the recorded histories are non-trivial, then
runs the checker (``python -m chaos check``, in this process on the session's SparkSession) when
it is available and asserts every invariant passes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from chaos.history import EVENT_TYPES, FAULT_TYPES

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(900)]
REPO = Path(__file__).resolve().parents[2]
SEED = 20261121


def _lines(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("chaos") / "run"
    proc = subprocess.run([sys.executable, "-m", "chaos", "run", "--scenario", "bounded", "--duration", "60",
                           "--group-protocol", "mixed", "--seed", str(SEED), "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    print(proc.stderr[-5000:])
    assert (out / "run.json").exists(), proc.stderr[-3000:]
    info = json.loads((out / "run.json").read_text())
    assert proc.returncode == 0, (f"run failed ({info.get('status')}: {info.get('error')}; not drained "
                                  f"[group, partition, committed, end]: {info.get('not_drained')})\n"
                                  f"{proc.stderr[-3000:]}")
    return out


def test_run_dir_is_complete(run_dir: Path) -> None:
    info = json.loads((run_dir / "run.json").read_text())
    assert info["scenario"] == "bounded" and info["seed"] == SEED and info["status"] == "ok"
    assert info["group_protocol"] == "mixed"
    assert info["drained"] is True
    assert {"bootstrap", "kafka", "raft", "proxy"} <= set(info["ports"])
    assert all(p < 32768 for p in info["ports"]["raft"])
    assert info["versions"]["confluent_kafka"] and info["versions"]["kafka_python"]
    for i in range(3):
        assert (run_dir / "logs" / f"node-{i}.log").stat().st_size > 0
    for i in info["members"]:  # a node that left is exported apart (offsets-left-node-N.jsonl)
        assert (run_dir / f"offsets-node-{i}.jsonl").exists()
    assert list((run_dir / "history").glob("*.jsonl"))
    assert (run_dir / "groups.jsonl").stat().st_size > 0


def test_histories_are_non_trivial(run_dir: Path) -> None:
    counts: Counter[str] = Counter()
    procs = set()
    for f in (run_dir / "history").glob("*.jsonl"):
        for e in _lines(f):
            assert {"t", "proc", "type"} <= set(e) and e["type"] in EVENT_TYPES, e
            counts[e["type"]] += 1
            procs.add(e["proc"])
    print(dict(counts))
    assert counts["produce.ok"] > 200
    assert counts["commit.ok"] > 20
    assert counts["assign"] >= 6 and counts["fetch_committed"] >= 6
    assert counts["poll"] > 20
    assert counts["leave"] >= 6  # every consumer closed cleanly at the end
    assert any(p.startswith("ck-") for p in procs) and any(p.startswith("kp-") for p in procs)
    protocols = {(e["group"], e.get("protocol")) for f in (run_dir / "history").glob("*.jsonl") for e in _lines(f)
                 if e["type"] == "assign"}
    assert ("chaos-group-a", "consumer") in protocols and ("chaos-group-b", "consumer") not in protocols


def test_faults_recorded(run_dir: Path) -> None:
    faults = _lines(run_dir / "faults.jsonl")
    assert faults, "no fault recorded"
    for f in faults:
        assert f["type"] in FAULT_TYPES and {"t", "end", "node", "detail"} <= set(f), f


def test_the_wiped_node_came_back_as_a_learner_and_was_promoted(run_dir: Path) -> None:
    """The bounded run loses a disk second (chaos/nemesis.py): that node rejoins empty as a
    learner and is made its node's voter again once caught up."""
    info = json.loads((run_dir / "run.json").read_text())
    assert [x["node"] for x in info["disk_losses"]] and "disk_loss" in info["ops"]
    promoted = [x for x in info["learners"] if x["promoted_t"] is not None]
    assert promoted and promoted[0]["node"] == info["disk_losses"][0]["node"], info["learners"]


def test_a_node_was_replaced_under_load(run_dir: Path) -> None:
    """The bounded run replaces a node third: a new node (the next id) joins and votes in every
    group, then an old one leaves (it stops by itself); the run ends with three nodes."""
    info = json.loads((run_dir / "run.json").read_text())
    assert "replace" in info["ops"], info["ops"]
    (joined,) = info["joins"]
    assert joined["node"] == 3 and joined["promoted_s"] is not None, info["joins"]
    removed = [f for f in _lines(run_dir / "faults.jsonl") if f["type"] == "remove_node"]
    assert len(removed) == 1 and removed[0]["detail"]["stopped_by_itself"], removed
    assert len(info["members"]) == 3 and 3 in info["members"] and removed[0]["node"] not in info["members"]


def test_offsets_export_matches_final_committed(run_dir: Path) -> None:
    final = json.loads((run_dir / "final.json").read_text())
    for i in json.loads((run_dir / "run.json").read_text())["members"]:
        last: dict[tuple[str, int], int] = {}
        for r in _lines(run_dir / f"offsets-node-{i}.jsonl"):
            if not r.get("tombstone"):
                last[(r["group"], r["topic_partition"])] = r["offset"]
        for group, parts in final["committed"].items():
            for p, off in parts.items():
                assert last.get((group, int(p))) == off, (i, group, p)


def test_checker_passes(run_dir: Path, spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m chaos check RUN_DIR``, called in this process (chaos.cli.main) so that it runs on
    the session's warm SparkSession (tests/chaos/conftest.py) rather than a cold JVM of its own."""
    if not (REPO / "chaos" / "check").is_dir():
        pytest.skip("the checker (chaos/check, PySpark) is not available")
    from chaos.cli import main

    code = main(["check", str(run_dir)])
    out = capsys.readouterr().out
    print(out[-8000:])
    assert code == 0, f"invariants failed:\n{out[-6000:]}"
    verdicts = json.loads(out.strip().splitlines()[-1])["verdicts"]
    assert set(verdicts) == {f"I{i}" for i in range(1, 11)} and "fail" not in verdicts.values(), verdicts
