"""The chaos run's local 3-node cluster: start, SIGKILL, SIGTERM, SIGSTOP/SIGCONT, restart.

The launcher is ``cluster.tools.local_cluster.LocalCluster``: Kafka ports are free ephemeral ports,
Raft ports are picked below the ephemeral range (32768+) so an outgoing connection can never
grab one of them. Each node advertises the port of its fault proxy
(``chaos/proxy.py``) as its Kafka address, so every client connection to node i goes
through proxy i; the node itself listens on its own port.

With a network layout (``cluster/tools/netns.py``) each node runs in its own namespace on its own
address instead, with the same ports as the others and no proxy: clients reach the nodes
over the layout's bridge, and network faults are nftables rules (``cluster/tools/netns_faults.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

from cluster.tools.local_cluster import LocalCluster, free_plan, free_port, netns_plan
from cluster.tools.netns import NetLayout

SECRET = "chaos-cluster-secret-8d2e4b6f1a3c50796e1f4a2b9c07d35e"  # 128 random bits, as a node demands
NETNS_KAFKA_PORT = 9092
NETNS_RAFT_PORT = 9192

__all__ = ["ChaosCluster", "free_port"]


class ChaosCluster(LocalCluster):
    """``nodes`` nodes form the cluster; ``spare`` more are laid out (ports, addresses) for nodes
    that join it during the run (``add_node``, ``replace`` faults), each under the next node id.
    ``members`` are the nodes of the cluster now: every fault and every restart picks among them
    (a removed node stays down, a spare is started only to join)."""

    def __init__(self, base_dir: Path, client_ports: list[int], settings: dict[str, object] | None = None,
                 nodes: int = 3, net: NetLayout | None = None, spare: int = 0) -> None:
        self.net = net
        if net is not None:
            layout = netns_plan(net, NETNS_KAFKA_PORT, NETNS_RAFT_PORT, base_dir)
            client_ports = [NETNS_KAFKA_PORT] * len(layout)
        else:
            layout = free_plan(nodes + spare, base_dir)
        super().__init__(layout, SECRET, base_dir, settings, client_ports=client_ports, log_dir=base_dir)
        self.joining = set(range(nodes, len(layout)))
        self.members: list[int] = list(range(nodes))

    def start(self, *which: int, timeout: float = 45.0) -> ChaosCluster:
        """Start these nodes (the members when none given)."""
        super().start(*(which or tuple(self.members)), timeout=timeout)
        return self

    def spares(self) -> list[int]:
        """Laid-out nodes that never ran: the next joins first."""
        return [i for i in sorted(self.joining) if self.procs[i] is None]

    def set_raft_faults(self, i: int, spec: dict[str, object]) -> None:
        """Node ``i``'s Raft link faults (cluster/link_control.py; {} = none), applied within 0.2 s."""
        path = self.layout[i].data_dir / "raft-faults.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(spec), encoding="utf-8")

    def stop_all(self, timeout: float = 20.0) -> None:
        super().stop_all(timeout)
