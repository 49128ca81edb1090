"""``kcoord bench SCENARIO``: run a workload against kcoord and, with a peer, the same workload
against the peer broker in the same run; print a rich table with ratios and one JSON line.

    kcoord bench commit --start-kcoord --peer tansu
    kcoord bench commit --start-kcoord --peer kafka
    kcoord bench rebalance --bootstrap 127.0.0.1:9092 --peer 127.0.0.1:19092 --members 50 --partitions 60
    kcoord bench e2e --start-kcoord --start-peer --profile /tmp/kcoord-e2e.svg
    kcoord bench txn --bootstrap 127.0.0.1:9092 --peer kafka

``--start-kcoord`` starts a single kcoord node (initial rebalance delay 0) when no
``--bootstrap`` is given. ``--peer tansu`` (or ``--start-peer``) starts tansu with memory
storage on a free port; ``--peer kafka`` starts Apache Kafka, 3 KRaft brokers with the offsets
topic replicated 3 times (Java 17 and Maven needed; the jars are cached outside the repository).
Everything started is stopped afterwards. Ratios are kcoord / peer for every figure.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from bench import cluster3, commit, compaction, e2e, heartbeat, join, kafka_peer, rebalance, share, txn
from bench.brokers import BenchError, Profiler, Started, start_kcoord, start_tansu
from bench.report import Reporter, ratios_of

COMMAND = "bench"
STARTABLE_PEERS = ("tansu", "kafka")
SCENARIOS: dict[str, Any] = {
    "commit": commit,
    "rebalance": rebalance,
    "e2e": e2e,
    "failover": cluster3.Failover,
    "load": cluster3.Load,
    "idle": cluster3.Idle,
    "heartbeat": heartbeat.Heartbeat,
    "txn": txn,
    "join": join.Join,
    "compaction": compaction.Compaction,
    "share": share,
}
HELP = {
    "commit": "K clients commit offsets: sync (1 and 10 offsets) and async (window 16); no commit lost",
    "rebalance": "N members: time to a complete assignment on subscribe, on a join and on a leave",
    "e2e": "produce -> group consume: latency p50/p99 at a fixed rate, then throughput",
    "failover": "SIGKILL a group's coordinator on a 3-node cluster: time to the next acked commit (--start-cluster)",
    "load": "G groups in one offsets partition, SIGKILL its leader: new leader's load time (--start-cluster)",
    "idle": "CPU of an idle 3-node cluster, 2 topics x 6 partitions (--start-cluster)",
    "heartbeat": "M members in G groups heartbeat every I s (raw protocol load generator): latency, achieved rate",
    "txn": "one transactional producer commits every --batch records: transactions/s, commit latency, read back",
    "join": "a node joins a 3-node cluster holding --data-mb of records and --offsets offsets: time to vote everywhere",
    "compaction": "3 nodes compact --data-mb of updates: MB/s, and commit/produce latency meanwhile vs before (--start-cluster)",
    "share": "C Java share consumers drain M records (KIP-932): records acknowledged/s, time to the first record",
}


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(COMMAND, help="benchmarks with real clients, side by side with a peer broker",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("targets")
    g.add_argument("--bootstrap", "-b", help="kcoord bootstrap address host:port")
    g.add_argument("--start-kcoord", action="store_true",
                   help="start a single kcoord node on a free port when no --bootstrap is given")
    g.add_argument("--kcoord-set", action="append", default=[], metavar="NAME=VALUE",
                   help="extra --set for the node started by --start-kcoord (repeatable)")
    g.add_argument("--peer", help="run the same workload on a peer: 'tansu' or 'kafka' to start one, "
                                  "or the bootstrap host:port of a running broker")
    g.add_argument("--start-peer", action="store_true", help="start tansu (memory storage): --peer tansu")
    g.add_argument("--kafka-version", default=kafka_peer.KAFKA_VERSION,
                   help=f"Apache Kafka version for --peer kafka (default {kafka_peer.KAFKA_VERSION})")
    g.add_argument("--peer-name", default=None, help="label of the peer in the table (default tansu/kafka/peer)")
    g.add_argument("--peer-first", action="store_true", help="run the peer before kcoord")
    g.add_argument("--profile", metavar="FILE",
                   help="py-spy record the kcoord node during the kcoord run (.svg flamegraph, "
                        ".json speedscope, anything else raw collapsed stacks)")
    g.add_argument("--profile-pid", type=int, help="pid to profile (default: the node --start-kcoord started)")
    g.add_argument("--quiet", "-q", action="store_true", help="no progress display")
    sub = p.add_subparsers(dest="scenario", required=True, metavar="SCENARIO")
    for name, mod in SCENARIOS.items():
        sp = sub.add_parser(name, parents=[common], help=HELP[name], description=HELP[name])
        mod.add_arguments(sp)


def run(args: Any) -> int:
    rep = Reporter(quiet=args.quiet)
    try:
        return _run(args, rep)
    except BenchError as e:
        print(f"kcoord bench {args.scenario}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _run_cluster(scen: Any, args: Any, rep: Reporter) -> int:
    """A scenario on a 3-node cluster the bench starts (and kills nodes of) itself."""
    t0 = time.monotonic()
    errors: dict[str, str] = {}
    try:
        result = scen.run_cluster(args, rep)
    except BenchError as e:
        errors["kcoord"] = str(e)
        result = {}
        rep.err.print(f"[red]kcoord: {e}[/red]")
    ok = not errors and scen.ok(result)
    metrics = scen.metrics(args)
    rep.table(f"kcoord bench {args.scenario}  " + " ".join(f"{k}={v}" for k, v in scen.params(args).items()),
              metrics, {"kcoord": result}, {}, "kcoord", None)
    for k, v in errors.items():
        rep.out.print(f"[red]error {k}: {v}[/red]")
    rep.json_line({"scenario": args.scenario, "ok": ok, "params": scen.params(args),
                   "targets": {"kcoord": "started 3-node cluster"}, "results": {"kcoord": result}, "ratios": {},
                   "ratio_of": None, "seconds": {"kcoord": round(time.monotonic() - t0, 1)}, "errors": errors})
    return 0 if ok else 1


def _run(args: Any, rep: Reporter) -> int:
    scen = SCENARIOS[args.scenario]
    if getattr(args, "start_cluster", False):
        return _run_cluster(scen, args, rep)
    if args.bootstrap and args.start_kcoord:
        raise BenchError("give either --bootstrap or --start-kcoord")
    if args.peer and args.start_peer:
        raise BenchError("give either --peer or --start-peer")
    start_peer = "tansu" if args.start_peer else args.peer if args.peer in STARTABLE_PEERS else None
    if not args.bootstrap and not args.start_kcoord:
        raise BenchError("need --bootstrap ADDR (a running kcoord) or --start-kcoord")
    if hasattr(scen, "precheck") and args.bootstrap:
        scen.precheck(args.bootstrap, args)
    started: list[Started] = []
    try:
        subject_addr = args.bootstrap
        if args.start_kcoord:
            node = start_kcoord(args.kcoord_set)
            started.append(node)
            subject_addr = node.bootstrap
            rep.note(f"started kcoord node pid={node.pid} on {node.bootstrap} (log {node.log_path})")
            if hasattr(scen, "precheck"):
                scen.precheck(subject_addr, args)
        peer_addr = None if start_peer else args.peer
        peer_name = args.peer_name or start_peer or "peer"
        if start_peer == "tansu":
            t = start_tansu()
            started.append(t)
            peer_addr = t.bootstrap
            rep.note(f"started tansu pid={t.pid} on {t.bootstrap} (log {t.log_path})")
        elif start_peer == "kafka":
            rep.note(f"starting Apache Kafka {args.kafka_version}: 3 KRaft brokers")
            brokers = kafka_peer.start_kafka(version=args.kafka_version)
            started.extend(brokers)
            peer_addr = brokers[0].bootstrap
            rep.note(f"started kafka pids={[b.pid for b in brokers]} on {peer_addr} "
                     f"(logs in {brokers[0].log_path.parent})")
        subject = "kcoord"
        if peer_addr is not None and peer_name == subject:
            peer_name = "peer"
        targets = [(subject, subject_addr)]
        if peer_addr is not None:
            targets.append((peer_name, peer_addr))
            if args.peer_first:
                targets.reverse()
        results: dict[str, dict[str, Any]] = {}
        errors: dict[str, str] = {}
        timings: dict[str, float] = {}
        for name, addr in targets:
            prof = None
            if name == subject and args.profile:
                pid = args.profile_pid or next((s.pid for s in started if s.name == "kcoord"), None)
                if pid is None:
                    raise BenchError("--profile needs --start-kcoord or --profile-pid")
                prof = Profiler(pid, args.profile)
            t0 = time.monotonic()
            try:
                results[name] = scen.run_one(name, addr, args, rep)
            except BenchError as e:
                errors[name] = str(e)
                results[name] = {}
                rep.err.print(f"[red]{name}: {e}[/red]")
            finally:
                timings[name] = round(time.monotonic() - t0, 1)
                if prof is not None:
                    msg = prof.stop()
                    rep.note(f"py-spy profile of pid written to {args.profile} {msg.strip()[-200:]}")
        for s in started:
            if not s.alive():
                errors[s.name + "_process"] = f"{s.name} exited during the run: {s.log_tail(20)}"
        # put the subject first in the table
        results = {k: results[k] for k in [subject] + [n for n in results if n != subject] if k in results}
        metrics = scen.metrics(args)
        peer = peer_name if peer_addr is not None else None
        ratios = ratios_of(metrics, results, subject, peer)
        ok = not errors and all(scen.ok(r) for r in results.values())
        rep.table(f"kcoord bench {args.scenario}  " + " ".join(f"{k}={v}" for k, v in scen.params(args).items()),
                  metrics, results, ratios, subject, peer)
        if errors:
            for k, v in errors.items():
                rep.out.print(f"[red]error {k}: {v}[/red]")
        payload = {"scenario": args.scenario, "ok": ok, "params": scen.params(args),
                   "targets": {n: a for n, a in targets}, "results": results, "ratios": ratios,
                   "ratio_of": f"{subject}/{peer}" if peer else None, "seconds": timings, "errors": errors}
        rep.json_line(payload)
        return 0 if ok else 1
    finally:
        for s in reversed(started):
            s.stop()
