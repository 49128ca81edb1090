"""A node's log defaults changed on a running cluster (Kafka's dynamic broker configs): set for the
whole cluster through one node, every node describes them and applies them live to the topics
that have no override of their own (a topic's short retention and segment age take effect, its
start moves), a topic with its own override keeps it, a node's own value wins over the cluster's,
and a node restarted afterwards applies them again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.apis.common import req_mod
from tests.cluster.cluster_harness import Cluster, alter_configs
from tests.cluster.cluster_harness import wait_for as _wait_for
from tests.wire.raw import ask

pytestmark = pytest.mark.cluster


def _alter(address: str, broker: str, *ops: tuple[str, int, str | None]) -> str:
    return str(alter_configs(address, 4, broker, *ops).error_code.name)


def _described(address: str, rtype: int, name: str, key: str) -> tuple[str | None, int] | None:
    m = req_mod(32, 4)
    r = ask(address, 32, 4, m.DescribeConfigsRequest(resources=(m.DescribeConfigsResource(
        resource_type=rtype, resource_name=name, configuration_keys=(key,)),),
        include_synonyms=False, include_documentation=False))
    found = [(c.value, c.config_source) for c in r.results[0].configs]
    return found[0] if found else None


def _low(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0])
    finally:
        c.close()


def test_log_defaults_set_for_the_cluster_apply_live_on_every_node(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, settings={"log.retention.check.interval.ms": 200}).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for f in admin.create_topics([NewTopic("dyn", 1, 1), NewTopic("own", 1, 1, config={"retention.ms": "-1"})],
                                     request_timeout=20).values():
            f.result(20)
        p = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0})

        def produce(n: int) -> None:
            for i in range(n):
                for topic in ("dyn", "own"):
                    p.produce(topic, value=b"v%d" % i)
                p.flush(10)
                time.sleep(0.05)

        produce(10)
        assert _alter(cluster.address(1), "", ("log.roll.ms", 0, "300"), ("log.retention.ms", 0, "1500")) == "none"
        for i in range(cluster.n):
            _wait_for(lambda i=i: _described(cluster.address(i), 4, str(i), "log.retention.ms") == ("1500", 3), 10,
                      f"node {i} to describe the cluster's retention")
        assert _described(cluster.address(0), 2, "dyn", "retention.ms") == ("1500", 3)
        assert _described(cluster.address(0), 2, "own", "retention.ms") == ("-1", 1)
        produce(30)  # 1.5 s more: segments roll every 300 ms, and the first ones pass 1.5 s
        _wait_for(lambda: _low(cluster.bootstrap, "dyn") > 0, 20, "the cluster's retention to move dyn's start")
        assert _low(cluster.bootstrap, "own") == 0  # its own retention.ms=-1 wins

        # a node's own value over the cluster's; it holds after a restart
        assert _alter(cluster.address(2), "2", ("log.retention.ms", 0, "3600000")) == "none"
        assert _described(cluster.address(2), 4, "2", "log.retention.ms") == ("3600000", 2)
        assert _described(cluster.address(1), 4, "1", "log.retention.ms") == ("1500", 3)
        assert _alter(cluster.address(0), "1", ("log.retention.ms", 0, "1")) == "invalid_request"  # not itself
        assert _alter(cluster.address(0), "0", ("log.retention.check.interval.ms", 0, "1")) == "invalid_request"
        cluster.kill(2)
        cluster.start(2)
        _wait_for(lambda: _described(cluster.address(2), 4, "2", "log.retention.ms") == ("3600000", 2), 20,
                  "the restarted node to describe its own retention")
        assert _described(cluster.address(2), 4, "", "log.retention.ms") == ("1500", 3)
        assert _alter(cluster.address(0), "", ("log.retention.ms", 1, None), ("log.roll.ms", 1, None)) == "none"
        _wait_for(lambda: _described(cluster.address(1), 4, "1", "log.retention.ms") == ("604800000", 5), 10,
                  "node 1 to return to the default")
        assert _described(cluster.address(1), 4, "", "log.retention.ms") is None
    finally:
        cluster.kill_all()
