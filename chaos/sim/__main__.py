"""``python -m chaos.sim --seeds 200 [--steps N] [--seed S] [--bug NAME]``."""

from __future__ import annotations

import argparse
import sys
import time

from .bugs import BUGS
from .world import SimFailure, run

DEFAULT_STEPS = 3_000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m chaos.sim", description=__doc__)
    ap.add_argument("--seeds", type=int, default=200, help="run seeds 0..N-1 (default 200)")
    ap.add_argument("--seed", type=int, default=None, help="run (replay) this one seed")
    ap.add_argument("--first", type=int, default=0, help="first seed of --seeds")
    ap.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    ap.add_argument("--bug", choices=BUGS, default=None, help="inject a deliberate coordinator bug")
    args = ap.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else list(range(args.first, args.first + args.seeds))
    t0 = time.perf_counter()
    totals: dict[str, int] = {}
    for seed in seeds:
        try:
            result = run(seed, args.steps, bug=args.bug)
        except SimFailure as f:
            print(f"SIM FAILURE seed={f.seed} step={f.step} invariant={f.invariant}")
            print(f"  {f.detail}")
            bug = f" --bug {args.bug}" if args.bug else ""
            print(f"  replay: python -m chaos.sim --seed {f.seed} --steps {args.steps}{bug}")
            return 1
        for k, v in result.stats.items():
            totals[k] = max(totals.get(k, 0), v) if k == "max_generation" else totals.get(k, 0) + v
        if args.seed is not None:
            print(f"seed={seed} steps={result.steps} sim_time={result.now_ms / 1000:.1f}s digest={result.digest}")
    elapsed = time.perf_counter() - t0
    print(f"{len(seeds)} seeds x {args.steps} steps passed in {elapsed:.1f}s")
    print("  " + " ".join(f"{k}={v}" for k, v in totals.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
