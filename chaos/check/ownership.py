"""I5 on the clock: who owned each partition when, from the client histories' own timestamps.

A member owns a partition from the ``assign`` that gave it until the first of: a ``revoke``
naming it, the member's ``leave``, its ``crash`` (the runner's record of a kill), or the end
of the history. Every client runs on this host and stamps events with the same run clock, so
two members' spans of one (group, topic, partition) that overlap mean two consumers held it at
one moment, whatever their generations or coordinators.

One overlap is Kafka's by design, not ours: a member whose coordinator expired it while it
could not be reached (a client cut off) keeps consuming until it notices and reports the loss
(librdkafka's ``on_lost``, a ``revoke`` with ``lost``); fencing by generation then rejects its
commits (the other half of I5). Those overlaps are counted apart as ``zombie`` and reported,
not failed.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

_KEY = ["group", "topic", "partition"]


def _exploded(ev: DataFrame, typ: str) -> DataFrame:
    return (ev.where(F.col("type") == typ)
            .select("t", "seq", "group", "member", F.explode("partitions").alias("p"),
                    F.coalesce(F.col("lost"), F.lit(False)).alias("lost"))
            .select("t", "seq", "group", "member", F.col("p").getItem(0).alias("topic"),
                    F.col("p").getItem(1).cast("long").alias("partition"), "lost"))


def spans(ev: DataFrame, t_end: float) -> DataFrame:
    """(group, topic, partition, member, start, end, lost): one row per ownership span."""
    assigns = _exploded(ev, "assign").select(*_KEY, "member", F.col("t").alias("start"), F.col("seq").alias("s_seq"))
    revokes = _exploded(ev, "revoke").select(*_KEY, "member", F.col("t").alias("t_e"), F.col("seq").alias("e_seq"),
                                              "lost")
    # a leave or crash ends every partition the member held
    gone = (ev.where(F.col("type").isin("leave", "crash"))
            .select("group", "member", F.col("t").alias("t_e"), F.col("seq").alias("e_seq")))
    held = assigns.select(*_KEY, "member").distinct()
    ends = revokes.unionByName(held.join(gone, ["group", "member"]).withColumn("lost", F.lit(False)))
    after: Column = (F.col("t_e") > F.col("start")) | ((F.col("t_e") == F.col("start"))
                                                       & (F.col("e_seq") > F.col("s_seq")))
    first_end = (assigns.join(ends, [*_KEY, "member"], "left")
                 .where(F.col("t_e").isNull() | after)
                 .withColumn("rk", F.row_number().over(Window.partitionBy(*_KEY, "member", "start", "s_seq")
                                                       .orderBy(F.col("t_e").asc_nulls_last(), "e_seq")))
                 .where(F.col("rk") == 1))
    # an assign repeated without a revoke in between (cooperative, or a re-announcement) starts
    # no new span: keep the earliest start per end
    return (first_end.withColumn("end", F.coalesce(F.col("t_e"), F.lit(float(t_end))))
            .withColumn("lost", F.coalesce(F.col("lost"), F.lit(False)))
            .groupBy(*_KEY, "member", "end", "lost").agg(F.min("start").alias("start")))


def overlaps(ev: DataFrame, t_end: float) -> tuple[DataFrame, DataFrame]:
    """(overlaps, zombie overlaps): pairs of spans of different members of one partition that
    overlap in time; zombie = the one that started first ended with a lost revoke."""
    s = spans(ev, t_end).cache()
    a = s.select(*_KEY, F.col("member").alias("member_a"), F.col("start").alias("a_start"),
                 F.col("end").alias("a_end"), F.col("lost").alias("a_lost"))
    b = s.select(*_KEY, F.col("member").alias("member_b"), F.col("start").alias("b_start"),
                 F.col("end").alias("b_end"), F.col("lost").alias("b_lost"))
    pairs = (a.join(b, _KEY)
             .where((F.col("member_a") != F.col("member_b")) & (F.col("a_start") <= F.col("b_start"))
                    & (F.col("b_start") < F.col("a_end")))
             .withColumn("overlap_s", F.least("a_end", "b_end") - F.col("b_start"))
             .orderBy("b_start"))
    return pairs.where(~F.col("a_lost")), pairs.where(F.col("a_lost"))
