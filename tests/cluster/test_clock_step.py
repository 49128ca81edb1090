"""Group timers run on a monotonic clock: a wall clock stepped an hour forward while a node
runs expires no session and starts no rebalance.

The node runs with ``time.time`` shifted by the number of seconds in a file the test writes
(the machine's clock is never touched)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cluster.clock import AnchoredClock
from tests.cluster.harness import ROOT, free_port

pytestmark = pytest.mark.cluster

_SHIFTED_NODE = """
import sys, time
_real = time.time
def _shifted():
    try:
        with open({shift!r}) as fh:
            return _real() + float(fh.read() or 0)
    except (OSError, ValueError):
        return _real()
time.time = _shifted
from cluster.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_anchored_clock_ignores_wall_steps() -> None:
    wall, mono = [1_000_000.0], [50.0]
    clock = AnchoredClock(lambda: wall[0], lambda: mono[0])
    assert clock.now_ms() == 1_000_000_000
    wall[0] += 3600  # an NTP step forward
    mono[0] += 1.5
    assert clock.now_ms() == 1_000_001_500
    wall[0] -= 7200  # and back
    mono[0] += 0.5
    assert clock.now_ms() == 1_000_002_000


def test_a_wall_clock_step_expires_no_session(tmp_path: Path) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    shift = tmp_path / "shift"
    shift.write_text("0")
    port = free_port()
    log = open(tmp_path / "node.log", "w")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [sys.executable, "-c", _SHIFTED_NODE.format(shift=str(shift)), "node", "--node-id", "0", "--host",
         "127.0.0.1", "--port", str(port), "--data-dir", str(tmp_path / "data"),
         "--set", "group.initial.rebalance.delay.ms=0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
    log.close()
    bs = f"127.0.0.1:{port}"
    stop = threading.Event()
    revoked: list[int] = []
    assigned: list[int] = []
    try:
        assert proc.stdout is not None and "listening on" in proc.stdout.readline()
        admin = AdminClient({"bootstrap.servers": bs})
        from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

        admin.create_topics([NewTopic("clock", 2, 1)])["clock"].result(10)
        # Two members: the first heartbeat after the step would expire the other one's session.
        consumers = [Consumer({"bootstrap.servers": bs, "group.id": "clock-group", "session.timeout.ms": 6000,
                               "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest"}) for _ in range(2)]
        for c in consumers:
            c.subscribe(["clock"], on_assign=lambda _c, ps: assigned.append(len(ps)),
                        on_revoke=lambda _c, ps: revoked.append(len(ps)))

        def poll() -> None:
            while not stop.is_set():
                for c in consumers:
                    c.poll(0.05)

        t = threading.Thread(target=poll, daemon=True)
        t.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            groups = admin.describe_consumer_groups(["clock-group"])["clock-group"].result(10)
            if len(groups.members) == 2 and str(groups.state).endswith("STABLE"):
                break
            time.sleep(0.2)
        time.sleep(1)
        before = (list(assigned), list(revoked))
        shift.write_text("3600")  # the node's wall clock jumps an hour forward
        time.sleep(4)
        after = (list(assigned), list(revoked))
        groups = admin.describe_consumer_groups(["clock-group"])["clock-group"].result(10)
        stop.set()
        t.join(5)
        assert after == before, f"a wall-clock step caused a rebalance: {before} -> {after}"
        assert len(groups.members) == 2
        for c in consumers:
            c.close()
    finally:
        stop.set()
        proc.kill()
        proc.wait(10)
