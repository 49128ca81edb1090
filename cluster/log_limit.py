"""Rate-limited warnings: a flood of bad requests must not become a flood of log lines.

Each event key gets at most ``burst`` lines per ``window_s``; the first line after a quiet
spell says how many were suppressed. Time comes from ``time.monotonic``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class LogLimiter:
    def __init__(self, logger: logging.Logger, *, burst: int = 10, window_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.burst = burst
        self.window_s = window_s
        self.clock = clock
        self._windows: dict[str, tuple[float, int, int]] = {}  # key -> (start, logged, suppressed)

    def warning(self, key: str, msg: str, *args: object) -> None:
        now = self.clock()
        start, logged, suppressed = self._windows.get(key, (now, 0, 0))
        if now - start >= self.window_s:
            if suppressed:
                self.logger.warning("event=log_suppressed key=%s count=%d window_s=%.0f", key, suppressed,
                                    self.window_s)
            start, logged, suppressed = now, 0, 0
        if logged < self.burst:
            self.logger.warning(msg, *args)
            logged += 1
        else:
            suppressed += 1
        self._windows[key] = (start, logged, suppressed)
        if len(self._windows) > 1000:  # keys are a small fixed set; never let them grow
            self._windows.clear()
