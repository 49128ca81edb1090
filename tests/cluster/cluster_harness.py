"""A real 3-node kcoord cluster for tests: node processes on 127.0.0.1, SIGKILL and restart.

Kafka ports are free ephemeral ports; Raft ports are picked below the ephemeral range
(32768+), where an outgoing connection could otherwise grab one of them. With ``netns=True``
each node runs in a network namespace of its own on its own address (``cluster/netns.py``),
so tests can cut real links between nodes with nftables; ``kill_all`` removes the namespaces.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from cluster import netns
from cluster.launcher import LocalNode, free_raft_bases, netns_plan, peers_spec, start_nodes
from tests.cluster.harness import free_port

SECRET = "test-cluster-secret"


class Cluster:
    def __init__(self, base_dir: Path, settings: dict[str, object] | None = None, nodes: int = 3,
                 per_node: dict[int, dict[str, object]] | None = None, netns: bool = False) -> None:
        self.base_dir = base_dir
        self.settings = {k: str(v) for k, v in (settings or {}).items()}
        self.per_node = {i: {k: str(v) for k, v in d.items()} for i, d in (per_node or {}).items()}
        self.net = _netns_up(nodes) if netns else None
        if self.net is not None:
            self.layout = netns_plan(self.net, 9092, 9192, base_dir)
        else:
            bases = free_raft_bases(nodes)
            self.layout = [LocalNode(i, free_port(), bases[i], base_dir / f"node-{i}") for i in range(nodes)]
        self.procs: list[subprocess.Popen[str] | None] = [None] * nodes

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{n.host}:{n.kafka_port}" for n in self.layout)

    def address(self, i: int) -> str:
        return f"{self.layout[i].host}:{self.layout[i].kafka_port}"

    def log_path(self, i: int) -> Path:
        return self.base_dir / f"node-{i}.log"

    def log_text(self, i: int) -> str:
        p = self.log_path(i)
        return p.read_text(errors="replace") if p.exists() else ""

    def start(self, *which: int, timeout: float = 30.0) -> Cluster:
        ids = list(which) if which else list(range(len(self.layout)))
        for i in ids:
            (proc,) = start_nodes([self.layout[i]], SECRET, self.settings, log_dir=self.base_dir,
                                  peers=peers_spec(self.layout), per_node=self.per_node)
            self.procs[i] = proc
        deadline = time.monotonic() + timeout
        for i in ids:
            proc = self.procs[i]
            assert proc is not None and proc.stdout is not None
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"node {i} exited {proc.returncode}:\n{self.log_text(i)[-3000:]}")
                line = proc.stdout.readline()
                if "listening on" in line:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"node {i} not ready:\n{self.log_text(i)[-3000:]}")
        return self

    def kill(self, i: int) -> None:
        proc = self.procs[i]
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        self.procs[i] = None

    def kill_all(self) -> None:
        for i in range(len(self.layout)):
            self.kill(i)
        if self.net is not None:
            netns.teardown(self.net.prefix)

    def pid(self, i: int) -> int:
        proc = self.procs[i]
        assert proc is not None
        return proc.pid


def _netns_up(nodes: int) -> netns.NetLayout:
    why = netns.unavailable()
    if why:
        raise RuntimeError(f"netns cluster requested: {why}")
    return netns.up(nodes)
