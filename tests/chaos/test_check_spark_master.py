"""The checker against a Spark standalone cluster, as the README's ``--master spark://`` recipe
runs it: a real master and worker (``spark-class``, from the pyspark package), a run directory
the executors read by path, and a planted lost commit that must fail I1."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
# slow: 80 s of a Spark master and worker starting; every other checker test runs the same job on local[n].
pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.timeout(300)]

from tests.chaos.test_checker import History  # noqa: E402
from tests.cluster.harness import free_port  # noqa: E402


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _start(args: list[str], log: Path, ready: str, timeout: float = 60.0) -> subprocess.Popen[bytes]:
    fh = open(log, "wb")  # noqa: SIM115 - the process keeps writing to it
    proc = subprocess.Popen([str(_spark_class()), *args], stdout=fh, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + timeout
    while ready not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc)
            raise AssertionError(f"{args[0]} not ready:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def test_a_check_on_a_standalone_spark_master(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.system("java -version >/dev/null 2>&1") != 0:
        pytest.skip("no Java runtime for Spark")
    run_dir = History("lost-commit").build(tmp_path / "run")
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    procs = []
    try:
        procs.append(_start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                             "--webui-port", str(free_port())], tmp_path / "master.log", "I have been elected leader"))
        procs.append(_start(["org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
                             "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                             "--work-dir", str(tmp_path / "work")],
                            tmp_path / "worker.log", "Successfully registered with master"))
        out = tmp_path / "report"
        # the executors' Python workers need pyspark too: the same interpreter as the driver
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "KCOORD_CHECK_DRIVER_MEMORY": "1g"}
        r = subprocess.run([sys.executable, "-m", "chaos", "check", run_dir, "--master", master_url, "--out", str(out)],
                           env=env, capture_output=True, text=True, timeout=240)
        assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-3000:]  # the planted bug is found
        summary = json.loads((out / "summary.json").read_text())
        assert summary["stats"]["master"] == master_url
        assert summary["verdicts"]["I1"]["status"] == "fail"
        assert {k for k, v in summary["verdicts"].items() if v["status"] == "fail"} == {"I1"}
        # the work ran on the worker's executor, not in the driver
        assert re.search(r"Launching executor|Asked to launch executor", (tmp_path / "worker.log").read_text())
    finally:
        for p in reversed(procs):
            _stop(p)
