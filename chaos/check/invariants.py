"""Invariants I1-I9 over a run's tables (chaos/check/tables.py), each a Spark job that returns a
verdict with counterexamples."""

from __future__ import annotations

import bisect
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from chaos.check.model import INVARIANTS, TOTAL_OUTAGES, Options, Verdict, offsets_partition, touches
from chaos.check.tables import KEY, Tables, _tp


def _rows(df: DataFrame, n: int) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.limit(n).collect()]


def _verdict(vid: str, parts: list[tuple[str, DataFrame]], opts: Options,
             notes: list[str] | None = None, stats: dict[str, Any] | None = None) -> Verdict:
    """One verdict from several violation DataFrames, each labelled with its kind."""
    total = 0
    examples: list[dict[str, Any]] = []
    by_kind: dict[str, int] = {}
    for kind, df in parts:
        n = df.count()
        by_kind[kind] = n
        total += n
        if n and len(examples) < opts.max_examples:
            examples += [{"kind": kind, **r} for r in _rows(df, opts.max_examples - len(examples))]
    st = {"violations_by_kind": by_kind, **(stats or {})}
    return Verdict(vid, INVARIANTS[vid], "fail" if total else "pass", total, examples, notes or [], st)



def _regressions(tb: Tables, obs: DataFrame, include_obs_as_evidence: bool) -> DataFrame:
    """Observations (KEY, oid, t_bound, t_read, value) that went backwards, unexplained.

    The committed value is "established" by an acknowledged commit (completed before t_bound)
    and, optionally, by an earlier observation. An observation below the highest established
    value is explained only by a commit of exactly that value (ok or ambiguous), invoked
    before t_read, that could have taken effect after every higher value was established.
    """
    acks = tb.commits.where(F.col("status") == "ok").select(
        *KEY, F.col("t_res").alias("t"), F.col("offset").alias("value"), F.col("t_inv").alias("s"),
        F.lit(1).alias("rank"), F.lit(None).cast("long").alias("oid"),
        F.concat(F.lit("commit "), F.col("op")).alias("what"))
    rows = obs.select(*KEY, F.col("t_bound").alias("t"), "value", F.col("t_bound").alias("s"),
                      F.lit(0).alias("rank"), "oid", F.lit("observation").alias("what"))
    est = acks.unionByName(rows) if include_obs_as_evidence else acks
    allrows = acks.unionByName(rows)
    w = Window.partitionBy(*KEY).orderBy("t", "rank").rowsBetween(Window.unboundedPreceding, -1)
    if include_obs_as_evidence:
        prev = allrows.withColumn("prev_max", F.max("value").over(w))
    else:
        prev = allrows.withColumn("prev_max", F.max(F.when(F.col("rank") == 1, F.col("value"))).over(w))
    cand_ids = prev.where((F.col("rank") == 0) & (F.col("value") < F.col("prev_max"))).select("oid")
    cand = obs.join(cand_ids, "oid")
    e = est.select(*[F.col(k).alias("e_" + k) for k in KEY], F.col("t").alias("e_t"), F.col("value").alias("e_value"),
                   F.col("s").alias("e_s"), F.col("what").alias("e_what"))
    ev = (cand.join(e, [cand[k] == e["e_" + k] for k in KEY]
                    + [e["e_t"] < cand["t_bound"], e["e_value"] > cand["value"]])
          .groupBy("oid").agg(F.max("e_s").alias("S"),
                              F.max_by(F.struct("e_what", "e_t", "e_value"), "e_value").alias("higher")))
    cand = cand.join(ev, "oid")
    c = tb.commits.where(F.col("status").isin("ok", "unknown")).select(
        *[F.col(k).alias("c_" + k) for k in KEY], F.col("offset").alias("c_offset"), "t_inv", "t_end")
    explained = (cand.join(c, [cand[k] == c["c_" + k] for k in KEY]
                           + [c["c_offset"] == cand["value"], c["t_inv"] < cand["t_read"], c["t_end"] > cand["S"]])
                 .select("oid").distinct())
    return cand.join(explained, "oid", "left_anti").drop("S")


def check_i1(tb: Tables, opts: Options) -> Verdict:
    reads = tb.reads.select(*KEY, "t", "member", "offset")
    if tb.final is not None:
        reads = reads.unionByName(tb.final.select(*KEY, F.lit(tb.t_end + 1).alias("t"),
                                                  F.lit("<offsets log, final>").alias("member"), "offset"))
    obs = (reads.withColumn("oid", F.monotonically_increasing_id())
           .select(*KEY, "oid", F.col("t").alias("t_bound"), F.col("t").alias("t_read"),
                   F.col("offset").alias("value"), "member"))
    bad = _regressions(tb, obs, include_obs_as_evidence=True).select(
        *KEY, F.col("t_read").alias("t"), F.col("member").alias("read_by"), F.col("value").alias("read_offset"),
        F.col("higher.e_what").alias("established_by"), F.col("higher.e_t").alias("established_t"),
        F.col("higher.e_value").alias("established_offset")).orderBy("t")
    parts = [("regression", bad)]
    notes = ["ambiguous (unknown / unanswered) commits may explain a lower value (I3)",
             "a read of -1 after a commit is a lost commit unless a deletion happened (deletion not modelled)"]
    if tb.divergent is not None:
        parts.append(("replicas-diverge", tb.divergent))
    if tb.final is None:
        notes.append("no offsets-node-*.jsonl: final state not checked")
    return _verdict("I1", parts, opts, notes, {"reads": tb.reads.count()})


