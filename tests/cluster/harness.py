"""Start real ``kcoord node`` processes for tests.

``NodeProcess`` runs ``python -m cluster.cli node`` on a free 127.0.0.1 port with its own
data dir, waits for the readiness line on stdout, and keeps the node's stderr log in
``<tmp>/node-<id>.log`` (printed by the fixture when a test fails). ``restart()`` starts
it again on the same data dir and port.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from cluster.tools.local_cluster import free_port

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"kcoord node (\d+) listening on ([\d.]+):(\d+)")


class NodeProcess:
    def __init__(self, base_dir: Path, node_id: int = 0, *, settings: dict[str, object] | None = None,
                 port: int | None = None, run_in: tuple[str, ...] = ()) -> None:
        self.base_dir = Path(base_dir)
        self.node_id = node_id
        self.data_dir = self.base_dir / f"node-{node_id}"
        self.log_path = self.base_dir / f"node-{node_id}.log"
        self.settings = dict(settings or {})
        self.port = port or free_port()
        self.proc: subprocess.Popen[str] | None = None
        self.run_in = run_in  # a command prefix, e.g. ("prlimit", "--nofile=512:512", "--")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> NodeProcess:
        cmd = [*self.run_in, sys.executable, "-m", "cluster.cli", "node", "--node-id", str(self.node_id), "--host", "127.0.0.1",
               "--port", str(self.port), "--data-dir", str(self.data_dir)]
        for k, v in self.settings.items():
            cmd += ["--set", f"{k}={v}"]
        log = open(self.log_path, "a")  # noqa: SIM115 - handed to the child
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        log.close()
        ready = threading.Event()
        lines: list[str] = []

        def reader() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                lines.append(line)
                if READY.search(line):
                    ready.set()

        threading.Thread(target=reader, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.is_set():
            if self.proc.poll() is not None:
                raise RuntimeError(f"node exited with {self.proc.returncode}: {''.join(lines)}\n{self.log_text()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"node not ready in {timeout}s\n{self.log_text()}")
            ready.wait(0.05)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self, *, hard: bool = False) -> NodeProcess:
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text()
        except FileNotFoundError:
            return ""
