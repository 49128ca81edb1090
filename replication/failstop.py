"""Fail-stop: the one way a node gives up when it can no longer keep its promises.

A durable write that failed (ENOSPC, EIO, ...), a background thread or task that died, or
corruption found on disk leave a node that would otherwise keep serving while half-alive,
or acknowledge what it did not store. Kafka takes the log directory offline and stops the
broker; we stop the process: one ``event=fail_stop`` line, then ``os._exit`` (no cleanup
that could write more, no waiting for threads). A supervisor restarts it; recovery on
start-up is what makes that safe.

Tests replace the action with ``set_action`` (e.g. to record the call and raise) and put it
back with ``reset_action``.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn

log = logging.getLogger("kcoord.failstop")

EXIT_FAIL_STOP = 3  # a fault stopped the node; a restart recovers
EXIT_CORRUPT = 2  # data on disk cannot be trusted; an operator must look first

Action = Callable[[str, str, int], None]


def _exit(component: str, reason: str, code: int) -> None:
    for handler in logging.getLogger().handlers:
        try:
            handler.flush()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass
    sys.stderr.flush()
    os._exit(code)


_action: Action = _exit
_lock = threading.Lock()
_stopping = False


class FailStopped(Exception):
    """Raised by test actions (the real action never returns)."""


def fail_stop(component: str, reason: str, code: int = EXIT_FAIL_STOP) -> NoReturn:
    """Stop the node: log once, then exit with ``code``. Safe from any thread."""
    global _stopping
    with _lock:
        first = not _stopping
        _stopping = True
    if first:
        log.critical("event=fail_stop component=%s exit_code=%d reason=%r", component, code, reason)
    _action(component, reason, code)
    raise FailStopped(f"{component}: {reason}")  # only reached when a test action returns


def set_action(action: Action) -> None:
    global _action, _stopping
    _action = action
    _stopping = False


def reset_action() -> None:
    set_action(_exit)


def guarded(component: str, target: Callable[[], None]) -> Callable[[], None]:
    """Wrap a background thread's body: an exception out of it stops the node."""

    def run() -> None:
        try:
            target()
        except FailStopped:
            raise
        except BaseException as e:  # noqa: BLE001 - a dead background thread must not go unnoticed
            log.exception("event=background_thread_died component=%s", component)
            fail_stop(component, f"{type(e).__name__}: {e}")

    return run