def check_i2(tb: Tables, opts: Options) -> Verdict:
    # one pass over the polls: each member's first record and furthest offset per generation
    per_gen = (tb.poll_x.groupBy("group", "member", "generation", "topic", "partition")
               .agg(F.min(F.struct("t", "offset")).alias("f"), F.max("offset").alias("mx")).cache())
    first = per_gen.select("group", "member", "generation", "topic", "partition",
                           F.col("f.t").alias("t_poll"), F.col("f.offset").alias("first_offset"))
    a = (tb.assign_x.groupBy("group", "member", "generation", "topic", "partition")
         .agg(F.min("t").alias("t_assign")))
    j = (a.join(first, ["group", "member", "generation", "topic", "partition"])
         .where(F.col("t_poll") >= F.col("t_assign"))
         .withColumn("oid", F.monotonically_increasing_id()).cache())
    # continuation: the member's own position for the partition from an earlier generation
    mine = per_gen.select("group", "member", "topic", "partition", "generation", "mx")
    prev = (j.select("oid", "group", "member", "topic", "partition", F.col("generation").alias("g_now"))
            .join(mine, ["group", "member", "topic", "partition"])
            .where(F.col("generation") < F.col("g_now"))
            .groupBy("oid").agg(F.max_by("mx", "generation").alias("prev_mx")))
    c = tb.commits.where(F.col("status").isin("ok", "unknown")).select(
        *KEY, F.col("offset").alias("first_offset"), "t_inv")
    in_c = (j.join(c, KEY + ["first_offset"]).where(F.col("t_inv") < F.col("t_poll"))
            .select("oid").distinct().withColumn("in_c", F.lit(True)))
    first_ack = (tb.commits.where(F.col("status") == "ok").groupBy(*KEY).agg(F.min("t_res").alias("first_ack")))
    start = (tb.produced.select("topic", "partition", "offset").unionByName(tb.poll_x.select("topic", "partition", "offset"))
             .groupBy("topic", "partition").agg(F.min("offset").alias("start")))
    jj = (j.join(prev, "oid", "left").join(in_c, "oid", "left").join(first_ack, KEY, "left")
          .join(start, ["topic", "partition"], "left"))
    ok_point = (F.coalesce(F.col("in_c"), F.lit(False))
                | (F.col("first_offset") == 0) | (F.col("first_offset") <= F.col("start"))
                | F.col("first_ack").isNull() | (F.col("first_ack") >= F.col("t_poll"))
                | (F.col("first_offset") == F.col("prev_mx") + 1))
    not_committed = jj.where(~ok_point).select(
        "group", "member", "generation", "topic", "partition", "t_assign", "t_poll", "first_offset").orderBy("t_poll")
    obs = j.join(prev, "oid", "left").where(
        F.col("prev_mx").isNull() | (F.col("first_offset") != F.col("prev_mx") + 1)).select(
        *KEY, "oid", F.col("t_assign").alias("t_bound"), F.col("t_poll").alias("t_read"),
        F.col("first_offset").alias("value"), "member", "generation")
    reg = _regressions(tb, obs, include_obs_as_evidence=False).select(
        "group", "member", "generation", "topic", "partition", F.col("t_bound").alias("t_assign"),
        F.col("t_read").alias("t_poll"), F.col("value").alias("first_offset"),
        F.col("higher.e_what").alias("acked_before_assign"), F.col("higher.e_value").alias("acked_offset"),
        F.col("higher.e_t").alias("acked_t")).orderBy("t_poll")
    v = _verdict("I2", [("resume-behind-acked-commit", reg), ("resume-not-a-commit", not_committed)], opts,
                 ["continuation from the member's own earlier position is allowed",
                  "with nothing acknowledged before the first poll any start (reset) is allowed"],
                 {"assignments_with_polls": j.count()})
    j.unpersist()
    per_gen.unpersist()
    return v


def check_i3(tb: Tables, opts: Options) -> Verdict:
    reads = tb.reads.select(*KEY, "t", "member", "offset")
    if tb.final is not None:
        reads = reads.unionByName(tb.final.select(*KEY, F.lit(tb.t_end + 1).alias("t"),
                                                  F.lit("<offsets log, final>").alias("member"), "offset"))
    reads = reads.where(F.col("offset") >= 0).withColumn("rid", F.monotonically_increasing_id())
    c = tb.commits.select(*KEY, "offset", "t_inv", "status")
    agg = (reads.join(c, KEY + ["offset"], "left")
           .where(F.col("t_inv").isNull() | (F.col("t_inv") < F.col("t")))
           .groupBy("rid").agg(F.max(F.col("status").isin("ok", "unknown").cast("int")).alias("possible"),
                               F.max((F.col("status") == "fail").cast("int")).alias("failed")))
    r = reads.join(agg, "rid").where(F.coalesce(F.col("possible"), F.lit(0)) == 0)
    failed = r.where(F.col("failed") == 1).select(*KEY, "t", "member", "offset").orderBy("t")
    phantom = r.where(F.coalesce(F.col("failed"), F.lit(0)) == 0).select(*KEY, "t", "member", "offset").orderBy("t")
    stats = {s: n for s, n in tb.commits.groupBy("status").count().collect()}
    unanswered = tb.commits.where(~F.col("answered")).count()
    return _verdict("I3", [("failed-commit-took-effect", failed), ("read-of-never-committed-offset", phantom)], opts,
                    ["ambiguous commits (unknown or unanswered) are accepted as applied and as not applied by I1/I2"],
                    {"commit_partition_rows_by_status": stats, "unanswered": unanswered})


