"""``kcoord chaos fuzz``: fuzz a running cluster (e.g. ``make run``) while a healthy client group
works; exits 1 if a node stopped answering or anything acknowledged was lost."""

from __future__ import annotations

import argparse
import asyncio
import random

from chaos.fuzz.healthy import HealthyGroup
from chaos.fuzz.runner import fuzz


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap", default="127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094")
    p.add_argument("--cases", type=int, default=3000)
    p.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--idle-connections", type=int, default=1000)
    p.add_argument("--no-healthy", action="store_true", help="no healthy client group beside the fuzzer")


def run_from_args(args: argparse.Namespace) -> int:
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    nodes = [n.strip() for n in args.bootstrap.split(",") if n.strip()]
    healthy = None if args.no_healthy else HealthyGroup(args.bootstrap)
    if healthy is not None:
        healthy.__enter__()
    try:
        report = asyncio.run(fuzz(nodes, cases=args.cases, seed=seed, concurrency=args.concurrency,
                                  idle_connections=args.idle_connections))
    finally:
        if healthy is not None:
            healthy.__exit__(None, None, None)
    print(report.summary())
    problems = list(report.failures)
    if healthy is not None:
        problems += healthy.verify()
        s = healthy.stats
        print(f"healthy group: {len(s.produced)} acknowledged produces, {s.commits} commits, "
              f"{s.consumed} consumed, {len(s.errors)} client errors")
    for p in problems:
        print("PROBLEM:", p)
    return 1 if problems else 0
