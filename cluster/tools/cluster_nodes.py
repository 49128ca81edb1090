"""``kcoord cluster remove-node ID``: take a node out of the cluster for good (a retired machine,
a shrink), as ``kafka-metadata-quorum remove-controller`` does in Kafka.

The metadata log records the removal; every Raft group's leader then takes the node out (a group
the node leads is handed over first) and the node stops once it leads none. Its id is never
taken again: a machine that comes back joins as a new node (``join = true``, the next id, an
empty data directory). Adding a node is ``join = true`` on the new node (docs/operations.md).
One RemoveRaftVoter request on a PLAINTEXT listener of any node.
"""

from __future__ import annotations

import argparse
from typing import Any

from cluster.tools import quorum
from cluster.tools.common import ToolError, add_common, error, parse_host_port, timeout_s

COMMAND = "cluster"


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(COMMAND, help="change the cluster's nodes (remove a node)", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cluster_cmd", required=True)
    r = sub.add_parser("remove-node", help="take a node out of the cluster (it hands over and stops)")
    r.add_argument("node_id", type=int, metavar="ID", help="the node's id")
    add_common(r)


def run(args: argparse.Namespace) -> int:
    try:
        host, port = parse_host_port(str(args.bootstrap_server).split(",")[0])
    except ToolError as e:
        error(str(e))
        return 1
    why = quorum.remove_node(host, port, args.node_id, timeout_s(args))
    if why is not None:
        error(f"node {args.node_id} was not removed: {why}")
        return 1
    print(f"Node {args.node_id} is removed from the cluster: every partition's leader takes it out, and it stops "
          "once it leads none (see `kcoord status`).")
    return 0
