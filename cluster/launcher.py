"""``kcoord up``: a local cluster of node processes, with progress and clear errors.

By default every node is on 127.0.0.1: node i listens for Kafka clients on ``base_port + i``
and for Raft on ``raft_base + 1000 * i`` (one port per node; its groups' logical addresses
count up from it). With ``--netns`` each node runs in a network namespace of its own, on its
own address and the same two ports as the others (``cluster/netns.py``), as on separate hosts.
The cluster secret is generated once into ``<data_dir>/cluster.secret`` and handed to the
nodes through the environment.
"""

from __future__ import annotations

import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from cluster import netns
from cluster.netns import NetLayout

RAFT_PORTS_PER_NODE = 1000


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


def peers_spec(layout: list[LocalNode]) -> str:
    return ",".join(f"{n.host}:{n.kafka_port}:{n.raft_port}" for n in layout)


def cluster_secret(data_dir: Path) -> str:
    """The cluster's Raft secret, generated on first use and kept in the data dir."""
    path = data_dir / "cluster.secret"
    if path.exists():
        return path.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    return secret


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT leftovers are not "in use"
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def free_raft_bases(n: int, rng: random.Random | None = None, slots: int = 64) -> list[int]:
    """Raft port bases for ``n`` nodes (``base + 1000 * i``), all below the ephemeral range
    (32768+), where an outgoing connection could otherwise take one of them."""
    rng = rng or random.Random()
    for _ in range(200):
        base = rng.randrange(10_000, 28_000, 100)
        bases = [base + RAFT_PORTS_PER_NODE * i for i in range(n)]
        if not any(port_in_use(b + s) for b in bases for s in range(0, slots, 7)):
            return bases
    raise RuntimeError("no free Raft port range below 32768")


def start_nodes(layout: list[LocalNode], secret: str, settings: dict[str, str] | None = None,
                log_dir: Path | None = None, peers: str | None = None,
                per_node: dict[int, dict[str, str]] | None = None) -> list[subprocess.Popen[str]]:
    """Start these nodes (``peers`` = the whole cluster, when only some of it is started)."""
    env = dict(os.environ, KCOORD_CLUSTER_SECRET=secret, KCOORD_PEERS=peers or peers_spec(layout),
               PYTHONUNBUFFERED="1")
    procs = []
    for n in layout:
        cmd = [*n.run_in, sys.executable, "-m", "cluster.cli", "node", "--node-id", str(n.node_id), "--host", n.host,
               "--port", str(n.kafka_port), "--data-dir", str(n.data_dir)]
        for k, v in {**(settings or {}), **(per_node or {}).get(n.node_id, {})}.items():
            cmd += ["--set", f"{k}={v}"]
        n.data_dir.mkdir(parents=True, exist_ok=True)
        stderr = open((log_dir or n.data_dir) / f"node-{n.node_id}.log", "a")  # noqa: SIM115 - child owns it
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
                                      cwd=Path(__file__).resolve().parents[1]))
        stderr.close()
    return procs


def netns_plan(net: NetLayout, kafka_port: int, raft_port: int, data_dir: Path) -> list[LocalNode]:
    return [LocalNode(i, kafka_port, raft_port, data_dir / f"node-{i}", net.addr(i), tuple(net.run_in(i)))
            for i in range(net.nodes)]


def up(nodes: int = 3, base_port: int = 9092, raft_base: int = 19000, data_dir: str = "./data",
       settings: dict[str, str] | None = None, use_netns: bool = False) -> int:
    console = Console(stderr=True)
    root = Path(data_dir).resolve()
    if use_netns:
        why = netns.unavailable()
        if why:
            console.print(f"[red]kcoord up --netns: {why}[/red]")
            return 1
        net = netns.up(nodes)
        console.print(f"[green]✓[/green] network {net.subnet}.0/24: namespaces {net.ns(0)}..{net.ns(nodes - 1)}, "
                      f"this host is {net.host_addr} on {net.host_link}")
        try:
            return _serve(console, root, netns_plan(net, base_port, 9192, root), settings)
        finally:
            netns.teardown(net.prefix)
    layout = plan(nodes, base_port, raft_base, root)
    busy = [p for n in layout for p in (n.kafka_port, n.raft_port) if port_in_use(p)]
    if busy:
        console.print(f"[red]kcoord up: port(s) {', '.join(map(str, busy))} already in use on 127.0.0.1[/red] — "
                      "stop whatever holds them or choose --base-port / --raft-port")
        return 1
    return _serve(console, root, layout, settings)


def _serve(console: Console, root: Path, layout: list[LocalNode], settings: dict[str, str] | None) -> int:
    nodes = len(layout)
    secret = cluster_secret(root)
    procs = start_nodes(layout, secret, settings)
    ready = [False] * nodes
    with console.status("starting nodes...") as status:
        deadline = time.time() + 60
        while not all(ready) and time.time() < deadline:
            for i, p in enumerate(procs):
                if ready[i]:
                    continue
                if p.poll() is not None:
                    log_path = layout[i].data_dir / f"node-{i}.log"
                    tail = log_path.read_text()[-2000:] if log_path.exists() else ""
                    console.print(f"[red]node {i} exited ({p.returncode})[/red]\n{tail}")
                    _stop(procs)
                    return 1
                assert p.stdout is not None
                os.set_blocking(p.stdout.fileno(), False)
                line = p.stdout.readline()
                if line and "listening on" in line:
                    ready[i] = True
                    console.print(f"[green]✓[/green] node {i}: kafka {layout[i].host}:{layout[i].kafka_port}, "
                                  f"raft port {layout[i].raft_port}, data {layout[i].data_dir}")
            status.update(f"starting nodes... {sum(ready)}/{nodes} up")
            time.sleep(0.1)
    if not all(ready):
        console.print("[red]kcoord up: nodes did not start in time[/red]")
        _stop(procs)
        return 1
    bootstrap = ",".join(f"{n.host}:{n.kafka_port}" for n in layout)
    console.print(f"[bold]kcoord cluster is up[/bold]: bootstrap.servers={bootstrap}  (Ctrl-C stops it)")
    print(bootstrap, flush=True)
    stop = {"now": False}

    def on_signal(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    while not stop["now"]:
        for i, p in enumerate(procs):
            if p.poll() is not None:
                console.print(f"[yellow]node {i} exited ({p.returncode}); the others keep serving[/yellow]")
                procs[i] = _Dead()  # type: ignore[call-overload]
        time.sleep(0.5)
    console.print("stopping...")
    _stop(procs)
    return 0


class _Dead:
    returncode = 0

    def poll(self) -> int:
        return 0

    def terminate(self) -> None:
        pass

    def wait(self, timeout: float | None = None) -> int:
        return 0

    def kill(self) -> None:
        pass


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
