"""I10, exactly-once, over an exactly-once run's tables (workers and reader: chaos/eos_workload.py;
end state: chaos/eos_scan.py's ``eos-final.jsonl``).

An output record's value is ``<input partition>:<input offset>:<input value>|<txn>``, so each
committed output record names the input record it was made from and the transaction that wrote
it. The verdict fails on:

- ``duplicate``: an input record in the committed output more than once;
- ``missing``: an input record not in the committed output (the run drained its input);
- ``phantom``: committed output naming no input record, or another value than the input's;
- ``aborted-read``: the read_committed reader returned a record that is not committed (in the
  output as read_uncommitted, absent from it as read_committed);
- ``vanished-read``: the reader returned a record the final output does not hold at that offset;
- ``lost-commit``: a transaction acknowledged to its worker (``txn.commit.ok``) missing records in
  the committed output; ``failed-visible``: one that definitely failed whose records are there;
- ``open-transaction``: an output partition whose last stable offset stayed below its high
  watermark after every worker stopped and the transaction timeout passed (a hanging transaction).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from chaos.check.invariants import _verdict
from chaos.check.model import INVARIANTS, Options, Verdict
from chaos.check.tables import Tables, _files, _tp

EOS_FINAL = "eos-final.jsonl"
FINAL_SCHEMA = StructType([
    StructField("scan", StringType()), StructField("partition", LongType()), StructField("offset", LongType()),
    StructField("value", StringType()), StructField("high_watermark", LongType()),
    StructField("last_stable_offset", LongType()), StructField("t", DoubleType()),
])
_OUTPUT = r"^(\d+):(\d+):(.*)\|([^|]*)$"


def _outputs(final: DataFrame, scan: str) -> DataFrame:
    """One scan of the output topic, each record with the input record and transaction it names."""
    return (final.where(F.col("scan") == scan)
            .select("partition", "offset", "value",
                    F.regexp_extract("value", _OUTPUT, 1).alias("in_p"),
                    F.regexp_extract("value", _OUTPUT, 2).alias("in_o"),
                    F.regexp_extract("value", _OUTPUT, 3).alias("in_value"),
                    F.regexp_extract("value", _OUTPUT, 4).alias("txn"))
            .withColumn("in_p", F.when(F.col("in_p") != "", F.col("in_p").cast("long")))
            .withColumn("in_o", F.when(F.col("in_o") != "", F.col("in_o").cast("long"))))


def check_i10(spark: SparkSession, run_dir: str, tb: Tables, opts: Options) -> Verdict:
    txns = tb.ev.where(F.col("type").startswith("txn.commit."))
    root = run_dir.rstrip("/")
    if not _files(spark, f"{root}/{EOS_FINAL}"):
        if txns.limit(1).count():
            return Verdict("I10", _title(), "inconclusive", notes=[f"exactly-once workers ran but there is no {EOS_FINAL}"])
        return Verdict("I10", _title(), "skipped", notes=["no exactly-once workload in this run"])
    final = spark.read.schema(FINAL_SCHEMA).json(f"{root}/{EOS_FINAL}").cache()
    inputs = final.where(F.col("scan") == "input").select("partition", "offset", "value")
    committed = _outputs(final, "committed").cache()
    everything = _outputs(final, "all")

    per_input = committed.where(F.col("in_p").isNotNull()).groupBy("in_p", "in_o")
    duplicate = (per_input.agg(F.count("*").alias("n"),
                               F.array_sort(F.collect_list(F.struct("partition", "offset", "txn"))).alias("at"))
                 .where(F.col("n") > 1))
    missing = (inputs.join(committed.select(F.col("in_p").alias("partition"), F.col("in_o").alias("offset")),
                           ["partition", "offset"], "left_anti")
               .orderBy("partition", "offset"))
    named = inputs.select(F.col("partition").alias("in_p"), F.col("offset").alias("in_o"),
                          F.col("value").alias("input_value"))
    phantom = (committed.join(named, ["in_p", "in_o"], "left")
               .where(F.col("input_value").isNull() | (F.col("input_value") != F.col("in_value")))
               .select("partition", "offset", "value", "input_value"))

    aborted = everything.select("partition", "offset", "value").join(
        committed.select("partition", "offset"), ["partition", "offset"], "left_anti")
    reads = (tb.ev.where(F.col("type") == "read")
             .select("t", "proc", F.explode("records").alias("r"))
             .select("t", "proc", _tp(F.col("r"), 1).cast("long").alias("partition"),
                     _tp(F.col("r"), 2).cast("long").alias("offset"), _tp(F.col("r"), 3).alias("value")))
    aborted_read = reads.join(aborted.select("partition", "offset"), ["partition", "offset"]).orderBy("t")
    held = everything.select("partition", "offset", F.col("value").alias("final_value"))
    vanished = (reads.join(held, ["partition", "offset"], "left")
                .where(F.col("final_value").isNull() | (F.col("final_value") != F.col("value"))).orderBy("t"))

    invoked = (tb.ev.where(F.col("type") == "txn.commit.invoke")
               .select("op", "txn", F.col("outputs").alias("outputs"), F.col("t").alias("t_inv")))
    outcome = txns.where(F.col("type") != "txn.commit.invoke").groupBy("op").agg(
        F.first(F.regexp_replace("type", r"^txn\.commit\.", "")).alias("status"), F.first("error").alias("error"))
    per_txn = committed.groupBy("txn").agg(F.count("*").alias("visible"))
    decided = (invoked.join(outcome, "op", "left").join(per_txn, "txn", "left").fillna(0, ["visible"])
               .withColumn("status", F.coalesce(F.col("status"), F.lit("unanswered"))))  # the worker was killed
    lost_commit = decided.where((F.col("status") == "ok") & (F.col("visible") != F.col("outputs"))).orderBy("t_inv")
    failed_visible = decided.where((F.col("status") == "fail") & (F.col("visible") > 0)).orderBy("t_inv")
    open_txn = (final.where(F.col("scan") == "ends")
                .where(F.col("last_stable_offset") < F.col("high_watermark"))
                .select("partition", "high_watermark", "last_stable_offset"))

    status = {r["status"]: r["count"] for r in decided.groupBy("status").count().collect()}
    stats: dict[str, Any] = {
        "input_records": inputs.count(), "committed_output": committed.count(),
        "aborted_output": aborted.count(), "reader_records": reads.count(),
        "transactions": {str(k): v for k, v in status.items()},
    }
    v = _verdict("I10", [("duplicate", duplicate), ("missing", missing), ("phantom", phantom),
                         ("aborted-read", aborted_read), ("vanished-read", vanished),
                         ("lost-commit", lost_commit), ("failed-visible", failed_visible),
                         ("open-transaction", open_txn)], opts,
                 ["the input as read_uncommitted, the output as read_committed and read_uncommitted, scanned "
                  "after the run healed and every worker stopped (eos-final.jsonl)",
                  "an unknown transaction outcome is accepted both ways"], stats)
    final.unpersist()
    committed.unpersist()
    return v


def _title() -> str:
    return INVARIANTS["I10"]