def check_i4(tb: Tables, opts: Options) -> Verdict:
    universe = tb.assign_x.select("group", "member", "topic", "partition").distinct()
    ev = tb.ev
    base = ["group", "member", "topic", "partition", "t", "seq"]

    def rows(df: DataFrame, kind: str, state: Column | None, agen: Column | None, pos: Column | None,
             value: Column | None, gen: Column | None) -> DataFrame:
        return df.select(*base, F.lit(kind).alias("kind"),
                         (state if state is not None else F.lit(None).cast("boolean")).alias("state"),
                         (agen if agen is not None else F.lit(None).cast("long")).alias("agen"),
                         (pos if pos is not None else F.lit(None).cast("long")).alias("pos"),
                         (value if value is not None else F.lit(None).cast("long")).alias("value"),
                         (gen if gen is not None else F.lit(None).cast("long")).alias("generation"))

    assigns = ev.where(F.col("type") == "assign").select("group", "member", "t", "seq", "generation", "partitions")
    a_rows = rows(assigns.join(universe, ["group", "member"]), "assign",
                  F.array_contains(F.col("partitions"), F.array(F.col("topic"), F.col("partition").cast("string"))),
                  F.col("generation"), None, None, F.col("generation"))
    revokes = (ev.where(F.col("type") == "revoke")
               .select("group", "member", "t", "seq", F.explode("partitions").alias("p"))
               .select("group", "member", "t", "seq", _tp(F.col("p"), 0).alias("topic"),
                       _tp(F.col("p"), 1).cast("long").alias("partition")))
    r_rows = rows(revokes, "revoke", F.lit(False), None, None, None, None)
    gone = ev.where(F.col("type").isin("leave", "crash")).select("group", "member", "t", "seq").join(
        universe, ["group", "member"])
    g_rows = rows(gone, "gone", F.lit(False), None, None, None, None)
    polls = (tb.poll_x.groupBy("group", "member", "topic", "partition", "t", "seq", "generation")
             .agg(F.max("offset").alias("mx")))
    p_rows = rows(polls, "poll", None, None, F.col("mx") + 1, None, F.col("generation"))
    # -1 (nothing committed): the position is the reset point, unknown here
    f_rows = rows(tb.reads, "fetch", None, None, F.when(F.col("offset") >= 0, F.col("offset")), None, None)
    c_rows = rows(tb.commits.withColumn("t", F.col("t_inv")), "commit", None, None, None, F.col("offset"), F.col("generation"))
    allr = a_rows.unionByName(r_rows).unionByName(g_rows).unionByName(p_rows).unionByName(f_rows).unionByName(c_rows)
    w = (Window.partitionBy("group", "member", "topic", "partition").orderBy("t", "seq")
         .rowsBetween(Window.unboundedPreceding, -1))
    s = (allr.withColumn("assigned", F.last("state", ignorenulls=True).over(w))
         .withColumn("assigned_gen", F.last("agen", ignorenulls=True).over(w))
         .withColumn("position", F.max("pos").over(w))
         .where(F.col("kind").isin("poll", "commit")).cache())
    cols = ["group", "member", "topic", "partition", "t", "generation", "assigned_gen"]
    unassigned_commit = s.where((F.col("kind") == "commit") & ~F.coalesce(F.col("assigned"), F.lit(False))).select(
        *cols, F.col("value").alias("commit_offset")).orderBy("t")
    ahead = s.where((F.col("kind") == "commit") & (F.col("value") > F.col("position"))).select(
        *cols, F.col("value").alias("commit_offset"), "position").orderBy("t")
    unassigned_poll = s.where((F.col("kind") == "poll") & ~F.coalesce(F.col("assigned"), F.lit(False))).select(
        *cols, (F.col("pos") - 1).alias("max_offset_in_poll")).orderBy("t")
    v = _verdict("I4", [("commit-ahead-of-position", ahead), ("commit-for-unassigned-partition", unassigned_commit),
                        ("records-for-unassigned-partition", unassigned_poll)], opts,
                 ["position = highest (polled offset + 1) or fetched committed offset of the member before the commit; "
                  "a commit with no earlier poll or fetch is not position-checked"])
    s.unpersist()
    return v


def consumer_protocol_groups(tb: Tables) -> list[str]:
    """Groups with a member of the consumer protocol (KIP-848): member epochs, not generations."""
    rows = (tb.ev.where((F.col("type") == "assign") & (F.col("protocol") == "consumer"))
            .select("group").distinct().collect())
    return sorted(r["group"] for r in rows)


