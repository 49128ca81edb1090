"""Background tasks of the node that must not die quietly.

An asyncio task that raises just ends (its exception is logged, at best, when it is garbage
collected): the metadata follower, for one, would stop applying topic changes while the node
keeps serving. A supervised task that ends with an exception stops the node through
``replication.failstop`` instead; cancelling it (at shutdown) is not a failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from replication.failstop import fail_stop


def supervised(coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
    task = asyncio.get_running_loop().create_task(coro, name=name)
    task.add_done_callback(_check)
    return task


def _check(task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        fail_stop(f"task:{task.get_name()}", f"{type(exc).__name__}: {exc}")
