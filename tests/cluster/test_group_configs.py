"""A group's own configs on a 3-node cluster: set through one node with IncrementalAlterConfigs,
described alike by every node, read by the group's coordinator at the group's next heartbeat (its
heartbeat interval in the answer, its session timeout fencing a silent member), and still in force
after the coordinator is SIGKILLed and another node takes the group over. Raw requests, as the
admin tools send them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.apis.common import req_mod
from tests.cluster.cluster_harness import Cluster, alter_configs
from tests.wire.raw import ask

pytestmark = pytest.mark.cluster
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
# the node-wide session is long, so a member fenced within a few seconds was fenced by its group's
SETTINGS: dict[str, object] = {"group.consumer.session.timeout.ms": 30000, "group.consumer.min.session.timeout.ms": 1000,
                               "group.consumer.heartbeat.interval.ms": 1000,
                               "group.consumer.min.heartbeat.interval.ms": 200}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, settings=SETTINGS).start()
    try:
        yield c
    finally:
        c.kill_all()


def _alter(address: str, group: str, *ops: tuple[str, int, str | None]) -> Any:
    return alter_configs(address, 32, group, *ops)


def _described(address: str, group: str) -> dict[str, tuple[str | None, int]]:
    m = req_mod(32, 4)
    r = ask(address, 32, 4, m.DescribeConfigsRequest(resources=(m.DescribeConfigsResource(
        resource_type=32, resource_name=group, configuration_keys=(SESSION, HEARTBEAT)),),
        include_synonyms=False, include_documentation=False))
    return {c.name: (c.value, c.config_source) for c in r.results[0].configs}


def _coordinator(cluster: Cluster, group: str) -> int:
    m = req_mod(10, 4)
    for _ in range(200):
        for i in range(cluster.n):
            if not cluster.alive(i):
                continue
            try:
                r = ask(cluster.address(i), 10, 4, m.FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)))
            except OSError:
                continue
            c = r.coordinators[0]
            if int(c.error_code) == 0 and cluster.alive(c.node_id):
                return int(c.node_id)
        time.sleep(0.1)
    raise AssertionError(f"no coordinator for {group}")


def _beat(cluster: Cluster, group: str, member: str, epoch: int) -> Any:
    """A consumer-protocol heartbeat at the group's coordinator, retried while it moves."""
    m = req_mod(68, 1)
    for _ in range(100):
        coord = _coordinator(cluster, group)
        try:
            r = ask(cluster.address(coord), 68, 1, m.ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
                rebalance_timeout=30000 * _td(), subscribed_topic_names=("gc-t",) if epoch == 0 else None,
                subscribed_topic_regex=None, server_assignor=None, topic_partitions=() if epoch == 0 else None))
        except OSError:
            r = None
        if r is not None and r.error_code.name not in ("not_coordinator", "coordinator_not_available",
                                                       "coordinator_load_in_progress"):
            return r
        time.sleep(0.2)
    raise AssertionError(f"no answer for {group}")


def _td() -> Any:
    import datetime

    return datetime.timedelta(milliseconds=1)


def _members(cluster: Cluster, group: str) -> set[str]:
    m = req_mod(69, 0)
    coord = _coordinator(cluster, group)
    r = ask(cluster.address(coord), 69, 0, m.ConsumerGroupDescribeRequest(group_ids=(group,),
                                                                          include_authorized_operations=False))
    return {x.member_id for x in r.groups[0].members}


def _fenced_within(cluster: Cluster, group: str, member: str, seconds: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if member not in _members(cluster, group):
            return time.monotonic() - start
        time.sleep(0.2)
    raise AssertionError(f"{member} still in {group} after {seconds} s")


def test_a_groups_configs_hold_on_every_node_and_after_its_coordinator_dies(cluster: Cluster) -> None:
    group = f"gc-{uuid.uuid4().hex[:8]}"
    resp = _alter(cluster.address(0), group, (SESSION, 0, "3000"), (HEARTBEAT, 0, "400"))
    assert resp.error_code.name == "none", resp
    for i in range(cluster.n):  # every node describes it (each once it has applied the change)
        for _ in range(50):
            if _described(cluster.address(i), group) == {SESSION: ("3000", 8), HEARTBEAT: ("400", 8)}:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"node {i}: {_described(cluster.address(i), group)}")
    refused = _alter(cluster.address(1), group, (SESSION, 0, "500"))  # below group.consumer.min.session.timeout.ms
    assert refused.error_code.name == "invalid_config"

    member = str(uuid.uuid4())
    joined = _beat(cluster, group, member, 0)
    assert joined.error_code.name == "none" and int(joined.heartbeat_interval.total_seconds() * 1000) == 400
    took = _fenced_within(cluster, group, member, 15)  # silent: fenced by the group's 3 s, not the node's 30 s
    assert took < 10, took

    victim = _coordinator(cluster, group)
    cluster.kill(victim)
    member = str(uuid.uuid4())
    joined = _beat(cluster, group, member, 0)
    assert _coordinator(cluster, group) != victim
    assert joined.error_code.name == "none" and int(joined.heartbeat_interval.total_seconds() * 1000) == 400
    assert _fenced_within(cluster, group, member, 15) < 10
    cluster.start(victim)
    assert _described(cluster.address(victim), group) == {SESSION: ("3000", 8), HEARTBEAT: ("400", 8)}

    # deleted: the node's settings again, from the next heartbeat
    assert _alter(cluster.address(2), group, (SESSION, 1, None), (HEARTBEAT, 1, None)).error_code.name == "none"
    intervals = []
    for _ in range(20):  # the coordinator applies the change a moment after the node that was asked
        intervals.append(int(_beat(cluster, group, str(uuid.uuid4()), 0).heartbeat_interval.total_seconds() * 1000))
        if intervals[-1] == 1000:
            break
        time.sleep(0.1)
    assert intervals[-1] == 1000 and set(intervals) <= {400, 1000}, intervals
