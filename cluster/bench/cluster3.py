"""``failover`` and ``load``: scenarios for the 3-node cluster that ``kcoord up`` starts.

They need several nodes (coordinator partitions led by different nodes, a node to kill).
Until the cluster and its control surface land, they check the bootstrap and stop with a
clear error instead of inventing figures.
"""

from __future__ import annotations

from typing import Any

from cluster.bench.brokers import BenchError
from cluster.bench.common import broker_count
from cluster.bench.report import Metric, Reporter


class _ClusterScenario:
    NAME = ""
    MIN_NODES = 3

    @classmethod
    def add_arguments(cls, p: Any) -> None:
        raise NotImplementedError

    @classmethod
    def params(cls, args: Any) -> dict[str, Any]:
        return {}

    @classmethod
    def metrics(cls, args: Any) -> list[Metric]:
        return []

    @classmethod
    def ok(cls, result: dict[str, Any]) -> bool:
        return False

    @classmethod
    def precheck(cls, bootstrap: str, args: Any) -> None:
        n = broker_count(bootstrap)
        if n < cls.MIN_NODES:
            raise BenchError(f"{cls.NAME} needs a 3-node cluster started by `kcoord up`; "
                             f"{bootstrap} reports {n} broker(s)")
        if args.start_peer or args.peer:
            raise BenchError(f"{cls.NAME} runs against a kcoord cluster only (no peer comparison)")

    @classmethod
    def run_one(cls, name: str, bootstrap: str, args: Any, rep: Reporter) -> dict[str, Any]:
        cls.precheck(bootstrap, args)
        raise BenchError(f"{cls.NAME}: the 3-node driver is not implemented yet "
                         f"({bootstrap} has enough brokers; no figures are produced)")


class Failover(_ClusterScenario):
    """Kill the coordinator of busy groups; measure time until commits succeed again, no loss."""

    NAME = "failover"

    @classmethod
    def add_arguments(cls, p: Any) -> None:
        p.add_argument("--groups", type=int, default=16, help="committing groups (default 16)")
        p.add_argument("--duration", "-d", type=float, default=30.0, help="seconds of load (default 30)")
        p.add_argument("--kill", choices=["coordinator", "random", "follower"], default="coordinator",
                       help="which node to kill (default: the coordinator of the first group)")
        p.add_argument("--signal", choices=["KILL", "TERM", "STOP"], default="KILL")

    @classmethod
    def params(cls, args: Any) -> dict[str, Any]:
        return {"groups": args.groups, "duration_s": args.duration, "kill": args.kill, "signal": args.signal}


class Load(_ClusterScenario):
    """Many groups committing and rebalancing across all nodes' coordinator partitions."""

    NAME = "load"

    @classmethod
    def add_arguments(cls, p: Any) -> None:
        p.add_argument("--groups", type=int, default=100, help="groups (default 100)")
        p.add_argument("--clients", "-k", type=int, default=8, help="client processes (default 8)")
        p.add_argument("--duration", "-d", type=float, default=30.0, help="seconds (default 30)")

    @classmethod
    def params(cls, args: Any) -> dict[str, Any]:
        return {"groups": args.groups, "clients": args.clients, "duration_s": args.duration}
