"""The chaos run's local 3-node cluster: start, SIGKILL, SIGTERM, SIGSTOP/SIGCONT, restart.

Same layout rules as ``tests/cluster/cluster_harness.py``: Kafka ports are free ephemeral
ports, Raft ports are picked below the ephemeral range (32768+) so an outgoing connection
can never grab one of them. Each node advertises the port of its fault proxy
(``chaos/proxy.py``) as its Kafka address, so every client connection to node i goes
through proxy i; the node itself listens on its own port.

With a network layout (``cluster/netns.py``) each node runs in its own namespace on its own
address instead, with the same ports as the others and no proxy: clients reach the nodes
over the layout's bridge, and network faults are nftables rules (``cluster/netns_faults.py``).
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from cluster.launcher import LocalNode, free_raft_bases, netns_plan, start_nodes
from cluster.netns import NetLayout

SECRET = "chaos-cluster-secret"
NETNS_KAFKA_PORT = 9092
NETNS_RAFT_PORT = 9192
RAFT_SLOTS_CHECKED = 64


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def raft_bases(n: int, rng: random.Random | None = None) -> list[int]:
    return free_raft_bases(n, rng, RAFT_SLOTS_CHECKED)


class ChaosCluster:
    def __init__(self, base_dir: Path, client_ports: list[int], settings: dict[str, object] | None = None,
                 nodes: int = 3, net: NetLayout | None = None) -> None:
        self.base_dir = base_dir
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.settings = {k: str(v) for k, v in (settings or {}).items()}
        self.net = net
        if net is not None:
            self.layout = netns_plan(net, NETNS_KAFKA_PORT, NETNS_RAFT_PORT, base_dir)
            client_ports = [NETNS_KAFKA_PORT] * nodes
        else:
            bases = raft_bases(nodes)
            self.layout = [LocalNode(i, free_port(), bases[i], base_dir / f"node-{i}") for i in range(nodes)]
        self.client_ports = client_ports  # what clients see (the proxies, or the nodes' own ports)
        self.procs: list[subprocess.Popen[str] | None] = [None] * nodes
        self.paused: set[int] = set()
        self._ready: list[threading.Event] = [threading.Event() for _ in range(nodes)]
        self.on_spawn: Callable[[int], None] | None = None  # called with each new node pid

    @property
    def n(self) -> int:
        return len(self.layout)

    def peers(self) -> str:
        return ",".join(f"{n.host}:{self.client_ports[n.node_id]}:{n.raft_port}" for n in self.layout)

    def bootstrap(self) -> str:
        return ",".join(f"{n.host}:{self.client_ports[n.node_id]}" for n in self.layout)

    def log_path(self, i: int) -> Path:
        return self.base_dir / f"node-{i}.log"

    def log_tail(self, i: int, chars: int = 3000) -> str:
        p = self.log_path(i)
        return p.read_text(errors="replace")[-chars:] if p.exists() else ""

    def set_raft_faults(self, i: int, spec: dict[str, object]) -> None:
        """Node ``i``'s Raft link faults (cluster/link_control.py; {} = none), applied within 0.2 s."""
        import json

        path = self.layout[i].data_dir / "raft-faults.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(spec), encoding="utf-8")

    def alive(self, i: int) -> bool:
        p = self.procs[i]
        return p is not None and p.poll() is None

    def _drain(self, i: int, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        with open(self.base_dir / f"node-{i}.stdout", "a", encoding="utf-8") as out:
            for line in proc.stdout:
                out.write(line)
                out.flush()
                if "listening on" in line:
                    self._ready[i].set()

    def start(self, *which: int, timeout: float = 45.0) -> None:
        ids = list(which) if which else list(range(self.n))
        for i in ids:
            if self.alive(i):
                continue
            self._ready[i] = threading.Event()
            (proc,) = start_nodes([self.layout[i]], SECRET, self.settings, log_dir=self.base_dir,
                                  peers=self.peers())
            self.procs[i] = proc
            if self.on_spawn is not None:
                self.on_spawn(proc.pid)
            self.paused.discard(i)
            threading.Thread(target=self._drain, args=(i, proc), daemon=True, name=f"node-{i}-stdout").start()
        deadline = time.monotonic() + timeout
        for i in ids:
            while not self._ready[i].wait(0.1):
                running = self.procs[i]
                if running is None or running.poll() is not None:
                    raise RuntimeError(f"node {i} exited:\n{self.log_tail(i)}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"node {i} not ready:\n{self.log_tail(i)}")

    def signal(self, i: int, sig: int) -> bool:
        proc = self.procs[i]
        if proc is None or proc.poll() is not None:
            return False
        os.kill(proc.pid, sig)
        return True

    def kill(self, i: int) -> bool:
        """SIGKILL (a paused node is killed too)."""
        proc = self.procs[i]
        if proc is None or proc.poll() is not None:
            self.procs[i] = None
            return False
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        self.procs[i] = None
        self.paused.discard(i)
        return True

    def terminate(self, i: int, timeout: float = 20.0) -> bool:
        """SIGTERM and wait: a clean stop (SIGKILL if it does not stop in time)."""
        proc = self.procs[i]
        if proc is None or proc.poll() is not None:
            self.procs[i] = None
            return False
        if i in self.paused:
            os.kill(proc.pid, signal.SIGCONT)
            self.paused.discard(i)
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        self.procs[i] = None
        return True

    def pause(self, i: int) -> bool:
        if self.signal(i, signal.SIGSTOP):
            self.paused.add(i)
            return True
        return False

    def resume(self, i: int) -> bool:
        if i in self.paused:
            self.paused.discard(i)
            return self.signal(i, signal.SIGCONT)
        return False

    def stop_all(self) -> None:
        for i in range(self.n):
            self.terminate(i)