def check_i5(tb: Tables, opts: Options) -> Verdict:
    from chaos.check.ownership import overlaps

    owners = (tb.assign_x.groupBy("group", "generation", "topic", "partition")
              .agg(F.countDistinct("member").alias("owners"), F.array_sort(F.collect_set("member")).alias("members"),
                   F.min("t").alias("t"))
              .where(F.col("owners") > 1).orderBy("t"))
    gens = tb.ev.where(F.col("type") == "assign").select("group", "t", "seq", F.col("generation").alias("g"),
                                                         F.lit(None).cast("string").alias("op"),
                                                         F.lit(None).cast("long").alias("cgen"))
    oks = (tb.commits.where((F.col("status") == "ok") & (F.col("generation") >= 0))
           .select("group", F.col("t_inv").alias("t"), "seq", F.lit(None).cast("long").alias("g"), "op",
                   F.col("generation").alias("cgen")).distinct())
    w = Window.partitionBy("group").orderBy("t", "seq").rowsBetween(Window.unboundedPreceding, -1)
    # under KIP-848 members reach a new epoch one by one and a commit at an older epoch is valid
    # for what the member still holds (KIP-1251): no group-wide generation to be stale against
    modern = consumer_protocol_groups(tb)
    stale = (gens.unionByName(oks).withColumn("group_gen", F.max("g").over(w))
             .where(F.col("op").isNotNull() & (F.col("cgen") < F.col("group_gen")) & ~F.col("group").isin(modern))
             .select("group", "op", F.col("t").alias("t_invoke"), F.col("cgen").alias("commit_generation"),
                     "group_gen").orderBy("t_invoke"))
    at_once, zombie = overlaps(tb.ev, tb.t_end)
    zombies = zombie.agg(F.count("*").alias("n"), F.max("overlap_s").alias("longest")).first()
    st = {"zombie_overlaps": int(zombies["n"] or 0) if zombies else 0,
          "zombie_longest_s": round(float(zombies["longest"]), 3) if zombies and zombies["longest"] else None}
    return _verdict("I5", [("two-owners-in-one-generation", owners), ("two-owners-at-one-moment", at_once),
                           ("stale-generation-commit-acknowledged", stale)],
                    opts, ["generations compared per group (classic protocol); under KIP-848 epochs are per member, "
                           "so stale commits are judged for classic groups only"
                           + (f" (consumer-protocol groups: {', '.join(modern)})" if modern else ""),
                           "ownership spans on the run clock: assign -> revoke/leave/crash (chaos/check/ownership.py); "
                           "a member expired while unreachable that reports the loss late is a zombie: counted in "
                           "stats, not failed (Kafka's classic protocol has the same window; its commits are fenced)"],
                    st)


def session_breaking(tb: Tables, opts: Options) -> dict[str, list[tuple[float, float]]]:
    """Per group, intervals ``[start, end + grace]`` of kill_all windows, and of windows that cut
    clients off a node, that may have ended the group's client sessions.

    Every commit goes to the group coordinator, so the longest gap between the group's
    acknowledged commits, from the last before a window to the first after it, is how long its
    members could not reach the coordinator (the window itself ends when the processes are up, before elections and
    loads). Once that gap reaches the session timeout less a heartbeat interval, a client may
    give its partitions up itself, as it would against Kafka: the rebalances and revocations
    that follow are the expected cost of a total outage, not a failover's, so I6 and I7 do not
    judge them. Cutting the clients off a node (``partition``) is the same for the groups it
    coordinates when the commit gap says so, or when the cut lasted half the session timeout
    and the group could not commit for most of it:
    a client's own session clock started at its last heartbeat before the cut (kafka-python
    heartbeats every 3 s) and it reconnects with a back-off after it, so such a cut can end the
    session of a member whose group still committed through a faster one.
    """
    windows = [w for w in tb.faults if w["type"] in (*TOTAL_OUTAGES, "partition")]
    if not windows:
        return {}
    oks: dict[str, list[float]] = {}
    for r in (tb.commits.where(F.col("status") == "ok").select("group", "t_res").distinct()
              .orderBy("t_res").collect()):
        oks.setdefault(r["group"], []).append(r["t_res"])
    need = opts.session_timeout - opts.heartbeat_interval
    out: dict[str, list[tuple[float, float]]] = {}
    for group, times in oks.items():
        for w in windows:
            i = bisect.bisect_right(times, w["start"])
            j = bisect.bisect_left(times, w["end"])
            if i == 0:
                continue  # no commit before it: nothing to lose
            # the longest stretch without an acknowledged commit from the last one before the
            # window to the first one after it (a cut group may still commit inside the window
            # if its coordinator was elsewhere; nothing commits inside a kill_all)
            span = [*times[i - 1:j], times[j] if j < len(times) else tb.t_end]
            gap = max(b - a for a, b in zip(span, span[1:], strict=False))
            # a cut of at least half the session timeout that kept this group from committing
            # (its coordinator's node was the one cut off) for most of it
            long_cut = (w["type"] == "partition" and w["end"] - w["start"] >= opts.session_timeout / 2
                        and gap >= 0.8 * (w["end"] - w["start"]))
            if gap >= need or long_cut:
                out.setdefault(group, []).append((w["start"], w["end"] + opts.fault_grace))
    return out


def coordinator_loads(tb: Tables, opts: Options, group: str) -> list[float]:
    """When a new leader of the group's ``__consumer_offsets`` partition loaded it: the elections
    the node logs name, and the transfers of the fault log."""
    part = offsets_partition(group, opts)
    moves = [w["start"] for w in tb.faults if w["type"] == "leader_transfer" and touches(w, group, opts)]
    return sorted([*tb.leaderships.get(part, []), *moves])


def session_end(start: float, loads: list[float], expiry: float) -> float:
    """The latest a member whose session timer started at ``start`` (and that sent nothing since)
    is expired, plus the grace (``expiry``): a coordinator that loads its group meanwhile restarts
    every member's timer (Kafka's does too), so each load before then moves it."""
    end = start + expiry
    for t in loads:
        if start < t <= end:
            end = t + expiry
    return end


