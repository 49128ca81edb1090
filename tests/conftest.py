import sys
from pathlib import Path

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
