"""The chaos-run checker: a PySpark job over a run directory (history format: chaos/history.py).

    RUN_DIR/history/*.jsonl        client events, one file per client process
    RUN_DIR/faults.jsonl           the fault timeline
    RUN_DIR/offsets-node-*.jsonl   each node's replayed offsets log (optional)

or their Parquet copies (``history.parquet``, ``offsets.parquet``: chaos/check/columnar.py),
read instead whenever they are complete. RUN_DIR may be any URL Spark's Hadoop file system
reads (hdfs://, s3a://): the files are listed through it, never through the driver's disk.

It checks invariants I1-I9 (shared/reference/raft-coordinator-anchors.md §2.4) and I10, exactly-once
(chaos/check/exactly_once.py), gives a verdict
per invariant with up to ``max_examples`` counterexamples, and writes RUN_DIR/report/
(summary.json, summary.txt, index.html with plots). This module is the driver and the CLI; the
tables are loaded by chaos/check/tables.py, the invariants are chaos/check/invariants.py, and
the verdicts and report (no Spark) are chaos/check/model.py. Run it with

    python -m chaos check RUN_DIR [--master local[*]]
    spark-submit chaos/check/job.py RUN_DIR [--out DIR]

The heavy work (per-key sequences, joins) stays in Spark; the driver only collects small
tables: fault windows, generations, counterexamples and a sample of commit latencies.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from typing import Any

if __package__ in (None, ""):  # spark-submit chaos/check/job.py: make `chaos` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from chaos.check.exactly_once import check_i10
from chaos.check.invariants import (
    _generations,
    check_i1,
    check_i2,
    check_i3,
    check_i4,
    check_i5,
    check_i6,
    check_i7,
    check_i8,
    check_i9,
)
from chaos.check.model import INVARIANTS, Options, Report, Verdict
from chaos.check.tables import Tables, load, run_info, spark_session

# ----------------------------------------------------------------------------------------- driver


def run_check(run_dir: str, master: str | None = "local[*]", out_dir: str | None = None,
              opts: Options | None = None, write: bool = True) -> Report:
    """Check a chaos run; write RUN_DIR/report (or ``out_dir``) unless ``write`` is false."""
    opts = opts or Options()
    partitions = run_info(str(run_dir)).get("offsets_partitions")
    if partitions:
        opts = dataclasses.replace(opts, offsets_partitions=int(partitions))
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    spark = spark_session(master)
    timings["spark_start"] = time.monotonic() - t0
    t = time.monotonic()
    tb = load(spark, str(run_dir))
    n_events = tb.ev.count()
    timings["load"] = time.monotonic() - t
    if opts.progress:
        print(f"[chaos check] loaded {n_events} events in {timings['load']:.1f} s", file=sys.stderr, flush=True)
    verdicts: dict[str, Verdict] = {}
    gens = _generations(tb)
    durations: list[dict[str, Any]] = []
    for vid in INVARIANTS:
        t = time.monotonic()
        if vid == "I1":
            verdicts[vid] = check_i1(tb, opts)
        elif vid == "I2":
            verdicts[vid] = check_i2(tb, opts)
        elif vid == "I3":
            verdicts[vid] = check_i3(tb, opts)
        elif vid == "I4":
            verdicts[vid] = check_i4(tb, opts)
        elif vid == "I5":
            verdicts[vid] = check_i5(tb, opts)
        elif vid == "I6":
            verdicts[vid] = check_i6(tb, opts, gens)
        elif vid == "I7":
            verdicts[vid] = check_i7(tb, opts)
        elif vid == "I8":
            verdicts[vid] = check_i8(tb, opts)
        elif vid == "I9":
            verdicts[vid], durations = check_i9(spark, tb, opts)
        else:
            verdicts[vid] = check_i10(spark, str(run_dir), tb, opts)
        timings[vid] = round(time.monotonic() - t, 3)
        if opts.progress:
            print(f"[chaos check] {vid} {verdicts[vid].status} in {timings[vid]:.1f} s", file=sys.stderr, flush=True)
    t = time.monotonic()
    from chaos.check import fault_times

    partition_faults = fault_times.partition_fault_times(spark, str(run_dir), tb.faults, _acknowledged_commits(tb))
    timings["partition_faults"] = time.monotonic() - t
    t = time.monotonic()
    plots = _plot_data(tb, opts, gens, durations)
    timings["plot_data"] = time.monotonic() - t
    by_type = {r["type"]: r["count"] for r in tb.ev.groupBy("type").count().collect()}
    stats = {"events": n_events, "events_by_type": by_type, "t_end": tb.t_end,
             "groups": len({g["group"] for g in gens}), "master": spark.sparkContext.master}
    if partition_faults:
        stats["partition_faults"] = fault_times.summary(partition_faults)
    info = run_info(str(run_dir))
    if info.get("learners"):
        stats["learners"] = info["learners"]  # each node back on an empty disk: when it was promoted again
    if info.get("joins"):
        stats["joins"] = info["joins"]  # each node that joined: how long until it voted in every group
    timings["total"] = round(time.monotonic() - t0, 3)
    ok = all(v.status != "fail" for v in verdicts.values())
    report = Report(str(run_dir), ok, verdicts, stats, {k: round(v, 3) for k, v in timings.items()}, tb.faults,
                    plots=plots, partition_faults=partition_faults)
    for df in (tb.ev, tb.commits, tb.poll_x, tb.final, tb.divergent):
        if df is not None:
            df.unpersist()
    if write:
        from chaos.check.report import write_report

        report.out_dir = out_dir or _report_dir(str(run_dir))
        write_report(report, report.out_dir)
    return report


def _acknowledged_commits(tb: Tables) -> Any:
    """Commits with their group, invoke and answer times and status: the classic groups' offset
    commits and the exactly-once workers' transactions (their offsets commit with them)."""
    txns = (tb.ev.where(F.col("type") == "txn.commit.invoke").select("op", "group", F.col("t").alias("t_inv"))
            .join(tb.ev.where(F.col("type") == "txn.commit.ok").select("op", F.col("t").alias("t_res")), "op")
            .where(F.col("group").isNotNull()).withColumn("status", F.lit("ok")))
    cols = ["group", "t_inv", "t_res", "status"]
    return tb.commits.select(*cols).unionByName(txns.select(*cols))


