"""``commit``: K clients, each on its own group, commit offsets as fast as they can.

Each client is a confluent-kafka Consumer in its own process (spawned), with ``assign()``
of every partition of one topic (then paused, so no Fetch traffic competes). Phases, D
seconds each: synchronous commits of 1 offset, of 10 offsets; asynchronous commits of 1
offset (and of 10) with at most ``--window`` in flight per client, counted by the
``on_commit`` callback. Every commit carries a fresh, increasing offset, so afterwards each
client reads its committed offsets back with a new consumer and checks that every
partition's committed offset is >= the last value the broker acknowledged for it.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from bench.brokers import BenchError
from bench.common import CLIENT_DEFAULTS, client_config, create_topic, host_cpu, mp_context, run_id
from bench.report import Metric, Reporter, percentile, rnd

PHASES = {  # name -> (offsets per commit, asynchronous)
    "sync-1": (1, False),
    "sync-10": (10, False),
    "async-1": (1, True),
    "async-10": (10, True),
}
DEFAULT_PHASES = "sync-1,sync-10,async-1,async-10"


def metrics_for(phases: list[str]) -> list[Metric]:
    out: list[Metric] = []
    for ph in phases:
        out += [Metric(f"{ph}.commits_per_s", f"{ph} commits/s", "", "higher"),
                Metric(f"{ph}.offsets_per_s", f"{ph} offsets/s", "", "higher"),
                Metric(f"{ph}.p50_ms", f"{ph} p50 latency", "ms", "lower"),
                Metric(f"{ph}.p99_ms", f"{ph} p99 latency", "ms", "lower"),
                Metric(f"{ph}.server_cpu_us", f"{ph} host CPU outside the clients per commit", "µs", "lower"),
                Metric(f"{ph}.client_cpu_us", f"{ph} clients' CPU per commit", "µs", "lower"),
                Metric(f"{ph}.host_busy_pct", f"{ph} host CPU busy", "%", ""),
                Metric(f"{ph}.errors", f"{ph} failed commits", "", "")]
    out += [Metric("acked_commits", "acknowledged commits", "", ""),
            Metric("partitions_checked", "partitions read back", "", ""),
            Metric("lost_commits", "lost acknowledged commits", "", "")]
    return out


def add_arguments(p: Any) -> None:
    p.add_argument("--clients", "-k", type=int, default=8, help="client processes, one group each (default 8)")
    p.add_argument("--duration", "-d", type=float, default=10.0, help="seconds per phase (default 10)")
    p.add_argument("--partitions", type=int, default=10, help="partitions of the topic (default 10)")
    p.add_argument("--window", type=int, default=16, help="async commits in flight per client (default 16)")
    p.add_argument("--phases", default=DEFAULT_PHASES, help=f"comma list of {', '.join(PHASES)}")
    p.add_argument("--client-config", action="append", default=[], metavar="KEY=VALUE",
                   help="a librdkafka setting of the clients of kcoord, e.g. security.protocol=SASL_SSL (repeat)")
    p.add_argument("--peer-client-config", action="append", default=[], metavar="KEY=VALUE",
                   help="the same for the peer's clients (e.g. another listener of one kcoord cluster as the peer)")


def params(args: Any) -> dict[str, Any]:
    return {"clients": args.clients, "duration_s": args.duration, "partitions": args.partitions,
            "window": args.window, "phases": _phases(args)}


def _phases(args: Any) -> list[str]:
    phases = [p.strip() for p in str(args.phases).split(",") if p.strip()]
    bad = [p for p in phases if p not in PHASES]
    if bad:
        raise BenchError(f"unknown commit phase(s) {bad}; choose from {list(PHASES)}")
    return phases


def metrics(args: Any) -> list[Metric]:
    return metrics_for(_phases(args))


def ok(result: dict[str, Any]) -> bool:
    return result.get("lost_commits") == 0 and result.get("partitions_checked", 0) > 0


# ---------------------------------------------------------------- worker process


def _worker(idx: int, bootstrap: str, topic: str, group: str, partitions: int, conn: Any, counter: Any,
            extra: dict[str, str]) -> None:
    try:
        _worker_main(idx, bootstrap, topic, group, partitions, conn, counter, extra)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which fails the run
        import traceback

        conn.send(("error", f"client {idx}: {e!r}\n{traceback.format_exc()}"))


def _worker_main(idx: int, bootstrap: str, topic: str, group: str, partitions: int, conn: Any,
                 counter: Any, extra: dict[str, str]) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    last_acked: dict[int, int] = {}
    pending: dict[int, float] = {}  # async: first offset value -> send time
    st: dict[str, Any] = {"ok": 0, "failed": 0, "offsets": 0, "lat": [], "last_t": 0.0}

    def on_commit(err: Any, tps: list[Any]) -> None:
        if not tps:
            return
        key = tps[0].offset
        t_sent = pending.pop(key, None)
        if t_sent is None:
            return  # a synchronous commit's callback, or not ours
        now = time.perf_counter()
        if err is not None or any(tp.error is not None for tp in tps):
            st["failed"] += 1
        else:
            st["ok"] += 1
            st["offsets"] += len(tps)
            st["lat"].append((now - t_sent) * 1000.0)
            for tp in tps:
                if tp.offset > last_acked.get(tp.partition, -1):
                    last_acked[tp.partition] = tp.offset
            counter[idx] += 1
        st["last_t"] = now

    conf = dict(CLIENT_DEFAULTS, **extra, **{"bootstrap.servers": bootstrap, "group.id": group,
                                     "enable.auto.commit": False, "enable.auto.offset.store": False,
                                     "on_commit": on_commit, "auto.offset.reset": "earliest"})
    c = Consumer(conf)
    tps_all = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps_all)
    c.pause(tps_all)
    seq = 0
    # warm-up: find the coordinator and open the connection
    seq += 1
    c.commit(offsets=[TopicPartition(topic, p, seq) for p in range(partitions)], asynchronous=False)
    for p in range(partitions):
        last_acked[p] = seq
    conn.send(("ready", None))

    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            break
        if msg[0] == "verify":
            c.close()
            conn.send(("verify", _verify(bootstrap, topic, group, partitions, last_acked, extra)))
            return
        _, n_offsets, is_async, window, start_at, duration = msg
        st.update(ok=0, failed=0, offsets=0, lat=[], last_t=0.0)
        delay = start_at - time.time()
        if delay > 0:
            time.sleep(delay)
        cpu0 = time.process_time()  # the whole client process: librdkafka's threads too
        t0 = time.perf_counter()
        end = t0 + duration
        perf = time.perf_counter
        if not is_async:
            lat = st["lat"]
            while perf() < end:
                seq += 1
                if n_offsets == 1:
                    offs = [TopicPartition(topic, seq % partitions, seq)]
                else:
                    offs = [TopicPartition(topic, p, seq) for p in range(min(n_offsets, partitions))]
                t1 = perf()
                try:
                    res = c.commit(offsets=offs, asynchronous=False)
                except KafkaException:
                    st["failed"] += 1
                    continue
                t2 = perf()
                if res is not None and any(tp.error is not None for tp in res):
                    st["failed"] += 1
                    continue
                lat.append((t2 - t1) * 1000.0)
                st["ok"] += 1
                st["offsets"] += len(offs)
                for tp in offs:
                    last_acked[tp.partition] = seq
                counter[idx] += 1
            st["last_t"] = perf()
        else:
            while perf() < end:
                while len(pending) < window:
                    seq += 1
                    if n_offsets == 1:
                        offs = [TopicPartition(topic, seq % partitions, seq)]
                    else:
                        offs = [TopicPartition(topic, p, seq) for p in range(min(n_offsets, partitions))]
                    pending[seq] = perf()
                    try:
                        c.commit(offsets=offs, asynchronous=True)
                    except KafkaException:
                        pending.pop(seq, None)
                        st["failed"] += 1
                c.poll(0.001)  # serves on_commit callbacks
            drain_end = perf() + 30
            while pending and perf() < drain_end:
                c.poll(0.01)
            st["failed"] += len(pending)
            pending.clear()
        conn.send(("phase", {"ok": st["ok"], "failed": st["failed"], "offsets": st["offsets"],
                             "lat": st["lat"], "elapsed": max(st["last_t"] - t0, 1e-6),
                             "cpu_s": time.process_time() - cpu0}))


def _verify(bootstrap: str, topic: str, group: str, partitions: int, last_acked: dict[int, int],
            extra: dict[str, str]) -> dict[str, Any]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(dict(CLIENT_DEFAULTS, **extra, **{"bootstrap.servers": bootstrap, "group.id": group,
                                           "enable.auto.commit": False}))
    try:
        res = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        c.close()
    lost = []
    for tp in res:
        want = last_acked.get(tp.partition)
        if want is not None and (tp.error is not None or tp.offset < want):
            lost.append({"group": group, "partition": tp.partition, "committed": tp.offset, "acked": want})
    return {"checked": len(res), "lost": lost, "acked": sum(1 for _ in last_acked)}


# ---------------------------------------------------------------- parent


def run_one(name: str, bootstrap: str, args: Any, rep: Reporter) -> dict[str, Any]:
    phases = _phases(args)
    rid = run_id()
    topic = f"bench-commit-{rid}"
    extra = client_config(args.client_config if name == "kcoord" else args.peer_client_config)
    create_topic(bootstrap, topic, args.partitions, client_config=extra)
    ctx = mp_context()
    counter = ctx.Array("q", args.clients, lock=False)
    procs, conns = [], []
    rep.note(f"{name}: starting {args.clients} client processes on {bootstrap} (topic {topic})")
    for i in range(args.clients):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_worker, args=(i, bootstrap, topic, f"bench-commit-{rid}-{i}", args.partitions,
                                             child, counter, extra), daemon=True)
        p.start()
        procs.append(p)
        conns.append(parent)
    result: dict[str, Any] = {}
    acked_total = 0
    try:
        for conn in conns:
            _expect(conn, "ready", 60)
        for ph in phases:
            n_offsets, is_async = PHASES[ph]
            for i in range(args.clients):
                counter[i] = 0
            start_at = time.time() + 0.3
            for conn in conns:
                conn.send(("phase", n_offsets, is_async, args.window, start_at, args.duration))
            # Host CPU over the phase's window; what the clients did not use is the broker's cost
            # (plus whatever else runs): the figure that says whether a rate is CPU-bound.
            host: list[tuple[int, int]] = []
            timers = [threading.Timer(max(0.0, at - time.time()), _sample_into, (host,))
                      for at in (start_at, start_at + args.duration)]
            for t in timers:
                t.start()
            with rep.phase(f"{name} {ph}", args.duration, lambda: sum(counter), "commits"):
                outs = [_expect(conn, "phase", args.duration + 60) for conn in conns]
            for t in timers:
                t.join()
            okc = sum(o["ok"] for o in outs)
            offs = sum(o["offsets"] for o in outs)
            elapsed = max(o["elapsed"] for o in outs)
            lat = [x for o in outs for x in o["lat"]]
            acked_total += okc
            result[f"{ph}.commits_per_s"] = rnd(okc / elapsed, 1)
            result[f"{ph}.offsets_per_s"] = rnd(offs / elapsed, 1)
            result[f"{ph}.p50_ms"] = rnd(percentile(lat, 50), 3)
            result[f"{ph}.p99_ms"] = rnd(percentile(lat, 99), 3)
            result[f"{ph}.errors"] = sum(o["failed"] for o in outs)
            result.update(_cpu_figures(ph, host, sum(o["cpu_s"] for o in outs), okc, args.duration))
        with rep.phase(f"{name} read back committed offsets"):
            for conn in conns:
                conn.send(("verify",))
            checks = [_expect(conn, "verify", 90) for conn in conns]
        lost = [x for c in checks for x in c["lost"]]
        result["acked_commits"] = acked_total
        result["partitions_checked"] = sum(c["checked"] for c in checks)
        result["lost_commits"] = len(lost)
        if lost:
            result["lost_detail"] = lost[:20]
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join(5)
    return result


def _sample_into(samples: list[tuple[int, int]]) -> None:
    samples.append(host_cpu())


def _cpu_figures(ph: str, host: list[tuple[int, int]], clients_cpu_s: float, commits: int,
                 duration: float) -> dict[str, Any]:
    if len(host) != 2 or not commits:
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    busy_s = (host[1][0] - host[0][0]) / tick
    total_s = (host[1][1] - host[0][1]) / tick
    return {f"{ph}.server_cpu_us": rnd(max(0.0, busy_s - clients_cpu_s) / commits * 1e6, 1),
            f"{ph}.client_cpu_us": rnd(clients_cpu_s / commits * 1e6, 1),
            f"{ph}.host_busy_pct": rnd(100.0 * busy_s / max(total_s, 1e-9), 1)}


def _expect(conn: Any, kind: str, timeout: float) -> Any:
    if not conn.poll(timeout):
        raise BenchError(f"a commit client did not answer {kind!r} within {timeout:.0f}s")
    msg = conn.recv()
    if msg[0] == "error":
        raise BenchError(msg[1])
    if msg[0] != kind:
        raise BenchError(f"commit client: expected {kind!r}, got {msg[0]!r}")
    return msg[1]
