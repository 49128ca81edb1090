"""A bounded exactly-once chaos run end to end: ``python -m chaos run --scenario eos-bounded`` (the
transaction coordinator, the group coordinator and data leaders killed and cut off, a worker
SIGKILLed, while a confluent-kafka worker on transaction version 1 and a Java one on version 2
consume-transform-produce in transactions), then the
checker (in this process, on the session's SparkSession): I10 (every input record exactly once in
the committed output, no aborted record read by the read_committed reader) and I1-I9 must pass. The ten-minute run is ``--scenario eos``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytestmark = [pytest.mark.chaos, pytest.mark.timeout(900)]
REPO = Path(__file__).resolve().parents[2]
SEED = 20261125


def test_exactly_once_holds_through_a_bounded_eos_run(tmp_path: Path, spark: Any,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "chaos", "run", "--scenario", "eos-bounded", "--duration", "34",
                           "--seed", str(SEED), "--out", str(out), "--eos-clients", "mixed"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    print(proc.stderr[-4000:])
    info = json.loads((out / "run.json").read_text())
    assert proc.returncode == 0 and info["status"] == "ok", (info.get("status"), info.get("error"),
                                                             info.get("not_drained"), info.get("eos"))
    assert info["workload"] == "eos" and info["groups"] == ["chaos-eos"]
    assert info["eos"]["input"] > 500 and info["eos"]["committed"] == info["eos"]["input"], info["eos"]
    assert info["eos"]["open_partitions"] == 0
    faults = [json.loads(x) for x in (out / "faults.jsonl").read_text().splitlines() if x.strip()]
    reasons = {f["detail"].get("reason") or f["detail"].get("kind") for f in faults}
    assert "txn_coordinator" in reasons, reasons  # the plan starts with it

    # ``python -m chaos check RUN_DIR``, called in this process (chaos.cli.main) so that it runs on
    # the session's SparkSession (tests/chaos/conftest.py) rather than a cold JVM of its own
    from chaos.cli import main

    code = main(["check", str(out), "--master", "local[1]"])
    stdout = capsys.readouterr().out
    print(stdout[-4000:])
    verdicts = json.loads(stdout.strip().splitlines()[-1])["verdicts"]
    assert verdicts["I10"] == "pass", stdout[-3000:]
    assert code == 0, stdout[-3000:]
    summary = json.loads((out / "report" / "summary.json").read_text())
    stats = summary["verdicts"]["I10"]["stats"]
    assert stats["reader_records"] > 0 and stats["transactions"].get("ok", 0) > 20, stats
    assert stats["aborted_output"] > 0, stats  # the workers abort one transaction in ten on purpose
    # both workers committed transactions: the Java one (the last) on transaction version 2
    ok_by = {p.name.split(".")[0] for p in (out / "history").glob("eos-w*.jsonl") if '"txn.commit.ok"' in p.read_text()}
    assert ok_by == {"eos-w1", "eos-w2"}, ok_by
