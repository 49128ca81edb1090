"""``kcoord up``: a local cluster of node processes, with progress and clear errors.

By default every node is on 127.0.0.1: node i listens for Kafka clients on ``base_port + i``
and for Raft on ``raft_base + 1000 * i`` (one port per node; its groups' logical addresses
count up from it). With ``--netns`` each node runs in a network namespace of its own, on its
own address and the same two ports as the others (``cluster/tools/netns.py``), as on separate hosts.
The cluster secret is generated once into ``<data_dir>/cluster.secret`` and handed to the
nodes through the environment.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from pathlib import Path

from rich.console import Console

from cluster.tools import netns
from cluster.tools.local_cluster import LocalCluster, LocalNode, netns_plan, plan, port_in_use
from cluster.tools.secure_setup import SecureSetup, prepare


def cluster_secret(data_dir: Path) -> str:
    """The cluster's Raft secret, generated on first use and kept in the data dir."""
    path = data_dir / "cluster.secret"
    if path.exists():
        return path.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_hex(32)  # hex: what the node's strength estimate counts in full (cluster.config)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    return secret


def up(nodes: int = 3, base_port: int = 9092, raft_base: int = 19000, data_dir: str = "./data",
       settings: dict[str, str] | None = None, use_netns: bool = False, secure: bool = False) -> int:
    console = Console(stderr=True)
    root = Path(data_dir).resolve()
    if use_netns and secure:
        console.print("[red]kcoord up: --secure and --netns do not go together yet[/red]")
        return 1
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
    setup = prepare(root, layout) if secure else None
    busy = [p for n in layout for p in (n.kafka_port, n.raft_port) if port_in_use(p)]
    busy += [p for p in (setup.client_ports if setup else []) if port_in_use(p)]
    if busy:
        console.print(f"[red]kcoord up: port(s) {', '.join(map(str, busy))} already in use on 127.0.0.1[/red] — "
                      "stop whatever holds them or choose --base-port / --raft-port")
        return 1
    return _serve(console, root, layout, settings, setup)


def _serve(console: Console, root: Path, layout: list[LocalNode], settings: dict[str, str] | None,
           secure: SecureSetup | None = None) -> int:
    nodes = len(layout)
    if secure is None:
        cluster = LocalCluster(layout, cluster_secret(root), root, dict(settings or {}))
    else:  # the secure settings, then the user's --set on top
        cluster = LocalCluster(layout, cluster_secret(root), root, {**secure.settings, **(settings or {})},
                               per_node=secure.per_node, client_ports=secure.client_ports, private=secure.private)
    cluster.spawn()
    shown = [False] * nodes
    with console.status("starting nodes...") as status:
        deadline = time.time() + 60
        while not all(shown) and time.time() < deadline:
            for i in range(nodes):
                if shown[i]:
                    continue
                if cluster.ready(i):
                    shown[i] = True
                    console.print(f"[green]✓[/green] node {i}: kafka {layout[i].host}:{layout[i].kafka_port}, "
                                  f"raft port {layout[i].raft_port}, data {layout[i].data_dir}")
                elif not cluster.alive(i):
                    proc = cluster.procs[i]
                    code = proc.returncode if proc is not None else None
                    console.print(f"[red]node {i} exited ({code})[/red]\n{cluster.log_tail(i, 2000)}")
                    cluster.stop_all()
                    return 1
            status.update(f"starting nodes... {sum(shown)}/{nodes} up")
            time.sleep(0.1)
    if not all(shown):
        console.print("[red]kcoord up: nodes did not start in time[/red]")
        cluster.stop_all()
        return 1
    console.print(f"[bold]kcoord cluster is up[/bold]: bootstrap.servers={cluster.bootstrap}  (Ctrl-C stops it)")
    if secure is not None:
        console.print(f"SASL_SSL (SCRAM-SHA-512) with ACLs on; the admin's client settings: {secure.admin_properties}\n"
                      f"  e.g. kcoord topics list --command-config {secure.admin_properties}\n"
                      f"  then kcoord users create / kcoord acls add (see docs/security.md)")
    print(cluster.bootstrap, flush=True)
    stop = {"now": False}

    def on_signal(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    gone: set[int] = set()
    while not stop["now"]:
        for i in range(nodes):
            if i not in gone and not cluster.alive(i):
                gone.add(i)
                proc = cluster.procs[i]
                code = proc.returncode if proc is not None else None
                console.print(f"[yellow]node {i} exited ({code}); the others keep serving[/yellow]")
        time.sleep(0.5)
    console.print("stopping...")
    cluster.stop_all()
    return 0
