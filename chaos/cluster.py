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
    def __init__(self, base_dir: Path, client_ports: list[int], settings: dict[str, object] | None = None,
                 nodes: int = 3, net: NetLayout | None = None) -> None:
        self.net = net
        if net is not None:
            layout = netns_plan(net, NETNS_KAFKA_PORT, NETNS_RAFT_PORT, base_dir)
            client_ports = [NETNS_KAFKA_PORT] * nodes
        else:
            layout = free_plan(nodes, base_dir)
        super().__init__(layout, SECRET, base_dir, settings, client_ports=client_ports, log_dir=base_dir)

    def set_raft_faults(self, i: int, spec: dict[str, object]) -> None:
        """Node ``i``'s Raft link faults (cluster/link_control.py; {} = none), applied within 0.2 s."""
        path = self.layout[i].data_dir / "raft-faults.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(spec), encoding="utf-8")

    def stop_all(self, timeout: float = 20.0) -> None:
        super().stop_all(timeout)
