"""Faults injected on the Raft messages a hub sends: delay, duplication, reordering and loss.

The kernel here has no netem, and a TCP connection delivers in order anyway, so these are
injected where Raft sees them: in the hub, per message, before framing. A message may be held
back for up to ``delay_s`` (messages held back leave in the order their delays end, so holding
reorders them), may be sent twice, and may be lost (message loss: TCP would turn packet
loss into delay). Seeded, so a failing run can be replayed from its seed.
Used by tests and the chaos tool; a hub without faults never touches this module's state.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LinkFaults:
    seed: int
    delay_s: float = 0.0  # a held-back message waits up to this long
    hold: float = 0.0  # probability that a message is held back (delayed, so reordered)
    duplicate: float = 0.0  # probability that a message is sent twice
    loss: float = 0.0  # probability that a message is lost
    _rng: random.Random = field(init=False, repr=False)
    _held: dict[str, list[tuple[float, int, tuple[str, Any]]]] = field(init=False, repr=False)
    _n: int = field(init=False, default=0, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._held = {}

    def shape(self, peer: str, batch: list[tuple[str, Any]], now: float) -> list[tuple[str, Any]]:
        """What leaves for ``peer`` now: the due held-back messages, then this pass's messages
        that are not held back, some twice."""
        held = self._held.setdefault(peer, [])
        out = [m for due, _n, m in sorted(held) if due <= now]
        held[:] = [h for h in held if h[0] > now]
        for message in batch:
            if self.loss and self._rng.random() < self.loss:
                continue
            if self._rng.random() < self.hold:
                self._n += 1
                held.append((now + self._rng.uniform(0, self.delay_s), self._n, message))
                continue
            out.append(message)
            if self._rng.random() < self.duplicate:
                out.append(message)
        return out

    def pending(self) -> bool:
        return any(self._held.values())
