import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


class FailStopped(Exception):
    """What ``fail_stops`` raises where the node would have exited."""


import pytest  # noqa: E402 - after the path setup above


@pytest.fixture
def fail_stops():  # type: ignore[no-untyped-def]
    """Record ``replication.failstop.fail_stop`` calls and raise ``FailStopped`` instead of exiting."""
    from replication import failstop

    seen: list[tuple[str, str, int]] = []

    def action(component: str, reason: str, code: int) -> None:
        seen.append((component, reason, code))
        raise FailStopped(reason)

    failstop.set_action(action)
    yield seen
    failstop.reset_action()


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist each worker chooses node ports from a range of its own
    (``cluster.tools.local_cluster``), inherited by the clusters its tests start in subprocesses."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw"):
        os.environ["KCOORD_PORT_SHARD"] = f"{int(worker[2:])}/{os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1')}"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--tiers", action="store_true",
                     help="with -n 2: tests/cluster on one worker, every other test on the other")


# tests/cluster ran about two minutes longer than the other tier: these run there instead (they
# start clusters of their own, as the bounded chaos runs of that tier do)
EVENED_OUT = ("tests/cluster/test_kafka_tools.py", "tests/cluster/test_alter_topics_cluster.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``make test`` runs ``-n 2 --tiers``: the tests of tests/cluster (node processes, but for
    ``EVENED_OUT``) on one pytest-xdist worker and every other test on the other, each tier whole
    and in its collection order. Both mostly wait on sockets and timers, so they overlap well on two
    cores; the other tier starts clusters too (the bounded chaos runs, the fuzzer), each worker on
    ports of its own (``pytest_configure``). (xdist's own ``loadgroup`` cannot group under pytest 9.2.)"""
    if not config.getoption("tiers"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class TierScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith("tests/cluster/") and not nodeid.startswith(EVENED_OUT):
                return "cluster"
            return "rest"

    return TierScheduling(config, log)
