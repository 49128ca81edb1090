"""The open-file budget's arithmetic (cluster.fd_budget) and its near-limit warning."""

from __future__ import annotations

import logging
import sys

import pytest

from cluster.config import NodeConfig, load_config
from cluster.fd_budget import FdBudgetError, FdWatch, plan
from cluster.metrics import REGISTRY

PEERS = "127.0.0.1:9092:19092,127.0.0.1:9093:20092,127.0.0.1:9094:21092"


def _config(**settings: object) -> NodeConfig:
    return load_config(None, env={}, overrides={"cluster_secret": "test-cluster-secret-5f1c9a7e2b4d80364be1a7c2d9f03e68",
                                                **settings})


def test_the_issues_cluster_at_20000_descriptors_holds_what_fits_not_max_partitions() -> None:
    """Three nodes at `ulimit -n` 20,000 used to take max_partitions=4000 (28,000 descriptors a
    node) and died together at ~2,830. 64 + 25 internal partitions x 5 are the node's own; of the
    19,811 left, 1000 stay for connections and 7 a partition hold 2687."""
    b = plan(_config(peers=PEERS), 20000)
    assert (b.own, b.connections, b.per_partition, b.configured, b.max_partitions) == (189, 1000, 7, 4000, 2687)
    assert b.own + b.connections + b.max_partitions * b.per_partition <= 20000
    msg = b.refusal(2600, 100)
    assert msg is not None and "open-file limit (20000)" in msg and "the 2687" in msg
    assert b.refusal(2587, 100) is None


def test_a_limit_that_holds_max_partitions_keeps_it_and_gives_connections_the_rest() -> None:
    b = plan(_config(peers=PEERS), 1 << 20)
    assert b.max_partitions == 4000 and b.connections == (1 << 20) - 189 - 4000 * 7
    assert b.refusal(4000, 1) is None  # max_partitions' own message answers that


def test_a_single_node_counts_two_descriptors_a_partition() -> None:
    b = plan(_config(), 512)
    assert (b.own, b.per_partition) == (64 + 24, 2)
    assert b.connections == 424 // 4 and b.max_partitions == (424 - 106) // 2


def test_an_explicit_max_connections_is_kept_and_the_partitions_get_what_is_left() -> None:
    b = plan(_config(max_connections=300), 512)
    assert (b.connections, b.max_partitions) == (300, (424 - 300) // 2)
    too_many = plan(_config(max_connections=5000), 512)  # more than the limit leaves: all of it, no partitions
    assert (too_many.connections, too_many.max_partitions) == (424, 0)


def test_no_limit_keeps_the_configuration() -> None:
    b = plan(_config(max_partitions=7000), None)
    assert (b.max_partitions, b.connections) == (7000, sys.maxsize)
    assert plan(_config(max_connections=50), None).connections == 50


def test_a_limit_without_room_for_the_internal_partitions_and_a_few_connections_is_refused() -> None:
    with pytest.raises(FdBudgetError, match=r"open-file limit \(250\).*189 .*25 internal partitions"):
        plan(_config(peers=PEERS), 250)
    plan(_config(peers=PEERS), 189 + 64)


def test_near_the_limit_one_rate_limited_warning_and_the_gauges(caplog: pytest.LogCaptureFixture) -> None:
    used = [300]
    watch = FdWatch(plan(_config(), 512), count=lambda: used[0])
    with caplog.at_level(logging.WARNING, logger="kcoord.fd_budget"):
        assert watch.check() == 300  # 59 %: quiet
        assert REGISTRY.get_sample_value("kcoord_open_fds") == 300
        assert REGISTRY.get_sample_value("kcoord_open_fds_limit") == 512
        assert REGISTRY.get_sample_value("kcoord_fd_budget_max_partitions") == 159
        assert not [r for r in caplog.records if "fd_budget_near_limit" in r.getMessage()]
        used[0] = 420  # 82 %
        for _ in range(5):
            watch.check()
        near = [r.getMessage() for r in caplog.records if "fd_budget_near_limit" in r.getMessage()]
        assert len(near) == 1 and "used=420 limit=512" in near[0]
        assert REGISTRY.get_sample_value("kcoord_open_fds") == 420
