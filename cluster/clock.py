"""The node's clock for the coordinator: wall-clock milliseconds that advance monotonically.

Group timers (session, join and sync deadlines, rebalance delays) are deadlines on this clock:
read as the wall clock, a step of the wall clock (NTP, a VM resumed, an operator's `date -s`)
forward would expire every session at once, and a step back would freeze them. This clock reads
the wall clock once, at start, and then advances with ``time.monotonic``. Record timestamps
(commit and state times) come from it too: they equal the wall clock except after a step while
the node runs, when they keep the offset they had (a restarted node reads the wall clock anew).
"""

from __future__ import annotations

import time
from collections.abc import Callable


class AnchoredClock:
    def __init__(self, wall: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._offset_ms = int(wall() * 1000) - int(monotonic() * 1000)

    def now_ms(self) -> int:
        return self._offset_ms + int(self._monotonic() * 1000)
