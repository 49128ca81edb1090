"""Node processes of one cluster on this machine: the one launcher behind ``kcoord up``, the
benchmarks, the chaos runs and the cluster tests.

By default every node is on 127.0.0.1 with a free Kafka port and a Raft port below the
ephemeral range (32768+), where an outgoing connection could otherwise take it; ``plan`` gives
fixed ports instead (``kcoord up``). With a network layout (``cluster/tools/netns.py``) each node runs
in a namespace of its own, on its own address and the same two ports as the others.
``LocalCluster`` starts, signals, SIGKILLs, stops and restarts nodes; a thread per node copies
its stdout to ``node-<i>.stdout`` and notices the "listening on" line that says it is ready.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cluster.tools.netns import NetLayout

REPO_ROOT = Path(__file__).resolve().parents[2]  # nodes run from the checkout's root (python -m cluster.cli)
RAFT_PORTS_PER_NODE = 1000
READY_LINE = "listening on"


class ClusterStartError(RuntimeError):
    """A node exited or did not get ready in time (the message has its log's tail)."""


@dataclass(frozen=True, slots=True)
class LocalNode:
    node_id: int
    kafka_port: int
    raft_port: int
    data_dir: Path
    host: str = "127.0.0.1"
    run_in: tuple[str, ...] = ()  # a command prefix, e.g. to enter the node's network namespace


def plan(nodes: int, base_port: int, raft_base: int, data_dir: Path) -> list[LocalNode]:
    return [LocalNode(i, base_port + i, raft_base + RAFT_PORTS_PER_NODE * i, data_dir / f"node-{i}")
            for i in range(nodes)]


def netns_plan(net: NetLayout, kafka_port: int, raft_port: int, data_dir: Path) -> list[LocalNode]:
    return [LocalNode(i, kafka_port, raft_port, data_dir / f"node-{i}", net.addr(i), tuple(net.run_in(i)))
            for i in range(net.nodes)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT leftovers are not "in use"
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


_HANDED_OUT: set[int] = set()
PORT_SHARD_ENV = "KCOORD_PORT_SHARD"  # "k/n": choose ports from the k-th of n disjoint ranges


def _shard(low: int, high: int) -> tuple[int, int]:
    """The part of [low, high) this process chooses ports from: all of it, or its share when
    several processes start clusters at once (make test's two pytest workers set
    ``KCOORD_PORT_SHARD``), so two clusters started at the same moment never pick one port."""
    k, _, n = os.environ.get(PORT_SHARD_ENV, "0/1").partition("/")
    try:
        shard, shards = int(k), max(1, int(n))
    except ValueError:
        return low, high
    step = (high - low) // shards
    return low + step * (shard % shards), low + step * (shard % shards + 1)


def free_low_port(rng: random.Random | None = None) -> int:
    """A free port below the ephemeral range (32768+) and above the Raft ports of up to three
    nodes (bases below 28,000, + 1000 per node, + 64 slots), not handed out before by this
    process: an ephemeral one could be taken by an outgoing connection between this choice and
    the node's bind."""
    rng = rng or random.Random()
    low, high = _shard(30_000, 32_700)
    for _ in range(500):
        port = rng.randrange(low, high)
        if port not in _HANDED_OUT and not port_in_use(port):
            _HANDED_OUT.add(port)
            return port
    return free_port()


def free_raft_bases(n: int, rng: random.Random | None = None, slots: int = 64) -> list[int]:
    """Raft port bases for ``n`` nodes (``base + 1000 * i``), all below the ephemeral range
    (32768+), where an outgoing connection could otherwise take one of them."""
    rng = rng or random.Random()
    # a cluster's Raft ports run from its base to base + 1000 * (n - 1) + slots, all within the share
    low, high = _shard(10_000, 30_000)
    last = max(low + 100, high - RAFT_PORTS_PER_NODE * (n - 1) - slots)
    for _ in range(200):
        base = rng.randrange(low, last, 100)
        bases = [base + RAFT_PORTS_PER_NODE * i for i in range(n)]
        if not any(port_in_use(b + s) for b in bases for s in range(0, slots, 7)):
            return bases
    raise ClusterStartError("no free Raft port range below 32768")


def free_plan(nodes: int, data_dir: Path, raft_slots: int = 64) -> list[LocalNode]:
    bases = free_raft_bases(nodes, slots=raft_slots)
    return [LocalNode(i, free_low_port(), bases[i], data_dir / f"node-{i}") for i in range(nodes)]


def peers_spec(layout: list[LocalNode], client_ports: list[int] | None = None) -> str:
    """``host:kafka_port:raft_port`` per node; ``client_ports``: what clients are told instead
    of each node's own port (e.g. the chaos run's fault proxies)."""
    ports = client_ports or [n.kafka_port for n in layout]
    return ",".join(f"{n.host}:{ports[n.node_id]}:{n.raft_port}" for n in layout)


def start_nodes(layout: list[LocalNode], secret: str, settings: dict[str, str] | None = None,
                log_dir: Path | None = None, peers: str | None = None,
                per_node: dict[int, dict[str, str]] | None = None,
                private: dict[str, str] | None = None, root: Path = REPO_ROOT) -> list[subprocess.Popen[str]]:
    """Start these nodes (``peers`` = the whole cluster, when only some of it is started); each
    writes its log to ``node-<i>.log`` in ``log_dir`` (default: its data dir). ``private``: settings
    that must not show on a command line (passwords), given through the environment. ``root``: the
    source tree the nodes run (another release's, in the rolling-upgrade test)."""
    env = dict(os.environ, KCOORD_CLUSTER_SECRET=secret, PYTHONUNBUFFERED="1")
    if peers != "":  # "": a node started with bootstrap instead
        env["KCOORD_PEERS"] = peers or peers_spec(layout)
    if root != REPO_ROOT:  # its packages first (the installed kcoord is this checkout's)
        env["PYTHONPATH"] = os.pathsep.join(x for x in (str(root), env.get("PYTHONPATH", "")) if x)
    env.update({"KCOORD_" + k.upper(): v for k, v in (private or {}).items()})
    procs = []
    for n in layout:
        cmd = [*n.run_in, sys.executable, "-m", "cluster.cli", "node", "--node-id", str(n.node_id), "--host", n.host,
               "--port", str(n.kafka_port), "--data-dir", str(n.data_dir)]
        for k, v in {**(settings or {}), **(per_node or {}).get(n.node_id, {})}.items():
            cmd += ["--set", f"{k}={v}"]
        n.data_dir.mkdir(parents=True, exist_ok=True)
        stderr = open((log_dir or n.data_dir) / f"node-{n.node_id}.log", "a")  # noqa: SIM115 - child owns it
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
                                      cwd=root))
        stderr.close()
    return procs


