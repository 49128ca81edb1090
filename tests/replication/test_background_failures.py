"""A background thread or task that dies stops the node (fail-stop) instead of leaving it
half-alive; what is only a retry (a peer name that does not resolve) is not a death."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from cluster.supervise import supervised
from replication import failstop
from replication.hub import RaftHub
from replication.raft import RaftHost, RaftTimings
from tests.cluster.harness import free_port
from tests.replication.test_hub import Recorder


@pytest.fixture
def stops() -> Any:
    seen: list[tuple[str, str, int]] = []
    failstop.set_action(lambda component, reason, code: seen.append((component, reason, code)))
    yield seen
    failstop.reset_action()


def test_a_supervised_task_that_raises_stops_the_node(stops: list[tuple[str, str, int]]) -> None:
    async def boom() -> None:
        await asyncio.sleep(0)
        raise KeyError("metadata state")

    async def quiet() -> None:
        await asyncio.sleep(10)

    async def main() -> None:
        supervised(boom(), "metadata")
        calm = supervised(quiet(), "retention")
        await asyncio.sleep(0.05)
        calm.cancel()  # shutting down is not a failure
        await asyncio.sleep(0.01)

    asyncio.run(main())
    assert [(c, code) for c, _, code in stops] == [("task:metadata", failstop.EXIT_FAIL_STOP)]
    assert "KeyError" in stops[0][1]


def test_the_raft_ticker_thread_dying_stops_the_node(stops: list[tuple[str, str, int]]) -> None:
    host = RaftHost("s3cret", RaftTimings(), listen=f"127.0.0.1:{free_port()}")

    def broken(now: float) -> None:
        raise RuntimeError("a bug in the hub")

    host.hub.maintain = broken  # type: ignore[method-assign]

    async def main() -> None:
        host.start(asyncio.get_running_loop())
        deadline = time.monotonic() + 5
        while not stops and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        host.stop()

    asyncio.run(main())
    assert stops and stops[0][0] == "raft_ticker" and "a bug in the hub" in stops[0][1]


def test_a_peer_name_that_does_not_resolve_is_retried_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    hub = RaftHub(f"127.0.0.1:{free_port()}", "s3cret", retry=0.01)
    try:
        # (a node dials the peers whose address sorts below its own)
        hub.attach("g1", Recorder(), ["00-removed-container.invalid:9999"])
        for _ in range(5):
            hub.maintain(time.monotonic())  # raised socket.gaierror out of the ticker before
            hub.process()
            time.sleep(0.02)
        assert hub.connected() == set()
        assert sum("raft_dial_failed" in r.getMessage() for r in caplog.records) == 1  # logged once
    finally:
        hub.close()
