"""``kcoord chaos SUBCOMMAND`` (also ``python -m chaos SUBCOMMAND``).

Subcommands live in ``SUBCOMMANDS``: name -> (module path, help). Each module has
``add_arguments(parser)`` and ``run_from_args(args) -> int``; it is imported only when its
subcommand runs, so ``kcoord --help`` never pays for pyspark. ``run`` (the chaos runner) plugs
in here: add ``"run": ("chaos.run", "...")`` once chaos/run.py exists.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

COMMAND = "chaos"
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "run": ("chaos.run", "run a chaos scenario on a fresh local 3-node cluster; writes a run directory"),
    "fuzz": ("chaos.fuzz.cli", "fuzz a running cluster's wire protocol beside a healthy client group"),
    "check": ("chaos.check.job", "check a chaos run's history (PySpark): invariants I1-I10, report in RUN_DIR/report"),
    "parquet": ("chaos.check.columnar", "write Parquet copies of a run's histories and offsets exports (faster checks)"),
}


def _check_arguments(p: argparse.ArgumentParser) -> None:
    # mirrors chaos.check.job.add_arguments without importing pyspark at parser-build time
    p.add_argument("run_dir")
    p.add_argument("--master", default=None, help="Spark master, e.g. local[2] or spark://host:7077 (default local[*])")
    p.add_argument("--out", default=None, help="report directory (default RUN_DIR/report)")
    p.add_argument("--max-examples", type=int, default=10, help="counterexamples kept per invariant")
    p.add_argument("--liveness-bound", type=float, default=35.0, help="I9: seconds to progress after a fault window")
    p.add_argument("--fault-grace", type=float, default=15.0, help="I6/I7: seconds a fault's effects may outlast it")


def _parquet_arguments(p: argparse.ArgumentParser) -> None:
    # mirrors chaos.check.columnar.add_arguments, for the same reason
    p.add_argument("run_dir")
    p.add_argument("--master", default=None, help="Spark master, e.g. local[2] or spark://host:7077 (default local[*])")


# Argument builders that must not import the subcommand's module (heavy imports); others are imported.
_LIGHT_ARGUMENTS: dict[str, Any] = {"check": _check_arguments, "parquet": _parquet_arguments}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(COMMAND, help="chaos testing: run a chaos workload, check its history")
    _add_subcommands(p)
    return p


def run(args: argparse.Namespace) -> int:
    module, _ = SUBCOMMANDS[args.chaos_cmd]
    return int(importlib.import_module(module).run_from_args(args))


def _add_subcommands(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="chaos_cmd", required=True)
    for name, (module, help_) in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=help_)
        builder = _LIGHT_ARGUMENTS.get(name)
        if builder is None:
            builder = importlib.import_module(module).add_arguments
        builder(sp)


def main(argv: list[str] | None = None) -> int:
    """``python -m chaos SUBCOMMAND`` / ``kcoord-chaos SUBCOMMAND``."""
    parser = argparse.ArgumentParser(prog="python -m chaos", description="kcoord chaos testing")
    _add_subcommands(parser)
    return run(parser.parse_args(argv if argv is not None else sys.argv[1:]))
