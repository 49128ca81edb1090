"""The chaos checker's input as Spark tables: the schemas of a run's files (JSONL or their Parquet
copies), the Spark session, and ``load``, which derives the tables the invariants read."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from chaos.check.model import fault_windows

INF = 1.0e18  # "may still take effect": the end of an unknown / unanswered commit

EVENT_SCHEMA = StructType([
    StructField("t", DoubleType()), StructField("proc", StringType()), StructField("type", StringType()),
    StructField("op", StringType()), StructField("topic", StringType()),
    StructField("partition", LongType()), StructField("offset", LongType()),
    StructField("value", StringType()), StructField("error", StringType()),
    StructField("group", StringType()), StructField("member", StringType()),
    StructField("instance", StringType()),  # optional: group.instance.id of a static member
    StructField("generation", LongType()),
    StructField("protocol", StringType()),  # on assign: the member's group protocol (classic, consumer)
    StructField("lost", BooleanType()),  # on revoke: the client found its partitions already taken away
    # mixed-type JSON arrays ([topic, partition, ...]) read as strings; cast below
    StructField("partitions", ArrayType(ArrayType(StringType()))),
    StructField("records", ArrayType(ArrayType(StringType()))),
    StructField("offsets", ArrayType(ArrayType(StringType()))),
    StructField("txn", StringType()), StructField("outputs", LongType()),  # exactly-once workers' txn.commit.invoke
])
FAULT_SCHEMA = StructType([
    StructField("t", DoubleType()), StructField("type", StringType()), StructField("node", StringType()),
    StructField("detail", StringType()), StructField("end", DoubleType()),
])
OFFSETS_SCHEMA = StructType([
    StructField("partition", LongType()), StructField("group", StringType()), StructField("topic", StringType()),
    StructField("topic_partition", LongType()), StructField("offset", LongType()),
    StructField("metadata", StringType()), StructField("commit_timestamp", DoubleType()),
    StructField("tombstone", BooleanType()),
])
KEY = ["group", "topic", "partition"]


# ----------------------------------------------------------------------------------------- spark


def spark_session(master: str | None = None, app: str = "kcoord-chaos-check") -> SparkSession:
    b = SparkSession.builder.appName(app)
    if master:
        b = b.master(master)
    if SparkSession.getActiveSession() is None:
        cores = os.cpu_count() or 2
        b = (b.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(max(4, 4 * cores)))
             .config("spark.driver.memory", os.environ.get("KCOORD_CHECK_DRIVER_MEMORY", "4g"))
             .config("spark.sql.session.timeZone", "UTC"))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("KCOORD_CHECK_SPARK_LOG", "ERROR"))
    return spark


def _files(spark: SparkSession, path_glob: str) -> list[str]:
    """The files matching ``path_glob`` on whatever file system it names (local, hdfs://,
    s3a://, ...), listed through Spark's Hadoop configuration as Spark itself would read them."""
    sc: Any = spark.sparkContext  # py4j handles: untyped
    path = sc._jvm.org.apache.hadoop.fs.Path(path_glob)
    fs = path.getFileSystem(sc._jsc.hadoopConfiguration())
    found = fs.globStatus(path)
    return sorted(str(st.getPath().toString()) for st in (found or []) if st.isFile())


# ----------------------------------------------------------------------------------------- load


@dataclass
class Tables:
    ev: DataFrame
    commits: DataFrame      # one row per (commit op, topic-partition): status ok|fail|unknown, t_end
    reads: DataFrame        # fetch_committed results (offset >= -1), one row per topic-partition
    assign_x: DataFrame     # assign events, one row per partition
    poll_x: DataFrame       # poll records, one row per record
    produced: DataFrame     # produce.ok
    final: DataFrame | None  # offsets-log majority final state per (group, topic, partition)
    divergent: DataFrame | None
    t_end: float
    faults: list[dict[str, Any]]
    # per Raft group (e.g. "__consumer_offsets-3"), when a node took its leadership over (from
    # the node logs): a coordinator that loads a group restarts its members' session timers
    leaderships: dict[str, list[float]] = field(default_factory=dict)


def _tp(arr: Column, i: int) -> Column:
    return arr.getItem(i)


# Parquet copies of a run's inputs (chaos/check/columnar.py writes them), read instead of the
# JSONL when present: JSON parsing is most of the cost of loading a large run.
HISTORY_PARQUET, OFFSETS_PARQUET = "history.parquet", "offsets.parquet"


def history_events(spark: SparkSession, root: str, parquet: bool = True) -> DataFrame:
    """The run's client events, each with ``seq`` (its place in its file: ties in time keep
    their order), from the Parquet copy if there is one (and ``parquet``)."""
    if parquet and _files(spark, f"{root}/{HISTORY_PARQUET}/_SUCCESS"):
        schema = StructType([*EVENT_SCHEMA.fields, StructField("seq", LongType())])
        return spark.read.schema(schema).parquet(f"{root}/{HISTORY_PARQUET}")
    hist = f"{root}/history/*.jsonl"
    if not _files(spark, hist):
        raise FileNotFoundError(f"no history files: {hist}")
    return (spark.read.schema(EVENT_SCHEMA).option("mode", "PERMISSIVE").json(hist)
            .withColumn("seq", F.monotonically_increasing_id()))


def offsets_records(spark: SparkSession, root: str, parquet: bool = True) -> tuple[DataFrame, int] | None:
    """Every node's exported offsets records with ``node`` and ``seq`` (file order), and the
    number of node files; None without exports. From the Parquet copy as above."""
    if parquet and _files(spark, f"{root}/{OFFSETS_PARQUET}/_SUCCESS"):
        schema = StructType([*OFFSETS_SCHEMA.fields, StructField("node", StringType()), StructField("seq", LongType())])
        records = spark.read.schema(schema).parquet(f"{root}/{OFFSETS_PARQUET}")
        return records, records.select("node").distinct().count()
    opath = f"{root}/offsets-node-*.jsonl"
    nodes = len(_files(spark, opath))
    if not nodes:
        return None
    return (spark.read.schema(OFFSETS_SCHEMA).json(opath)
            .withColumn("node", F.regexp_extract(F.input_file_name(), r"offsets-node-([^/]+)\.jsonl$", 1))
            .withColumn("seq", F.monotonically_increasing_id())), nodes


def run_info(run_dir: str) -> dict[str, Any]:
    """run.json of a run on the local file system ({} elsewhere or without one)."""
    local = run_dir.removeprefix("file://")
    path = Path(local, "run.json")
    if "://" in local or not path.exists():
        return {}
    info: dict[str, Any] = json.loads(path.read_text())
    return info


def leaderships(run_dir: str) -> dict[str, list[float]]:
    """Per Raft group, the run-clock times a node was elected its leader (``event=leader_elected``
    in the copied node logs); {} without local logs or run.json's ``t0``."""
    from chaos.check.fault_times import leadership_events

    t0 = float(run_info(run_dir).get("t0", 0.0))
    out: dict[str, list[float]] = {}
    if t0:
        for t, _node, kind, part in leadership_events(run_dir.removeprefix("file://"), t0):
            if kind == "elected":
                out.setdefault(part, []).append(t)
    return out


def load(spark: SparkSession, run_dir: str) -> Tables:
    root = run_dir.rstrip("/")
    ev = (history_events(spark, root)
          .where(F.col("type").isNotNull() & F.col("t").isNotNull())
          .cache())
    t_end = ev.agg(F.max("t")).first()[0] or 0.0  # type: ignore[index]

    inv = (ev.where(F.col("type") == "commit.invoke")
           .select("op", F.col("t").alias("t_inv"), "group", "member", "generation", "seq",
                   F.explode("offsets").alias("o"))
           .select("op", "t_inv", "group", "member", "generation", "seq",
                   _tp(F.col("o"), 0).alias("topic"), _tp(F.col("o"), 1).cast("long").alias("partition"),
                   _tp(F.col("o"), 2).cast("long").alias("offset")))
    res = (ev.where(F.col("type").isin("commit.ok", "commit.fail", "commit.unknown"))
           .groupBy("op").agg(F.min("t").alias("t_res"),
                              F.first(F.regexp_replace("type", "^commit\\.", "")).alias("status"),
                              F.first("error").alias("error")))
    commits = (inv.join(res, "op", "left")
               .withColumn("answered", F.col("status").isNotNull())
               .withColumn("status", F.coalesce(F.col("status"), F.lit("unknown")))
               .withColumn("t_end", F.when(F.col("status") == "ok", F.col("t_res")).otherwise(F.lit(INF)))
               .cache())
    reads = (ev.where(F.col("type") == "fetch_committed")
             .select("t", "seq", "group", "member", F.explode("offsets").alias("o"))
             .select("t", "seq", "group", "member", _tp(F.col("o"), 0).alias("topic"),
                     _tp(F.col("o"), 1).cast("long").alias("partition"),
                     _tp(F.col("o"), 2).cast("long").alias("offset")))
    assign_x = (ev.where(F.col("type") == "assign")
                .select("t", "seq", "group", "member", "instance", "generation", F.explode("partitions").alias("p"))
                .select("t", "seq", "group", "member", "instance", "generation",
                        _tp(F.col("p"), 0).alias("topic"), _tp(F.col("p"), 1).cast("long").alias("partition")))
    poll_x = (ev.where(F.col("type") == "poll")
              .select("t", "seq", "group", "member", "generation", F.explode("records").alias("r"))
              .select("t", "seq", "group", "member", "generation", _tp(F.col("r"), 0).alias("topic"),
                      _tp(F.col("r"), 1).cast("long").alias("partition"),
                      _tp(F.col("r"), 2).cast("long").alias("offset"), _tp(F.col("r"), 3).alias("value"))
              .cache())
    produced = ev.where(F.col("type") == "produce.ok").select("t", "topic", "partition", "offset", "value")

    faults: list[dict[str, Any]] = []
    fpath = f"{root}/faults.jsonl"
    if _files(spark, fpath):
        frows = spark.read.schema(FAULT_SCHEMA).json(fpath).where(F.col("type").isNotNull()).orderBy("t").collect()
        faults = fault_windows([r.asDict() for r in frows], t_end)

    final, divergent = None, None
    exported = offsets_records(spark, root)
    if exported is not None:
        final, divergent = _final_offsets(*exported)
        # I1-I9 judge the classic groups' commits; an exactly-once group commits inside its
        # transactions (no commit events), and I10 judges it
        classic = ev.where(F.col("type").isin("commit.invoke", "assign")).select("group").distinct()
        final, divergent = final.join(classic, "group", "left_semi"), divergent.join(classic, "group", "left_semi")
    return Tables(ev, commits, reads, assign_x, poll_x, produced, final, divergent, float(t_end), faults,
                  leaderships(root))




def _final_offsets(records: DataFrame, nodes: int) -> tuple[DataFrame, DataFrame]:
    """Each node's replayed final state; the value held by a strict majority of node files wins.
    The node files are as big as the history (a record per commit): read them once."""
    o = records
    tomb = o.where(F.col("tombstone")).groupBy("node", "group").agg(F.max("seq").alias("tomb_seq"))
    last = (o.where(~F.coalesce(F.col("tombstone"), F.lit(False)))
            .groupBy("node", "group", "topic", "topic_partition")
            .agg(F.max_by("offset", "seq").alias("offset"), F.max("seq").alias("lseq"))
            .join(tomb, ["node", "group"], "left")
            .where(F.col("tomb_seq").isNull() | (F.col("lseq") > F.col("tomb_seq")))
            .withColumnRenamed("topic_partition", "partition"))
    # a row per key and value: small, and both results below read it
    votes = last.groupBy(*KEY, "offset").agg(F.count("*").alias("n"), F.collect_list("node").alias("nodes")).cache()
    w = Window.partitionBy(*KEY).orderBy(F.col("n").desc(), F.col("offset").desc())
    ranked = votes.withColumn("rk", F.row_number().over(w))
    # small after aggregation; cached because I1 and I3 both read it (the logs are the biggest input)
    final = ranked.where((F.col("rk") == 1) & (F.col("n") * 2 > nodes)).select(*KEY, "offset").cache()
    divergent = (votes.groupBy(*KEY).agg(F.max("n").alias("best"),
                                         F.collect_list(F.struct("offset", "nodes")).alias("values"))
                 .where(F.col("best") * 2 <= nodes).drop("best")
                 .withColumn("node_files", F.lit(nodes)).cache())
    return final, divergent