def _generations(tb: Tables) -> list[dict[str, Any]]:
    g = (tb.ev.where(F.col("type") == "assign").groupBy("group", "generation")
         .agg(F.min("t").alias("t"), F.array_sort(F.collect_set("member")).alias("members"),
              F.sum(F.size("partitions")).alias("assigned"))
         .orderBy("group", "generation"))
    return [r.asDict(recursive=True) for r in g.collect()]


def check_i6(tb: Tables, opts: Options, gens: list[dict[str, Any]]) -> Verdict:
    churn = (tb.ev.where(F.col("type").isin("leave", "crash")).select("group", "t", "member", "type")
             .orderBy("t").collect())
    churn_by_group: dict[str, list[float]] = {}
    for r in churn:
        churn_by_group.setdefault(r["group"], []).append(r["t"])
    crashes: dict[str, list[float]] = {}
    for r in churn:
        if r["type"] == "crash":
            crashes.setdefault(r["group"], []).append(r["t"])
    revokes: dict[str, list[float]] = {}
    for r in (tb.ev.where((F.col("type") == "revoke") & (F.size("partitions") > 0)).select("group", "t")
              .orderBy("t").collect()):
        revokes.setdefault(r["group"], []).append(r["t"])
    outages = session_breaking(tb, opts)
    expiry = opts.session_timeout + opts.fault_grace
    bad: list[dict[str, Any]] = []
    quiet_elsewhere = excused_outage = 0
    modern = consumer_protocol_groups(tb)
    prev: dict[str, dict[str, Any]] = {}
    for g in gens:
        if g["group"] in modern:
            continue  # judged by its revocations below
        p = prev.get(g["group"])
        prev[g["group"]] = g
        if p is None or g["members"] != p["members"]:
            continue
        if any(p["t"] < tc <= g["t"] for tc in churn_by_group.get(g["group"], [])):
            continue
        # A member that crashed just before (or while) generation p formed may have joined it
        # without ever recording an assignment; its session expiry then starts this generation,
        # later by every coordinator move in between (the load restarts the timer).
        loads = coordinator_loads(tb, opts, g["group"])
        if any(p["t"] - expiry <= tc <= g["t"] <= session_end(max(tc, p["t"]), loads, expiry)
               for tc in crashes.get(g["group"], [])):
            continue
        if p.get("assigned") == 0:
            # The leader assigned nothing (a freshly started client leader without the topic's
            # metadata yet: "No partition metadata"): it rejoins once the metadata arrives.
            continue
        # The rebalance began when the first member gave its partitions up; what came later (say a
        # coordinator move that made it start over) did not cause it.
        began = next((t for t in revokes.get(g["group"], []) if p["t"] < t <= g["t"]), g["t"])
        if any(a <= began <= b for a, b in outages.get(g["group"], [])):
            excused_outage += 1
            continue
        hit = [w for w in tb.faults
               if touches(w, g["group"], opts) and w["start"] <= began <= w["end"] + opts.fault_grace]
        if not hit:
            quiet_elsewhere += 1
            continue
        bad.append({"group": g["group"], "generation": g["generation"], "previous_generation": p["generation"],
                    "t": g["t"], "rebalance_began": began, "members": g["members"],
                    "fault": {k: hit[0][k] for k in ("id", "type", "node", "start", "end")}})
    if modern:
        mbad, mquiet, mexcused = _i6_consumer_protocol(tb, opts, modern, outages)
        bad += mbad
        quiet_elsewhere += mquiet
        excused_outage += mexcused
    notes = ["a rebalance is dated by its first revocation (else by its new generation)",
             f"a fault window counts until {opts.fault_grace:g} s after it ends",
             f"a crashed member's session expiry is churn until {expiry:g} s after the crash or the next generation, "
             "or after the last coordinator load before then (a load restarts session timers)",
             "a leader_transfer (a move the nodes made) concerns only the groups of the partition it moved",
             "a generation that assigned no partition at all is completed by the next one (client leader)",
             "not judged: rebalances after a kill_all that kept a group from its coordinator for "
             f">= {opts.session_timeout - opts.heartbeat_interval:g} s (last commit before to first after)"]
    if modern:
        notes.append(f"consumer-protocol groups ({', '.join(modern)}): a revocation in a fault window is a "
                     f"violation unless a member crashed up to {expiry:g} s, or left or joined up to "
                     f"{opts.fault_grace:g} s, before it")
    if not tb.faults:
        notes.append("no faults.jsonl / no fault windows")
    st = {"generations": len(gens), "same_membership_rebalances_outside_faults": quiet_elsewhere,
          "excused_total_outage": excused_outage}
    return Verdict("I6", INVARIANTS["I6"], "fail" if bad else "pass", len(bad), bad[: opts.max_examples], notes, st)


LEAVING_S = 5.0  # a revocation this long before the member's own leave is part of leaving


