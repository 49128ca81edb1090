"""FindCoordinator asked just after the coordinator died never names the dead node.

librdkafka asks another node for the coordinator within a millisecond of seeing its coordinator's
connection drop. If that node reads the question before the dead peer's end-of-stream (both wait in
the same turn of its loop), it used to name the dead node: the client then waits for its reconnect
back-off and its one-second coordinator query interval before asking again (a 1.2 s failover in
``kcoord bench failover``). Here the asked node is stopped (SIGSTOP) while the question is sent and
the coordinator killed, so that on SIGCONT both are there to read at once, the question first. Its
Raft round comes every 200 ms, so the stop (a few ms) rarely ends on a round that would read the
Raft sockets first; three rounds of it.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest

from tests.cluster.cluster_harness import Cluster, running_cluster
from tests.wire.raw import RawConn

pytestmark = pytest.mark.cluster


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    yield from running_cluster(tmp_path, request, settings={"raft_tick_ms": 200})


def _coordinator(c: Cluster, node: int, group: str) -> tuple[int, int]:
    conn = RawConn(c.address(node))
    try:
        r = conn.call(10, 3, FindCoordinatorRequest(key=group, key_type=0))
        return int(r.error_code), int(r.node_id)
    finally:
        conn.close()


def _agreed_coordinator(c: Cluster, group: str) -> int:
    deadline = time.monotonic() + 30
    while True:
        views = {_coordinator(c, i, group) for i in range(3)}
        if len(views) == 1 and next(iter(views))[0] == ErrorCode.none:
            return next(iter(views))[1]
        assert time.monotonic() < deadline, views
        time.sleep(0.1)


def test_a_node_that_reads_the_question_before_the_dead_leaders_hang_up_names_a_live_node(cluster: Cluster) -> None:
    for _ in range(3):
        group = f"fc-{uuid.uuid4().hex[:8]}"
        leader = _agreed_coordinator(cluster, group)
        asked = (leader + 1) % 3
        conn = RawConn(cluster.address(asked), timeout=10)
        try:
            assert cluster.pause(asked)
            conn.request(10, 3, FindCoordinatorRequest(key=group, key_type=0))
            cluster.kill(leader)  # returns once it is reaped: its sockets are closed
            assert cluster.resume(asked)
            r = conn.response(10, 3)
        finally:
            conn.close()
        assert r is not None
        assert (int(r.error_code), int(r.node_id)) != (ErrorCode.none, leader), "named the node just killed"
        assert r.error_code == ErrorCode.none and r.node_id in {0, 1, 2} - {leader}, r
        cluster.start(leader)