def _report_dir(run_dir: str) -> str:
    """RUN_DIR/report; for a run on another file system (hdfs://, s3a://) ./report-NAME here: the
    driver writes the report with plain file I/O."""
    if "://" in run_dir and not run_dir.startswith("file://"):
        return os.path.abspath(f"report-{run_dir.rstrip('/').rsplit('/', 1)[-1]}")
    return os.path.join(run_dir.removeprefix("file://"), "report")


def _plot_data(tb: Tables, opts: Options, gens: list[dict[str, Any]], durations: list[dict[str, Any]]) -> dict[str, Any]:
    per_op = tb.commits.groupBy("op").agg(F.first("t_inv").alias("t_inv"), F.first("t_res").alias("t_res"),
                                          F.first("status").alias("status"))
    n = per_op.count()
    frac = min(1.0, opts.latency_sample / n) if n else 1.0
    sample = per_op.sample(False, frac, seed=7) if frac < 1 else per_op
    lat = [(r["t_inv"], None if r["t_res"] is None else r["t_res"] - r["t_inv"], r["status"])
           for r in sample.collect()]
    return {"latency": lat, "latency_sampled": frac < 1, "faults": tb.faults, "generations": gens,
            "failovers": durations}


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="chaos/check/job.py", description="check a kcoord chaos run")
    add_arguments(p)
    args = p.parse_args(argv)
    return run_from_args(args)


def add_arguments(p: Any) -> None:
    p.add_argument("run_dir")
    p.add_argument("--master", default=None, help="Spark master (default: local[*], or spark-submit's)")
    p.add_argument("--out", default=None, help="report directory (default RUN_DIR/report)")
    p.add_argument("--max-examples", type=int, default=10)
    p.add_argument("--liveness-bound", type=float, default=35.0)
    p.add_argument("--fault-grace", type=float, default=15.0)


def run_from_args(args: Any) -> int:
    master = args.master
    if master is None and not os.environ.get("PYSPARK_GATEWAY_PORT"):  # not under spark-submit: default local
        master = "local[*]"
    opts = Options(max_examples=args.max_examples, liveness_bound=args.liveness_bound, fault_grace=args.fault_grace,
                   progress=True)
    # a caller's own session (the CLI called in-process, as the tests do) is the caller's to stop
    borrowed = SparkSession.getActiveSession() is not None
    report = run_check(args.run_dir, master=master, out_dir=args.out, opts=opts)
    from chaos.check.report import text_summary

    print(text_summary(report))
    print(json.dumps({"ok": report.ok, "report": report.out_dir,
                      "verdicts": {k: v.status for k, v in report.verdicts.items()}}))
    if not borrowed:
        SparkSession.builder.getOrCreate().stop()
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
