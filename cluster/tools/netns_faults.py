"""Network faults between namespaced nodes (``cluster/tools/netns.py``), as nftables rules.

Each node namespace holds one table, ``inet kcoord``, that is replaced whole and atomically
on every change (one ``nft -f`` transaction, about 10 ms), so a fault plan is a function
from node to :class:`NodeRules` and healing is the empty plan. Rules filter at the node's
own input and output hooks: dropping by peer address cuts every connection between two
nodes (Raft and the nodes' own client calls alike), while the host side (clients on this
machine) keeps reaching every node unless ``clients`` says otherwise. There is no
"established" exception, so a cut also freezes connections already open, as a pulled cable
does. Random loss drops that share of packets (``numgen``); the kernel here has no netem, so
delay, duplication and reordering are injected in the Raft transport instead
(``cluster/link_control.py``).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cluster.tools.netns import NetLayout

TABLE = "inet kcoord"
CLIENT_MODES = ("ok", "drop", "reject")


@dataclass(frozen=True)
class NodeRules:
    drop_from: frozenset[str] = frozenset()  # addresses whose packets this node drops on input
    drop_to: frozenset[str] = frozenset()  # addresses this node's packets to are dropped
    loss_from: Mapping[str, int] = field(default_factory=dict)  # address -> % of its packets dropped
    clients: str = "ok"  # the host side's packets to `client_port`: ok, drop, or reject (TCP reset)
    client_port: int = 9092

    def render(self) -> str:
        """The table, as an nft script that replaces any previous one in one transaction."""
        inp: list[str] = []
        out: list[str] = []
        if self.drop_from:
            inp.append(f"ip saddr {_set(self.drop_from)} drop")
        for addr, pct in sorted(self.loss_from.items()):
            if not 0 <= pct <= 100:
                raise ValueError(f"loss {pct}% for {addr} is not a percentage")
            if pct:
                inp.append(f"ip saddr {addr} numgen random mod 100 < {pct} drop")
        if self.drop_to:
            out.append(f"ip daddr {_set(self.drop_to)} drop")
        if self.clients not in CLIENT_MODES:
            raise ValueError(f"clients must be one of {CLIENT_MODES}, not {self.clients!r}")
        if self.clients == "drop":
            inp.append(f"tcp dport {self.client_port} drop")
        elif self.clients == "reject":
            inp.append(f"tcp dport {self.client_port} reject with tcp reset")
        return "\n".join([
            f"table {TABLE}", f"delete table {TABLE}", f"table {TABLE} {{",
            "  chain input { type filter hook input priority 0; policy accept;",
            *(f"    {r}" for r in inp), "  }",
            "  chain output { type filter hook output priority 0; policy accept;",
            *(f"    {r}" for r in out), "  }", "}", ""])


def _set(addrs: Iterable[str]) -> str:
    return "{ " + ", ".join(sorted(addrs)) + " }"


def unavailable() -> str | None:
    return None if shutil.which("nft") else "nftables (`nft`) is not installed"


def apply(layout: NetLayout, i: int, rules: NodeRules) -> None:
    proc = subprocess.run([*layout.run_in(i), "nft", "-f", "-"], input=rules.render(), capture_output=True,
                          text=True, timeout=30)
    if proc.returncode != 0:
        raise RuntimeError(f"nft in {layout.ns(i)}: {proc.stderr.strip()}")


def apply_plan(layout: NetLayout, plan: Mapping[int, NodeRules]) -> None:
    """Give every node its rules (nodes absent from ``plan`` get none)."""
    for i in range(layout.nodes):
        apply(layout, i, plan.get(i, NodeRules()))


def cut_plan(layout: NetLayout, cuts: Mapping[int, Iterable[int]], **node_kw: object) -> dict[int, NodeRules]:
    """Both-way cuts: node i drops every packet from and to the nodes in ``cuts[i]`` (give
    each pair from both ends for a clean cut; one end alone is the one-way IP drop, which TCP
    turns into a near-symmetric stall)."""
    return {i: NodeRules(drop_from=frozenset(layout.addr(j) for j in peers),
                         drop_to=frozenset(layout.addr(j) for j in peers), **node_kw)  # type: ignore[arg-type]
            for i, peers in ((i, list(p)) for i, p in cuts.items())}


def isolate(layout: NetLayout, node: int) -> dict[int, NodeRules]:
    """``node`` cannot reach the other nodes, nor they it; clients still reach everyone."""
    others = [j for j in range(layout.nodes) if j != node]
    return cut_plan(layout, {node: others, **{j: [node] for j in others}})


def split(layout: NetLayout, side: Iterable[int]) -> dict[int, NodeRules]:
    """Two sides that cannot see each other (``side`` and the rest)."""
    a = set(side)
    b = set(range(layout.nodes)) - a
    return cut_plan(layout, {**{i: sorted(b) for i in a}, **{j: sorted(a) for j in b}})


def bridge(layout: NetLayout, a: int, b: int) -> dict[int, NodeRules]:
    """``a`` and ``b`` cannot see each other; every other node sees both."""
    return cut_plan(layout, {a: [b], b: [a]})
