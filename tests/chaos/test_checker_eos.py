"""I10, the exactly-once invariant (chaos/check/exactly_once.py), on a small hand-made run: a clean
one passes, and each planted defect is flagged with its kind. ``spark``: tests/chaos/conftest.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytestmark = [pytest.mark.chaos, pytest.mark.timeout(240)]

from chaos.check.exactly_once import check_i10  # noqa: E402
from chaos.check.model import Options, Verdict  # noqa: E402
from chaos.check.tables import load  # noqa: E402
from chaos.eos_workload import output_value  # noqa: E402

IN = "chaos-topic"


def build(run_dir: Path, bug: str | None) -> str:
    """Inputs p0 and p1, offsets 0-2. Transaction A (ok) writes p0's outputs to output partition
    0; B (aborted) writes p1's to output partition 1, C (ok) writes them again after B's."""
    inputs = [(p, o, f"in-{p}-{o}") for p in (0, 1) for o in range(3)]
    events: list[dict[str, Any]] = []
    committed: list[tuple[int, int, str]] = []
    everything: list[tuple[int, int, str]] = []

    def txn(n: int, ins: list[tuple[int, int, str]], out_p: int, start: int, status: str,
            visible: bool) -> list[tuple[int, int, str]]:
        op, tag = f"w:{n}", f"w#{n}"
        events.append({"t": float(n), "proc": "w", "type": "txn.commit.invoke", "op": op, "txn": tag,
                       "outputs": len(ins), "records": [[IN, p, o, v] for p, o, v in ins]})
        events.append({"t": n + 0.5, "proc": "w", "type": f"txn.commit.{status}", "op": op, "error": None})
        recs = [(out_p, start + i, output_value(p, o, v, tag)) for i, (p, o, v) in enumerate(ins)]
        everything.extend(recs)
        if visible:
            committed.extend(recs)
        return recs

    txn(1, inputs[:3], 0, 0, "ok", True)
    txn(2, inputs[3:], 1, 0, "fail", bug == "failed-visible")
    c = txn(3, inputs[3:], 1, 4, "ok", True)
    if bug == "duplicate":
        txn(4, inputs[:1], 2, 0, "ok", True)
    if bug == "lost-commit":
        committed.remove(c[-1])
    reads = [[IN + "-out", p, o, v] for p, o, v in committed]
    if bug == "aborted-read":
        reads.append([IN + "-out", 1, 1, everything[4][2]])
    events.append({"t": 5.0, "proc": "r", "type": "read", "records": reads})
    hist = run_dir / "history"
    hist.mkdir(parents=True)
    for proc in ("w", "r"):
        (hist / f"{proc}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events if e["proc"] == proc))
    lines = [{"scan": "input", "partition": p, "offset": o, "value": v} for p, o, v in inputs]
    lines += [{"scan": "committed", "partition": p, "offset": o, "value": v} for p, o, v in committed]
    lines += [{"scan": "all", "partition": p, "offset": o, "value": v} for p, o, v in everything]
    lines += [{"scan": "ends", "partition": 0, "high_watermark": 4, "last_stable_offset": 4},
              {"scan": "ends", "partition": 1, "high_watermark": 8, "last_stable_offset": 4 if bug == "open" else 8}]
    (run_dir / "eos-final.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(run_dir)


def i10(spark: Any, tmp_path: Path, bug: str | None) -> Verdict:
    run_dir = build(tmp_path / (bug or "clean"), bug)
    return check_i10(spark, run_dir, load(spark, run_dir), Options(max_examples=20))


def test_a_clean_exactly_once_run_passes(spark: Any, tmp_path: Path) -> None:
    v = i10(spark, tmp_path, None)
    assert v.status == "pass", v.counterexamples
    assert v.stats["input_records"] == 6 and v.stats["committed_output"] == 6 and v.stats["aborted_output"] == 3
    assert v.stats["transactions"] == {"ok": 2, "fail": 1}


@pytest.mark.parametrize(("bug", "want"), [
    ("duplicate", {"duplicate"}),
    ("lost-commit", {"lost-commit", "missing"}),
    ("failed-visible", {"failed-visible", "duplicate"}),
    ("aborted-read", {"aborted-read"}),
    ("open", {"open-transaction"}),
])
def test_each_planted_defect_is_flagged(spark: Any, tmp_path: Path, bug: str, want: set[str]) -> None:
    v = i10(spark, tmp_path, bug)
    assert v.status == "fail"
    assert {ce["kind"] for ce in v.counterexamples} == want, v.counterexamples


def test_a_run_without_exactly_once_workers_is_skipped(spark: Any, tmp_path: Path) -> None:
    run_dir = tmp_path / "classic"
    (run_dir / "history").mkdir(parents=True)
    (run_dir / "history" / "p.jsonl").write_text(json.dumps(
        {"t": 1.0, "proc": "p", "type": "produce.ok", "topic": IN, "partition": 0, "offset": 0, "value": "v"}) + "\n")
    v = check_i10(spark, str(run_dir), load(spark, str(run_dir)), Options())
    assert v.status == "skipped"
