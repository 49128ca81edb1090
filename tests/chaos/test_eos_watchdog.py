"""An exactly-once worker that stops making progress never hangs silently (chaos/eos_workload.py
``Watchdog``): it records its open transaction as unknown, logs why, dumps every thread's stack
into its log and exits non-zero, so the run restarts it and records the exit; and it does so
even stuck in C code that holds the GIL (faulthandler's timer)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from chaos.eos_workload import Watchdog
from chaos.history import HistoryWriter

REPO = Path(__file__).resolve().parents[2]


def test_a_worker_without_progress_is_dumped_recorded_and_ended(tmp_path: Path) -> None:
    now = [0.0]
    exits: list[int] = []
    h = HistoryWriter(str(tmp_path / "w.jsonl"), "eos-w1.0")
    with open(tmp_path / "w.log", "w+", encoding="utf-8") as out:
        dog = Watchdog(h, 120.0, out=out, clock=lambda: now[0], exit_=exits.append)
        try:
            dog.progress("in a transaction", "eos-w1.0:7")
            now[0] = 119.0
            assert not dog.check() and not exits  # slow, not stuck
            now[0] = 121.0
            assert dog.check() and exits == [3]
        finally:
            dog.stop()
        out.seek(0)
        log = out.read()
    h.close()
    assert "watchdog: no progress for 121 s while in a transaction" in log
    assert "test_a_worker_without_progress_is_dumped_recorded_and_ended" in log  # this thread's stack
    (event,) = [json.loads(x) for x in (tmp_path / "w.jsonl").read_text().splitlines()]
    assert (event["type"], event["op"]) == ("txn.commit.unknown", "eos-w1.0:7")


def _stuck_worker(tmp_path: Path, hang: str) -> subprocess.CompletedProcess[str]:
    """A worker process with a 0.5 s watchdog that makes progress once, then hangs in ``hang``."""
    script = textwrap.dedent(f"""
        import re, time
        from chaos.eos_workload import Watchdog
        from chaos.history import HistoryWriter
        dog = Watchdog(HistoryWriter({str(tmp_path / "h.jsonl")!r}, "w"), 0.5, margin=0.5)
        dog.start()
        dog.progress("polling")
        def hang():
            {hang}
        hang()
    """)
    return subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=15)


def test_a_hung_worker_process_dumps_its_stacks_and_exits(tmp_path: Path) -> None:
    p = _stuck_worker(tmp_path, "time.sleep(30)  # e.g. a client call that never returns")
    assert p.returncode == 3, p.stderr
    assert "watchdog: no progress for 1 s while polling" in p.stderr and "in hang" in p.stderr, p.stderr


def test_a_worker_stuck_holding_the_gil_is_dumped_and_ended_all_the_same(tmp_path: Path) -> None:
    # a regular expression that backtracks for ages runs in C and never lets another thread run
    p = _stuck_worker(tmp_path, 're.match(r"(a+)+$", "a" * 64 + "b")')
    assert p.returncode == 1, p.stderr  # faulthandler's exit: the Python watchdog could not run
    assert "Timeout" in p.stderr and "in hang" in p.stderr, p.stderr
