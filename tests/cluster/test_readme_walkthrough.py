"""The README's "First steps", run as a new user would: `kcoord up`, then the commands shown.

The commands are read from the README's first-steps block; the only change is the bootstrap
address (the test's cluster runs on free ports instead of 9092-9094).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster.tools.local_cluster import free_raft_bases, port_in_use
from tests.cluster.harness import free_port

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


def first_steps() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("## First steps", 1)[1].split("```", 2)[1]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_readme_first_steps_give_a_cluster_a_group_and_a_describe_table(tmp_path: Path) -> None:
    base = free_port()
    while base > 60000 or any(port_in_use(base + i) for i in range(3)):
        base = free_port()
    up = subprocess.Popen([sys.executable, "-m", "cluster.cli", "up", "--base-port", str(base),
                           "--raft-port", str(free_raft_bases(3)[0]), "--data-dir", str(tmp_path / "data")],
                          cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    demo: subprocess.Popen[str] | None = None
    try:
        assert up.stdout is not None
        bootstrap = up.stdout.readline().strip()  # `kcoord up` prints the bootstrap list once up
        assert re.fullmatch(r"127\.0\.0\.1:\d+(,127\.0\.0\.1:\d+){2}", bootstrap), bootstrap
        env = dict(os.environ, PATH=f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}")
        outputs = {}
        for cmd in first_steps():
            if cmd.startswith(". "):
                continue  # activating the venv: PATH above does that
            cmd = cmd.replace("127.0.0.1:9092", bootstrap)
            if cmd.startswith("kcoord "):
                cmd += f" --bootstrap-server {bootstrap}"
            if cmd.endswith("&"):
                env_part, _, prog = cmd[:-1].strip().partition(" ")
                k, v = env_part.split("=", 1)
                demo = subprocess.Popen(prog.split(), cwd=ROOT, env=dict(env, **{k: v}),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(8)  # the demo joins its group and commits
                continue
            for _ in range(20):  # the group may still be forming
                proc = subprocess.run(cmd, shell=True, cwd=ROOT, env=env, capture_output=True, text=True,
                                      timeout=60)
                if proc.returncode == 0 and ("describe" not in cmd or "demo-group" in proc.stdout):
                    break
                time.sleep(1)
            assert proc.returncode == 0, f"{cmd}\n{proc.stdout}\n{proc.stderr}"
            outputs[cmd.split(" --bootstrap-server")[0]] = proc.stdout
        describe = outputs["kcoord groups describe --group demo-group"]
        header = next(line.split() for line in describe.splitlines() if line.startswith("GROUP"))
        assert header == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                          "HOST", "CLIENT-ID"]
        rows = [line.split() for line in describe.splitlines() if line.startswith("demo-group")]
        assert sorted(int(r[2]) for r in rows) == list(range(6)) and all(r[1] == "demo" for r in rows)
        assert sum(1 for line in outputs["kcoord status"].splitlines() if " up" in line) >= 3
    finally:
        if demo is not None:
            demo.kill()
        up.send_signal(signal.SIGINT)
        try:
            up.wait(30)
        except subprocess.TimeoutExpired:
            up.kill()
