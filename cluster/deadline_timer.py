"""One asyncio timer for the earliest deadline of a sans-IO runtime (coordinator time, in ms)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class DeadlineTimer:
    def __init__(self, now_ms: Callable[[], int], fire: Callable[[], None]) -> None:
        self._now_ms = now_ms
        self._fire = fire
        self._handle: asyncio.TimerHandle | None = None
        self._deadline: int | None = None

    @property
    def armed(self) -> bool:
        return self._handle is not None

    def arm(self, loop: asyncio.AbstractEventLoop, deadline: int | None) -> None:
        """Fire just after ``deadline`` (None: not at all); re-arming at the same deadline is free."""
        if deadline == self._deadline and self._handle is not None:
            return
        self.cancel()
        self._deadline = deadline
        if deadline is not None:
            delay = max(0.0, (deadline - self._now_ms() + 1) / 1000)
            self._handle = loop.call_later(delay, self._on_timer)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._deadline = None

    def _on_timer(self) -> None:
        self._handle = None
        self._deadline = None
        self._fire()