def _i6_consumer_protocol(tb: Tables, opts: Options, groups: list[str],
                          outages: dict[str, list[tuple[float, float]]]) -> tuple[list[dict[str, Any]], int, int]:
    """I6 for KIP-848 groups: members move one partition at a time and keep their epochs across a
    coordinator failover, so no generation marks a rebalance; a revocation does. One is explained
    by membership: a member crashing (its session expiring) up to the session timeout plus grace
    before it, a member leaving or joining up to the grace before it, or the member's own leave
    right after it."""
    expiry = opts.session_timeout + opts.fault_grace
    joins = (tb.ev.where(F.col("type") == "assign").groupBy("group", "member").agg(F.min("t").alias("t"))
             .where(F.col("group").isin(groups)).collect())
    churn = (tb.ev.where(F.col("type").isin("leave", "crash") & F.col("group").isin(groups))
             .select("group", "member", "t", "type").collect())
    windows: dict[str, list[tuple[float, float]]] = {g: [] for g in groups}
    gone: dict[tuple[str, str], list[float]] = {}
    loads = {g: coordinator_loads(tb, opts, g) for g in groups}
    for r in churn:
        end = session_end(r["t"], loads[r["group"]], expiry) if r["type"] == "crash" else r["t"] + opts.fault_grace
        windows[r["group"]].append((r["t"], end))
        gone.setdefault((r["group"], r["member"]), []).append(r["t"])
    for r in joins:
        windows[r["group"]].append((r["t"], r["t"] + opts.fault_grace))
    revokes = (tb.ev.where((F.col("type") == "revoke") & (F.size("partitions") > 0) & F.col("group").isin(groups)
                           & ~F.coalesce(F.col("lost"), F.lit(False)))
               .select("group", "t", "member").orderBy("t").collect())
    bad: list[dict[str, Any]] = []
    quiet = excused = 0
    for r in revokes:
        if any(a <= r["t"] <= b for a, b in windows[r["group"]]):
            continue
        if any(r["t"] <= tl <= r["t"] + LEAVING_S for tl in gone.get((r["group"], r["member"]), [])):
            continue  # the member gave its partitions up to leave
        if any(a <= r["t"] <= b for a, b in outages.get(r["group"], [])):
            excused += 1
            continue
        hit = [w for w in tb.faults if touches(w, r["group"], opts) and w["start"] <= r["t"] <= w["end"] + opts.fault_grace]
        if not hit:
            quiet += 1
            continue
        bad.append({"group": r["group"], "t": r["t"], "member": r["member"], "revocation_without_churn": True,
                    "fault": {k: hit[0][k] for k in ("id", "type", "node", "start", "end")}})
    return bad, quiet, excused


def _churn_windows(tb: Tables, opts: Options) -> DataFrame:
    """When another member's coming or going may still move partitions, as Kafka moves them too:
    a leave until a session timeout after it (the rebalance it starts), a crash until its session
    has expired (later by every coordinator load meanwhile, which restarts the timer), a new member
    from its first event until a session timeout after its first assignment (its join)."""
    ev = tb.ev
    expiry = opts.session_timeout + opts.fault_grace
    rows: list[tuple[str, str, str | None, float, float]] = []
    loads: dict[str, list[float]] = {}
    for r in ev.where(F.col("type").isin("leave", "crash")).select("group", "member", "instance", "t", "type").collect():
        if r["type"] == "leave":
            end = r["t"] + opts.session_timeout
        else:
            if r["group"] not in loads:
                loads[r["group"]] = coordinator_loads(tb, opts, r["group"])
            end = session_end(r["t"], loads[r["group"]], expiry)
        rows.append((r["group"], r["member"], r["instance"], r["t"], end))
    firsts = (ev.where(F.col("type").isin("assign", "revoke"))
              .groupBy("group", "member").agg(F.first("instance", ignorenulls=True).alias("instance"),
                                             F.min("t").alias("t0"),
                                             F.min(F.when(F.col("type") == "assign", F.col("t"))).alias("t1")))
    for r in firsts.collect():
        rows.append((r["group"], r["member"], r["instance"], r["t0"],
                     (r["t1"] if r["t1"] is not None else r["t0"]) + opts.session_timeout))
    return ev.sparkSession.createDataFrame(
        rows, "o_group string, o_member string, o_instance string, o_start double, o_end double")


