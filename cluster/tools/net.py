"""``kcoord net``: cut and heal the links between the nodes of a ``kcoord up --netns`` cluster.

Faults are nftables rules inside the nodes' namespaces (``cluster/tools/netns_faults.py``); clients
on this host keep reaching every node, so a cut node goes on answering its clients while it
cannot reach the others, which is what a network partition looks like to a client. Each
command replaces the previous fault; ``heal`` removes it.

    kcoord net isolate 0      node 0 alone, nodes 1 and 2 together
    kcoord net bridge 0 2     0 and 2 cannot see each other; 1 sees both
    kcoord net loss 0 30      30 % of the packets node 0 receives from the other nodes are lost
    kcoord net heal
    kcoord net show           the cluster's addresses and each node's current rules
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

from cluster.tools import netns, netns_faults
from cluster.tools.netns import NetLayout

COMMAND = "net"


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(COMMAND, help="cut and heal links between the nodes of `kcoord up --netns`",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prefix", help="which namespaced cluster (default: the only one running)")
    sub = p.add_subparsers(dest="net_cmd", required=True)
    sub.add_parser("isolate", help="cut one node off from the others").add_argument("node", type=int)
    b = sub.add_parser("bridge", help="two nodes cannot see each other; the rest see both")
    b.add_argument("a", type=int)
    b.add_argument("b", type=int)
    loss = sub.add_parser("loss", help="drop a share of the packets a node receives from the other nodes")
    loss.add_argument("node", type=int)
    loss.add_argument("percent", type=int)
    sub.add_parser("heal", help="remove every fault")
    sub.add_parser("show", help="addresses and current rules")


def _layout(prefix: str | None) -> NetLayout:
    found = [n for n in netns.running() if prefix in (None, n.prefix)]
    if len(found) != 1:
        names = ", ".join(n.prefix for n in netns.running()) or "none"
        raise SystemExit(f"kcoord net: {'no' if not found else 'more than one'} namespaced cluster matches "
                         f"(running: {names}); start one with `kcoord up --netns` or pass --prefix")
    return found[0]


def run(args: argparse.Namespace) -> int:
    why = netns.unavailable() or netns_faults.unavailable()
    if why:
        print(f"kcoord net: {why}", file=sys.stderr)
        return 1
    net = _layout(args.prefix)
    for n in (getattr(args, k, None) for k in ("node", "a", "b")):
        if n is not None and not 0 <= n < net.nodes:
            print(f"kcoord net: no node {n} (nodes 0..{net.nodes - 1})", file=sys.stderr)
            return 2
    plan: dict[int, netns_faults.NodeRules]
    if args.net_cmd == "show":
        for i in range(net.nodes):
            rules = subprocess.run([*net.run_in(i), "nft", "list", "table", *netns_faults.TABLE.split()],
                                   capture_output=True, text=True).stdout
            drops = [line.strip() for line in rules.splitlines() if "drop" in line or "reject" in line]
            print(f"node {i}  {net.addr(i)}  ({net.ns(i)})  {'; '.join(drops) or 'no faults'}")
        return 0
    if args.net_cmd == "isolate":
        plan = netns_faults.isolate(net, args.node)
    elif args.net_cmd == "bridge":
        plan = netns_faults.bridge(net, args.a, args.b)
    elif args.net_cmd == "loss":
        plan = {args.node: netns_faults.NodeRules(loss_from={net.addr(j): args.percent for j in range(net.nodes)
                                                             if j != args.node})}
    else:
        plan = {}
    netns_faults.apply_plan(net, plan)
    print(f"kcoord net: {args.net_cmd} applied to {net.prefix}")
    return 0
