"""Deterministic simulation of the coordinator cluster (TigerBeetle VOPR / FoundationDB style).

``run(seed, steps)`` drives the real ``coordinator`` runtime on three simulated nodes over
simulated replicated logs, with crashes, isolations, leadership moves and message loss,
all from one ``random.Random(seed)`` and a simulated clock. See ``world.py``.
"""

from .bugs import BUGS
from .world import SimFailure, SimResult, Simulator, run

__all__ = ["BUGS", "SimFailure", "SimResult", "Simulator", "run"]
