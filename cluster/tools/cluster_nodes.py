"""``kcoord cluster remove-node ID``: take a node out of the cluster for good (a retired machine,
a shrink), as ``kafka-metadata-quorum remove-controller`` does in Kafka. ``kcoord cluster
add-node ID``: make an observer (a node started with ``controller.quorum.auto.join.enable=false``)
a voting node, as ``kafka-metadata-quorum add-controller`` does.

The metadata log records the removal; every Raft group's leader then takes the node out (a group
the node leads is handed over first) and the node stops once it leads none. Its id is never
taken again: a machine that comes back joins as a new node (``bootstrap``, an empty data
directory). A new node joins by starting with ``bootstrap`` (docs/operations.md); with auto-join
(the default) it votes once caught up, without auto-join once ``add-node`` promotes it.
One DescribeQuorum request and one RemoveRaftVoter or AddRaftVoter on a PLAINTEXT listener of any node.
"""

from __future__ import annotations

import argparse
from typing import Any

from cluster.tools import quorum
from cluster.tools.common import ToolError, add_common, error, parse_host_port, timeout_s

COMMAND = "cluster"


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(COMMAND, help="change the cluster's nodes (promote or remove a node)",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cluster_cmd", required=True)
    r = sub.add_parser("remove-node", help="take a node out of the cluster (it hands over and stops)")
    r.add_argument("node_id", type=int, metavar="ID", help="the node's id")
    add_common(r)
    a = sub.add_parser("add-node", help="make an observer a voting node (it votes once caught up)")
    a.add_argument("node_id", type=int, metavar="ID", help="the observer's node id")
    add_common(a)


def run(args: argparse.Namespace) -> int:
    try:
        host, port = parse_host_port(str(args.bootstrap_server).split(",")[0])
    except ToolError as e:
        error(str(e))
        return 1
    change, failed, done = CHANGES[args.cluster_cmd]
    why = change(host, port, args.node_id, timeout_s(args))
    if why is not None:
        error(f"node {args.node_id} was not {failed}: {why}")
        return 1
    print(f"Node {args.node_id} {done} (see `kcoord status`).")
    return 0


# command -> (its request, what failed, what was done)
CHANGES = {
    "add-node": (quorum.add_node, "made a voter",
                 "votes in the cluster's metadata; every partition's leader promotes it once it has caught up there"),
    "remove-node": (quorum.remove_node, "removed",
                    "is removed from the cluster: every partition's leader takes it out, and it stops once it leads "
                    "none"),
}