def check_i7(tb: Tables, opts: Options) -> Verdict:
    ev = tb.ev
    static = (ev.where(F.col("instance").isNotNull()).select("group", "member", "instance").distinct())
    if static.limit(1).count() == 0:
        return Verdict("I7", INVARIANTS["I7"], "skipped", notes=["no static members (no `instance` field) in history"])
    bounces = (ev.where(F.col("type").isin("leave", "crash")).select("group", "member", F.col("t").alias("t_b"))
               .join(static, ["group", "member"])
               .withColumn("t_prev", F.lag("t_b").over(Window.partitionBy("group", "member").orderBy("t_b"))))
    # A static member that held nothing when it went (never assigned, or its last assign/revoke
    # was a lost revoke: expired or fenced; or nothing assigned since it last went, so this
    # incarnation never held anything) comes back as a join, and a join rebalances in Kafka
    # too: not a bounce to judge. (A clean close revokes too, but not as lost.)
    lost = (F.col("type") == "revoke") & F.coalesce(F.col("lost"), F.lit(False))
    held = (ev.where(F.col("type").isin("assign", "revoke"))
            .select("group", "member", F.col("t").alias("t_h"), lost.alias("h_lost"), "seq")
            .join(bounces.select("group", "member", "t_b", "t_prev"), ["group", "member"])
            .where((F.col("t_h") <= F.col("t_b")) & (F.col("t_prev").isNull() | (F.col("t_h") > F.col("t_prev"))))
            .groupBy("group", "member", "t_b").agg(F.max_by("h_lost", F.struct("t_h", "seq")).alias("last_lost"))
            .where(~F.col("last_lost")).drop("last_lost"))
    empty_handed = bounces.count()
    bounces = bounces.join(held, ["group", "member", "t_b"], "left_semi")
    empty_handed -= bounces.count()
    rejoin = (ev.where((F.col("type") == "assign") & F.col("instance").isNotNull())
              .select("group", F.col("instance").alias("r_instance"), F.col("t").alias("t_r")))
    b = (bounces.join(rejoin, (bounces["group"] == rejoin["group"]) & (bounces["instance"] == rejoin["r_instance"])
                      & (rejoin["t_r"] > bounces["t_b"]), "left").drop(rejoin["group"])
         .groupBy("group", "member", "instance", "t_b").agg(F.min("t_r").alias("t_r")))
    # A static member away longer than its session timeout is expired by the coordinator and its
    # partitions move, as in Kafka: only a member back (assigned again) within it is a bounce.
    returned = b.count()
    b = (b.where(F.col("t_r") <= F.col("t_b") + opts.session_timeout)
         .withColumn("w_end", F.col("t_r") + opts.fault_grace)
         .withColumn("bid", F.monotonically_increasing_id()))
    returned -= b.count()
    churn = _churn_windows(tb, opts)
    noisy = (b.join(churn, (b["group"] == F.col("o_group")) & (b["member"] != F.col("o_member"))
                    & (F.coalesce(F.col("o_instance"), F.lit("")) != b["instance"])
                    & (F.col("o_start") <= b["w_end"]) & (F.col("o_end") >= b["t_b"])).select("bid").distinct())
    outages = [(g, a, z) for g, spans in session_breaking(tb, opts).items() for a, z in spans]
    # Any kill_all near a bounce: the restarted coordinator replays only what was stored, so a
    # member whose join completed but whose generation was not yet written comes back unknown
    # and rejoins, revoking the others for a reason that is not the bounce.
    groups = [r["group"] for r in b.select("group").distinct().collect()]
    outages += [(g, w["start"], w["end"] + opts.fault_grace) for w in tb.faults if w["type"] in TOTAL_OUTAGES
                for g in groups]
    if outages:
        out_df = ev.sparkSession.createDataFrame(outages, "o_group string, o_start double, o_end double")
        noisy = noisy.union(b.join(out_df, (b["group"] == F.col("o_group")) & (F.col("o_start") <= b["w_end"])
                                   & (F.col("o_end") >= b["t_b"])).select("bid")).distinct()
    amid_churn = noisy.count()
    rev = (ev.where((F.col("type") == "revoke") & (F.size("partitions") > 0))
           .select(F.col("group").alias("v_group"), F.col("member").alias("revoked_member"),
                   F.col("t").alias("t_revoke"), "partitions", F.col("instance").alias("v_instance")))
    bad = (b.join(noisy, "bid", "left_anti")
           .join(rev, (b["group"] == F.col("v_group")) & (b["member"] != F.col("revoked_member"))
                 & (F.coalesce(F.col("v_instance"), F.lit("")) != b["instance"])
                 & (F.col("t_revoke") >= b["t_b"]) & (F.col("t_revoke") <= b["w_end"]))
           .select("group", F.col("instance").alias("bounced_instance"), F.col("member").alias("bounced_member"),
                   "t_b", "t_r", "revoked_member", "t_revoke", "partitions").orderBy("t_b"))
    return _verdict("I7", [("revocation-on-static-bounce", bad)], opts,
                    [f"bounces overlapping another member's churn are not judged: a leave until {opts.session_timeout:g} s "
                     "after it, a crash until its session expired, a new member until "
                     f"{opts.session_timeout:g} s after its first assignment",
                     f"bounces within {opts.fault_grace:g} s of a kill_all are not judged (unstored generations are lost)",
                     "a static member that held nothing when it went (never assigned, or lost) is not judged",
                     f"a static member not back within the {opts.session_timeout:g} s session timeout is expired "
                     "(its partitions move, as in Kafka): not judged",
                    "conflicting group.instance.id fencing (exactly one survivor) is not checked"],
                    {"static_bounces": b.count(), "bounces_amid_churn_or_outage": amid_churn,
                     "bounces_holding_nothing": empty_handed,
                     "bounces_past_session_timeout": returned})


def check_i8(tb: Tables, opts: Options) -> Verdict:
    # An acknowledgement without an offset (librdkafka's answer to DUPLICATE_SEQUENCE_NUMBER: written
    # before, place unknown) places nothing: it is no second copy of the record.
    prod = tb.produced.where(F.col("offset").isNotNull()).select("topic", "partition", "offset", "value")
    seen = tb.poll_x.select("topic", "partition", "offset", "value")
    placed = prod.unionByName(seen).distinct().cache()
    dup = (placed.groupBy("value").agg(F.count("*").alias("n"),
                                       F.array_sort(F.collect_list(F.struct("topic", "partition", "offset")))
                                       .alias("at")).where(F.col("n") > 1).drop("n"))
    incons = (placed.groupBy("topic", "partition", "offset")
              .agg(F.count("*").alias("n"), F.array_sort(F.collect_list("value")).alias("values"))
              .where(F.col("n") > 1).drop("n"))
    failed = tb.ev.where(F.col("type") == "produce.fail").select("value", F.col("error").alias("produce_error"))
    g1a = (tb.poll_x.join(failed, "value").groupBy("group", "value", "produce_error")
           .agg(F.min("t").alias("t"), F.first(F.struct("topic", "partition", "offset")).alias("at")).orderBy("t"))
    rng = tb.poll_x.groupBy("group", "topic", "partition").agg(F.min("offset").alias("lo"), F.max("offset").alias("hw"))
    p = tb.produced.select("topic", "partition", "offset", "value", F.col("t").alias("t_ack"))
    expected = p.join(rng, ["topic", "partition"])
    got = tb.poll_x.select("group", "topic", "partition", "offset", "value").distinct()
    lost = (expected.where((F.col("offset") >= F.col("lo")) & (F.col("offset") <= F.col("hw")))
            .join(got, ["group", "topic", "partition", "offset", "value"], "left_anti")
            .select("group", "topic", "partition", "offset", "value", "t_ack", F.col("hw").alias("group_polled_up_to"))
            .orderBy("t_ack"))
    unseen = expected.where(F.col("offset") > F.col("hw")).groupBy("group", "topic").count()
    unseen_rows = {f"{r['group']}/{r['topic']}": r["count"] for r in unseen.collect()}
    v = _verdict("I8", [("lost-write", lost), ("duplicate", dup), ("inconsistent-offsets", incons), ("G1a", g1a)], opts,
                 ["lost-write: an acked produce inside a group's polled range [first, highest] of a partition that "
                  "the group never polled", "unseen (acked, beyond the group's highest poll) is reported, not failed"],
                 {"produce_ok": tb.produced.count(), "polled_records": tb.poll_x.count(), "unseen_by_group_topic": unseen_rows})
    placed.unpersist()
    return v