class LocalCluster:
    """The nodes of ``layout``, each started on demand: ``procs[i]`` is node i's process or None."""

    def __init__(self, layout: list[LocalNode], secret: str, base_dir: Path,
                 settings: dict[str, object] | None = None, per_node: dict[int, dict[str, object]] | None = None,
                 client_ports: list[int] | None = None, log_dir: Path | None = None,
                 private: dict[str, str] | None = None) -> None:
        self.layout = layout
        self.secret = secret
        self.base_dir = base_dir
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = log_dir  # None: each node's log is in its data dir
        self.settings = {k: str(v) for k, v in (settings or {}).items()}
        self.per_node = {i: {k: str(v) for k, v in d.items()} for i, d in (per_node or {}).items()}
        self.private = dict(private or {})  # field name -> value, passed through the environment
        self.client_ports = client_ports or [n.kafka_port for n in layout]  # what clients are told
        self.procs: list[subprocess.Popen[str] | None] = [None] * len(layout)
        self.paused: set[int] = set()
        self._ready = [threading.Event() for _ in layout]
        self.on_spawn: Callable[[int], None] | None = None  # called with each new node's pid
        self.roots: dict[int, Path] = {}  # a node's source tree, when not this checkout (an upgrade test)
        # Nodes that join the running cluster (``join``): their ``peers`` name every node, the
        # others' name the nodes the cluster was formed with.
        self.joining: set[int] = set()
        # Joining nodes started with only ``bootstrap`` (the original nodes' Raft addresses), no peers.
        self.bootstrapping: set[int] = set()

    @property
    def n(self) -> int:
        return len(self.layout)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{n.host}:{self.client_ports[n.node_id]}" for n in self.layout)

    def address(self, i: int) -> str:
        return f"{self.layout[i].host}:{self.layout[i].kafka_port}"

    def peers(self, joiner: int | None = None) -> str:
        """The ``peers`` of a node: the nodes the cluster is formed with, and a joining node's list
        those and then itself (node ids are positions: the nodes that join before it too)."""
        return peers_spec([n for n in self.layout if n.node_id not in self.joining
                           or joiner is not None and n.node_id <= joiner], self.client_ports)

    def _log_dir(self, i: int) -> Path:
        return self.log_dir or self.layout[i].data_dir

    def log_path(self, i: int) -> Path:
        return self._log_dir(i) / f"node-{i}.log"

    def log_text(self, i: int) -> str:
        p = self.log_path(i)
        return p.read_text(errors="replace") if p.exists() else ""

    def log_tail(self, i: int, chars: int = 3000) -> str:
        return self.log_text(i)[-chars:]

    def alive(self, i: int) -> bool:
        p = self.procs[i]
        return p is not None and p.poll() is None

    def ready(self, i: int) -> bool:
        return self._ready[i].is_set()

    def pid(self, i: int) -> int:
        p = self.procs[i]
        if p is None:
            raise ClusterStartError(f"node {i} is not running")
        return p.pid

    # ---------------------------------------------------------------- start

    def spawn(self, *which: int) -> None:
        """Start these nodes (all when none given) that are not running; do not wait."""
        for i in which or range(self.n):
            if self.alive(i):
                continue
            self._ready[i] = threading.Event()
            joins = i in self.joining
            settings = {**self.settings, "join": "true"} if joins else self.settings
            peers = self.peers(i if joins else None)
            if i in self.bootstrapping:
                formed = [n for n in self.layout if n.node_id not in self.joining]
                settings = {**self.settings, "bootstrap": ",".join(f"{n.host}:{n.raft_port}" for n in formed),
                            "raft_port": str(self.layout[i].raft_port)}
                peers = ""
            (proc,) = start_nodes([self.layout[i]], self.secret, settings, log_dir=self.log_dir,
                                  peers=peers, per_node=self.per_node,
                                  private=self.private,
                                  root=self.roots.get(i, REPO_ROOT))
            self.procs[i] = proc
            self.paused.discard(i)
            if self.on_spawn is not None:
                self.on_spawn(proc.pid)
            threading.Thread(target=self._drain, args=(i, proc, self._ready[i]), daemon=True,
                             name=f"node-{i}-stdout").start()

    def start(self, *which: int, timeout: float = 45.0) -> LocalCluster:
        """Start these nodes (all when none given) and wait until each listens."""
        ids = list(which) if which else list(range(self.n))
        self.spawn(*ids)
        deadline = time.monotonic() + timeout
        for i in ids:
            while not self._ready[i].wait(0.05):
                proc = self.procs[i]
                if proc is None or proc.poll() is not None:
                    code = None if proc is None else proc.returncode
                    raise ClusterStartError(f"node {i} exited {code}:\n{self.log_tail(i)}")
                if time.monotonic() > deadline:
                    raise ClusterStartError(f"node {i} not ready in {timeout:.0f}s:\n{self.log_tail(i)}")
        return self

    def _drain(self, i: int, proc: subprocess.Popen[str], ready: threading.Event) -> None:
        assert proc.stdout is not None
        try:
            with open(self._log_dir(i) / f"node-{i}.stdout", "a", encoding="utf-8") as out:
                for line in proc.stdout:
                    out.write(line)
                    out.flush()
                    if READY_LINE in line:
                        ready.set()
        except (OSError, ValueError):
            pass

    # ---------------------------------------------------------------- signals and stops

    def signal(self, i: int, sig: int) -> bool:
        proc = self.procs[i]
        if proc is None or proc.poll() is not None:
            return False
        os.kill(proc.pid, sig)
        return True

    def kill(self, i: int) -> float | None:
        """SIGKILL node ``i`` (a paused one too); the monotonic time of the kill, None if it was
        not running."""
        proc = self.procs[i]
        self.procs[i] = None
        self.paused.discard(i)
        if proc is None or proc.poll() is not None:
            return None
        t = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        return t

    def terminate(self, i: int, timeout: float = 20.0) -> bool:
        """SIGTERM and wait: a clean stop (SIGKILL if it does not stop in time)."""
        proc = self.procs[i]
        self.procs[i] = None
        if proc is None or proc.poll() is not None:
            self.paused.discard(i)
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

    def stop_all(self, timeout: float = 10.0) -> None:
        """SIGTERM every node at once, then wait for each (SIGKILL past ``timeout``)."""
        running = [(i, p) for i, p in enumerate(self.procs) if p is not None and p.poll() is None]
        for i, p in running:
            if i in self.paused:
                os.kill(p.pid, signal.SIGCONT)
            p.terminate()
        for _, p in running:
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self.procs = [None] * self.n
        self.paused.clear()

    def kill_all(self) -> None:
        for i in range(self.n):
            self.kill(i)
