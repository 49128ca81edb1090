"""How a chaos run breaks the network: real packet filters in namespaces, or the fallback.

``netns`` (root, iproute2 and nftables present): every node runs in its own network
namespace (``cluster/tools/netns.py``); cuts between nodes, packet loss and cutting clients off a
node are nftables rules in the nodes' namespaces (``cluster/tools/netns_faults.py``), so they hit
real TCP connections as a switch failure would. ``proxy`` (anywhere else): nodes on
127.0.0.1, clients through the TCP fault proxies (``chaos/proxy.py``), and cuts between nodes
and loss dropped in each node's Raft transport through its fault file
(``cluster/link_control.py``). Either way, one-way message loss, delay, duplication and
reordering of Raft messages go through the fault file (the kernel here has no netem, and TCP
would turn packet faults into delay anyway). A run records which mode it used.
"""

from __future__ import annotations

from typing import Any

from chaos.cluster import ChaosCluster
from chaos.proxy import ProxySet
from cluster.tools import netns, netns_faults


def netns_unavailable() -> str | None:
    return netns.unavailable() or netns_faults.unavailable()


class ChaosNet:
    """The run's network faults. One fault plan at a time per kind: a new cut replaces the
    previous cut, ``heal`` ends everything."""

    def __init__(self, cluster: ChaosCluster, proxies: ProxySet | None) -> None:
        self.cluster = cluster
        self.proxies = proxies
        self.cuts: dict[int, list[int]] = {}
        self.loss: dict[int, int] = {}  # node -> % of packets lost from each other node
        self.clients: dict[int, str] = {}
        self.transport: dict[int, dict[str, Any]] = {}

    @property
    def mode(self) -> str:
        return "netns" if self.cluster.net is not None else "proxy"

    @property
    def client_modes(self) -> list[str]:
        return ["drop", "close"] if self.mode == "netns" else ["drop", "close", "delay"]

    def set_clients(self, i: int, mode: str, delay_ms: int = 0) -> None:
        """Clients' traffic to node ``i``: ok, drop (silently), close (reset), delay (proxy only)."""
        if self.mode == "proxy":
            assert self.proxies is not None
            self.proxies.set_mode(i, mode, delay_ms)
            return
        if mode not in ("ok", "drop", "close"):
            raise ValueError(f"client mode {mode!r} needs the proxy")
        self.clients[i] = mode
        self._apply_rules()

    def cut(self, cuts: dict[int, list[int]]) -> None:
        """Node i cannot exchange anything with the nodes in ``cuts[i]`` (give both ends)."""
        self.cuts = {i: list(v) for i, v in cuts.items() if v}
        if self.mode == "netns":
            self._apply_rules()
        else:
            self._apply_transport()

    def set_loss(self, loss: dict[int, int]) -> None:
        """Node i loses ``loss[i]`` % of what the other nodes send it (packets in netns mode,
        Raft messages in proxy mode)."""
        self.loss = {i: pct for i, pct in loss.items() if pct}
        if self.mode == "netns":
            self._apply_rules()
        else:
            self._apply_transport()

    def set_transport(self, faults: dict[int, dict[str, Any]]) -> None:
        """Raft-transport faults per node (``mute``, ``delay_s``, ``hold``, ``duplicate``, ``seed``)."""
        self.transport = {i: dict(v) for i, v in faults.items() if v}
        self._apply_transport()

    def heal(self) -> None:
        self.cuts, self.loss, self.clients, self.transport = {}, {}, {}, {}
        if self.mode == "netns":
            self._apply_rules()
        elif self.proxies is not None:
            for i in range(self.cluster.n):
                self.proxies.set_mode(i, "ok")
        self._apply_transport()

    def _apply_rules(self) -> None:
        net = self.cluster.net
        assert net is not None
        plan = {}
        for i in range(net.nodes):
            peers = [net.addr(j) for j in self.cuts.get(i, [])]
            loss = {net.addr(j): self.loss[i] for j in range(net.nodes) if j != i and i in self.loss}
            clients = {"ok": "ok", "drop": "drop", "close": "reject"}[self.clients.get(i, "ok")]
            plan[i] = netns_faults.NodeRules(frozenset(peers), frozenset(peers), loss, clients,
                                             self.cluster.client_ports[i])
        netns_faults.apply_plan(net, plan)

    def _apply_transport(self) -> None:
        for i in range(self.cluster.n):
            spec = dict(self.transport.get(i, {}))
            if self.mode == "proxy":
                if self.cuts.get(i):
                    spec["cut"] = self.cuts[i]
                if self.loss.get(i):
                    # the transport drops on send: node i's loss is the others' sends to it,
                    # approximated as i's own sends too (a lossy link loses both ways)
                    spec["loss"] = self.loss[i] / 100
            self.cluster.set_raft_faults(i, spec)
