"""A real 3-node kcoord cluster for tests: node processes on 127.0.0.1, SIGKILL and restart.

The launcher is ``cluster.tools.local_cluster.LocalCluster`` (Kafka ports are free ephemeral ports;
Raft ports are below the ephemeral range). With ``netns=True`` each node runs in a network
namespace of its own on its own address (``cluster/tools/netns.py``), so tests can cut real links
between nodes with nftables; ``kill_all`` removes the namespaces.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.tools import netns
from cluster.tools.local_cluster import LocalCluster, free_plan, free_port, netns_plan

SECRET = "test-cluster-secret-5f1c9a7e2b4d80364be1a7c2d9f03e68"  # 128 random bits, as a node demands
# For tests that check where leadership returns after a restart or a heal: a balancing round
# every second that hands back any partition led elsewhere (by default a node waits out Kafka's
# 300 s and a 10 % imbalance).
FAST_LEADER_BALANCE: dict[str, object] = {"leader.imbalance.check.interval.seconds": 1,
                                          "leader.imbalance.per.broker.percentage": 0}


class Cluster(LocalCluster):
    def __init__(self, base_dir: Path, settings: dict[str, object] | None = None, nodes: int = 3,
                 per_node: dict[int, dict[str, object]] | None = None, netns: bool = False,
                 metrics: bool = False) -> None:
        self.net = _netns_up(nodes) if netns else None
        layout = netns_plan(self.net, 9092, 9192, base_dir) if self.net is not None else free_plan(nodes, base_dir)
        # metrics: each node serves Prometheus metrics, for apis_used
        self.metrics_ports = {i: free_port() for i in range(nodes)} if metrics else {}
        per_node = {i: {**(per_node or {}).get(i, {}), **({"metrics_port": p} if p else {})}
                    for i, p in ((i, self.metrics_ports.get(i, 0)) for i in range(nodes))}
        super().__init__(layout, SECRET, base_dir, settings, per_node, log_dir=base_dir)

    def apis_used(self) -> dict[str, int]:
        """Requests handled by API, summed over the nodes running now (``metrics=True``): what an
        application asked of the cluster."""
        counts: dict[str, int] = {}
        for i, port in self.metrics_ports.items():
            if not self.alive(i):
                continue
            for (name, labels), count in scrape(port).items():
                if name == "kcoord_requests_total":
                    api = dict(labels)["api"]
                    counts[api] = counts.get(api, 0) + int(count)
        return dict(sorted(counts.items()))

    def start(self, *which: int, timeout: float = 30.0) -> Cluster:
        super().start(*which, timeout=timeout)
        return self

    def kill_all(self) -> None:
        super().kill_all()
        if self.net is not None:
            netns.teardown(self.net.prefix)


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    """A node's Prometheus metrics: (name, sorted labels) -> value."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:  # noqa: S310
        assert r.status == 200
        text = r.read().decode()
    out: Samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def report_apis(cluster: Cluster, label: str = "") -> None:
    """Print the APIs an application asked of ``cluster`` (``metrics=True``); never fails a test."""
    try:
        print(f"APIs used{' by ' + label if label else ''}: {cluster.apis_used()}")
    except OSError as e:
        print(f"APIs used: not read ({e})")


def _netns_up(nodes: int) -> netns.NetLayout:
    why = netns.unavailable()
    if why:
        raise RuntimeError(f"netns cluster requested: {why}")
    return netns.up(nodes)


def running_cluster(tmp_path: Path, request: pytest.FixtureRequest, settings: dict[str, object] | None = None,
                    **kw: object) -> Iterator[Cluster]:
    """For a fixture: a started cluster, killed afterwards, with each node's log tail printed when
    the test failed."""
    c = Cluster(tmp_path, settings=settings, **kw).start()  # type: ignore[arg-type]
    yield c
    c.kill_all()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        for i in range(c.n):
            print(f"--- node {i} log ---\n{c.log_text(i)[-4000:]}")


def wait_for(cond: Callable[[], object], timeout: float, what: str, *, every: float = 0.2,
             tolerate: tuple[type[BaseException], ...] = ()) -> None:
    """Until ``cond()`` is true, asked every ``every`` seconds (raising one of ``tolerate``
    counts as not yet); an AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if cond():
                return
        except tolerate:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every)


def alter_configs(address: str, resource_type: int, name: str, *ops: tuple[str, int, str | None]) -> Any:
    """IncrementalAlterConfigs of one resource at ``address``, NOT_CONTROLLER retried as clients
    retry it (a change waits until every node has registered the metadata versions it reads, a
    moment after it starts): the resource's answer."""
    from cluster.apis.common import req_mod
    from tests.wire.raw import ask

    m = req_mod(44, 1)
    for _ in range(50):
        r = ask(address, 44, 1, m.IncrementalAlterConfigsRequest(validate_only=False, resources=(
            m.AlterConfigsResource(resource_type=resource_type, resource_name=name, configs=tuple(
                m.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops)),)))
        if r.responses[0].error_code.name != "not_controller":
            break
        time.sleep(0.2)
    return r.responses[0]