def check_i9(spark: SparkSession, tb: Tables, opts: Options) -> tuple[Verdict, list[dict[str, Any]]]:
    """Progress (an acked commit per active group, an acked produce) within the bound after each window."""
    if not tb.faults:
        return Verdict("I9", INVARIANTS["I9"], "skipped", notes=["no fault windows"]), []
    wins = spark.createDataFrame([(w["id"], float(w["start"]), float(w["end"])) for w in tb.faults],
                                 "wid long, w_start double, w_end double")
    ok = tb.commits.where(F.col("status") == "ok").select("group", "op", "t_inv", "t_res").distinct()
    prod = tb.produced.select(F.lit("<producers>").alias("group"), F.lit(None).cast("string").alias("op"),
                              F.col("t").alias("t_inv"), F.col("t").alias("t_res"))
    prog = ok.unionByName(prod)
    active = prog.groupBy("group").agg(F.min("t_res").alias("first_t"))
    bw = F.broadcast(wins)
    after = (prog.join(bw, (F.col("t_res") >= F.col("w_start")))
             .groupBy("wid", "group")
             .agg(F.min(F.when(F.col("t_res") >= F.col("w_end"), F.col("t_res"))).alias("first_after_end"),
                  F.min(F.when(F.col("t_inv") >= F.col("w_start"), F.col("t_res"))).alias("first_after_start")))
    table = (active.crossJoin(bw).where(F.col("first_t") < F.col("w_start"))
             .join(after, ["wid", "group"], "left").collect())
    bad: list[dict[str, Any]] = []
    durations: list[dict[str, Any]] = []
    inconclusive = passed = 0
    byw: dict[int, list[Any]] = {}
    for r in table:
        byw.setdefault(r["wid"], []).append(r)
    for w in tb.faults:
        rows = byw.get(w["id"], [])
        if w["type"] == "leader_transfer":  # the nodes' own move of one partition: its groups only
            rows = [r for r in rows if r["group"] != "<producers>" and touches(w, r["group"], opts)]
        fo = [r["first_after_start"] - w["start"] for r in rows
              if r["group"] != "<producers>" and r["first_after_start"] is not None]
        durations.append({"id": w["id"], "type": w["type"], "node": w["node"], "start": w["start"],
                          "window": w["end"] - w["start"], "failover": max(fo) if fo else None})
        deadline = _fault_free_deadline(w, tb.faults, opts.liveness_bound)
        for r in rows:
            delay = None if r["first_after_end"] is None else r["first_after_end"] - w["end"]
            if delay is not None and r["first_after_end"] <= deadline:
                passed += 1
                continue
            if w["open"] or deadline > tb.t_end:
                inconclusive += 1
                continue
            bad.append({"fault": {k: w[k] for k in ("id", "type", "node", "start", "end")}, "group": r["group"],
                        "progress_after_end_s": delay, "bound_s": opts.liveness_bound,
                        "deadline_after_end_s": round(deadline - w["end"], 3)})
    status = "fail" if bad else ("inconclusive" if inconclusive and not passed else "pass")
    notes = [f"bound {opts.liveness_bound:g} s of fault-free time after each window ends (time inside later "
             "windows does not count); groups active before the window start",
             "progress during a fault (redpanda's progress_during_fault) is not checked"]
    st = {"windows": len(tb.faults), "window_group_pairs_ok": passed, "inconclusive_pairs": inconclusive}
    return Verdict("I9", INVARIANTS["I9"], status, len(bad), bad[: opts.max_examples], notes, st), durations


def _fault_free_deadline(w: dict[str, Any], faults: list[dict[str, Any]], bound: float) -> float:
    """When ``bound`` seconds without any fault have passed since ``w`` ended: a later fault
    that starts before the group recovered holds recovery back for as long as it lasts."""
    later = sorted((f["start"], f["end"]) for f in faults if f["id"] != w["id"] and f["end"] > w["end"])
    t, left = w["end"], bound
    for start, end in later:
        start = max(start, t)
        if start >= t + left:
            break
        left -= start - t
        t = max(t, end)
    return float(t + left)


