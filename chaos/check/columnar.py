"""Parquet copies of a chaos run's inputs, for checking a large run faster and more than once.

    python -m chaos parquet RUN_DIR [--master local[2]]

writes ``RUN_DIR/history.parquet`` (the client events) and ``RUN_DIR/offsets.parquet`` (the
nodes' offsets exports), each with the ``seq`` column the checker orders ties by, and the checker
(``chaos/check/job.py``) reads them instead of the JSONL whenever their ``_SUCCESS`` marker is
there. The JSONL stays the record: clients append to it as they go, so a crash loses at most
a line, which a Parquet file cannot offer; converting afterwards costs one JSON read, what
one check spends on loading anyway.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from chaos.check.tables import (
    HISTORY_PARQUET,
    OFFSETS_PARQUET,
    history_events,
    offsets_records,
    spark_session,
)


def to_parquet(run_dir: str, master: str | None = "local[*]") -> dict[str, Any]:
    """Write both copies (replacing older ones); returns row counts and seconds."""
    spark = spark_session(master, app="kcoord-chaos-parquet")
    root = run_dir.rstrip("/")
    out: dict[str, Any] = {}
    t = time.monotonic()
    history_events(spark, root, parquet=False).write.mode("overwrite").parquet(f"{root}/{HISTORY_PARQUET}")
    out["history_seconds"] = round(time.monotonic() - t, 1)
    exported = offsets_records(spark, root, parquet=False)
    if exported is not None:
        t = time.monotonic()
        exported[0].write.mode("overwrite").parquet(f"{root}/{OFFSETS_PARQUET}")
        out["offsets_seconds"] = round(time.monotonic() - t, 1)
    return out


def add_arguments(p: Any) -> None:
    p.add_argument("run_dir")
    p.add_argument("--master", default=None, help="Spark master, e.g. local[2] or spark://host:7077 (default local[*])")


def run_from_args(args: Any) -> int:
    print(json.dumps(to_parquet(args.run_dir, master=args.master or "local[*]")))
    return 0


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m chaos.check.columnar", description=__doc__.splitlines()[0])
    add_arguments(ap)
    sys.exit(run_from_args(ap.parse_args()))
