"""``e2e``: produce -> group consume, latency and throughput.

A producer process and C consumer processes (one group, subscribe()) on a topic of P
partitions. Each value carries the send wall-clock time and a sequence number. After the
group's assignment is complete:

* ``latency``: the producer sends ``--rate`` messages/s for D seconds (linger.ms=0,
  acks=all); latency = consumer receive time - send time, p50/p99/max; the produce ack
  latency (librdkafka's ``Message.latency()``, produce() -> delivery report) separately;
* ``throughput``: the producer sends ``--messages`` values of ``--size`` bytes as fast as it
  can (linger.ms=5); produce rate = acknowledged messages / time to flush; end-to-end rate
  = messages / (last receive - first send).

Every message must arrive exactly once (``missing`` and ``duplicates`` are reported).
"""

from __future__ import annotations

import struct
import time
from typing import Any

from bench.brokers import BenchError
from bench.common import CLIENT_DEFAULTS, create_topic, mp_context, run_id
from bench.report import Metric, Reporter, percentile, rnd

HEADER = struct.Struct(">dBq")  # send time (time.time()), phase, sequence

METRICS = [
    Metric("latency.p50_ms", "latency at fixed rate p50", "ms", "lower"),
    Metric("latency.p99_ms", "latency at fixed rate p99", "ms", "lower"),
    Metric("latency.max_ms", "latency at fixed rate max", "ms", "lower"),
    Metric("latency.produce_ack_p50_ms", "fixed rate: produce ack p50", "ms", "lower"),
    Metric("latency.produce_ack_p99_ms", "fixed rate: produce ack p99", "ms", "lower"),
    Metric("latency.msgs_per_s", "fixed-rate phase consumed msgs/s", "", "higher"),
    Metric("throughput.produce_msgs_per_s", "produce (acked) msgs/s", "", "higher"),
    Metric("throughput.e2e_msgs_per_s", "end-to-end consumed msgs/s", "", "higher"),
    Metric("throughput.e2e_mb_per_s", "end-to-end MB/s", "MB/s", "higher"),
    Metric("throughput.p50_ms", "latency under full load p50", "ms", "lower"),
    Metric("throughput.p99_ms", "latency under full load p99", "ms", "lower"),
    Metric("throughput.produce_ack_p50_ms", "full load: produce ack p50", "ms", "lower"),
    Metric("throughput.produce_ack_p99_ms", "full load: produce ack p99", "ms", "lower"),
    Metric("group_ready_s", "group ready (subscribe -> all assigned)", "s", "lower"),
    Metric("missing", "messages not consumed", "", ""),
    Metric("duplicates", "messages consumed twice", "", ""),
]


def add_arguments(p: Any) -> None:
    p.add_argument("--consumers", "-c", type=int, default=2, help="consumer processes in the group (default 2)")
    p.add_argument("--partitions", "-p", type=int, default=6, help="partitions (default 6)")
    p.add_argument("--rate", type=int, default=1000, help="messages/s in the latency phase (default 1000)")
    p.add_argument("--duration", "-d", type=float, default=10.0, help="seconds of the latency phase (default 10)")
    p.add_argument("--messages", "-m", type=int, default=100_000, help="messages in the throughput phase")
    p.add_argument("--size", type=int, default=100, help="value size in bytes (default 100)")
    p.add_argument("--timeout", type=float, default=120.0, help="give up waiting for the group/messages after (s)")


def params(args: Any) -> dict[str, Any]:
    return {"consumers": args.consumers, "partitions": args.partitions, "rate": args.rate,
            "duration_s": args.duration, "messages": args.messages, "size": args.size}


def metrics(args: Any) -> list[Metric]:
    return METRICS


def ok(result: dict[str, Any]) -> bool:
    return result.get("missing") == 0 and result.get("duplicates") == 0


# ---------------------------------------------------------------- child processes


def _consumer(idx: int, bootstrap: str, topic: str, group: str, conn: Any, counter: Any, assigned: Any,
              stop: Any) -> None:
    try:
        from confluent_kafka import Consumer

        def on_assign(_c: Any, ps: list[Any]) -> None:
            assigned[idx] = len(ps)

        def on_revoke(_c: Any, ps: list[Any]) -> None:
            assigned[idx] = 0

        c = Consumer(dict(CLIENT_DEFAULTS, **{"bootstrap.servers": bootstrap, "group.id": group,
                                               "auto.offset.reset": "earliest", "enable.auto.commit": True}))
        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        lat: list[list[float]] = [[], []]
        seqs: list[list[int]] = [[], []]
        last_recv = [0.0, 0.0]
        unpack = HEADER.unpack_from
        errors = 0
        while not stop.is_set():
            # poll() returns on the first message; consume(n, 0) then drains what is already here
            # (consume(n, timeout) would wait for n messages or the whole timeout)
            first = c.poll(0.1)
            if first is None:
                continue
            msgs = [first, *c.consume(999, 0)]
            now = time.time()
            for m in msgs:
                if m.error() is not None:
                    errors += 1
                    continue
                sent, phase, seq = unpack(m.value() or b"")
                lat[phase].append((now - sent) * 1000.0)
                seqs[phase].append(seq)
                last_recv[phase] = now
            counter[idx] += len(msgs)
        c.close()
        conn.send(("done", {"lat": lat, "seqs": seqs, "last_recv": last_recv, "errors": errors}))
    except Exception as e:  # noqa: BLE001
        import traceback

        conn.send(("error", f"consumer {idx}: {e!r}\n{traceback.format_exc()}"))


def _producer(bootstrap: str, topic: str, conn: Any, counter: Any) -> None:
    try:
        from confluent_kafka import Producer

        failed = [0]
        acks: list[float] = []

        def cb(err: Any, m: Any) -> None:
            if err is not None:
                failed[0] += 1
            else:
                counter[0] += 1
                lat = m.latency()
                if lat is not None:
                    acks.append(lat * 1000.0)

        while True:
            msg = conn.recv()
            if msg[0] == "stop":
                return
            if msg[0] == "latency":
                _, rate, duration, size = msg
                p = Producer(dict(CLIENT_DEFAULTS, **{"bootstrap.servers": bootstrap, "linger.ms": 0,
                                                       "acks": "all"}))
                pad = b"x" * max(0, size - HEADER.size)
                n = int(rate * duration)
                t0 = time.perf_counter()
                for i in range(n):
                    due = t0 + i / rate
                    while True:
                        left = due - time.perf_counter()
                        if left <= 0:
                            break
                        p.poll(min(left, 0.01))
                    p.produce(topic, HEADER.pack(time.time(), 0, i) + pad, on_delivery=cb)
                    p.poll(0)
                p.flush(60)
                conn.send(("latency", {"sent": n, "failed": failed[0], "acks": acks[:]}))
            elif msg[0] == "throughput":
                _, count, size = msg
                p = Producer(dict(CLIENT_DEFAULTS, **{"bootstrap.servers": bootstrap, "linger.ms": 5,
                                                       "acks": "all", "queue.buffering.max.messages": 1_000_000,
                                                       "queue.buffering.max.kbytes": 1_048_576}))
                pad = b"x" * max(0, size - HEADER.size)
                failed[0] = 0
                acks.clear()
                t_first = time.time()
                t0 = time.perf_counter()
                for i in range(count):
                    while True:
                        try:
                            p.produce(topic, HEADER.pack(time.time(), 1, i) + pad, on_delivery=cb)
                            break
                        except BufferError:
                            p.poll(0.005)
                    if i % 1000 == 0:
                        p.poll(0)
                p.flush(120)
                elapsed = time.perf_counter() - t0
                conn.send(("throughput", {"sent": count, "failed": failed[0], "elapsed": elapsed,
                                          "t_first": t_first, "acks": acks[:]}))
    except Exception as e:  # noqa: BLE001
        import traceback

        conn.send(("error", f"producer: {e!r}\n{traceback.format_exc()}"))


# ---------------------------------------------------------------- parent


def _recv(conn: Any, kind: str, timeout: float) -> Any:
    if not conn.poll(timeout):
        raise BenchError(f"e2e: no {kind!r} from a client process within {timeout:.0f}s")
    msg = conn.recv()
    if msg[0] == "error":
        raise BenchError(msg[1])
    if msg[0] != kind:
        raise BenchError(f"e2e: expected {kind!r}, got {msg[0]!r}")
    return msg[1]


def _wait(cond: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return bool(cond())


def run_one(name: str, bootstrap: str, args: Any, rep: Reporter) -> dict[str, Any]:
    rid = run_id()
    topic, group = f"bench-e2e-{rid}", f"bench-e2e-{rid}"
    create_topic(bootstrap, topic, args.partitions)
    ctx = mp_context()
    counter = ctx.Array("q", args.consumers, lock=False)
    assigned = ctx.Array("q", args.consumers, lock=False)
    pcount = ctx.Array("q", 1, lock=False)
    stop = ctx.Event()
    procs, cconns = [], []
    result: dict[str, Any] = {}
    try:
        rep.note(f"{name}: {args.consumers} consumers + 1 producer on {bootstrap} (topic {topic})")
        t_sub = time.monotonic()
        for i in range(args.consumers):
            a, b = ctx.Pipe()
            pr = ctx.Process(target=_consumer, args=(i, bootstrap, topic, group, b, counter, assigned, stop),
                             daemon=True)
            pr.start()
            procs.append(pr)
            cconns.append(a)
        pa, pb = ctx.Pipe()
        prod = ctx.Process(target=_producer, args=(bootstrap, topic, pb, pcount), daemon=True)
        prod.start()
        procs.append(prod)
        with rep.phase(f"{name} waiting for the group's assignment"):
            okay = _wait(lambda: sum(assigned) == args.partitions
                         and (args.consumers > args.partitions or all(assigned)), args.timeout)
        if not okay:
            raise BenchError(f"{name}: group not assigned after {args.timeout}s ({list(assigned)})")
        result["group_ready_s"] = rnd(time.monotonic() - t_sub, 2)
        time.sleep(0.5)
        n_lat = int(args.rate * args.duration)
        pa.send(("latency", args.rate, args.duration, args.size))
        with rep.phase(f"{name} latency: {args.rate} msg/s", args.duration, lambda: sum(counter), "consumed"):
            lat_info = _recv(pa, "latency", args.duration + args.timeout)
            _wait(lambda: sum(counter) >= n_lat, args.timeout)
        t_lat = time.monotonic()
        pa.send(("throughput", args.messages, args.size))
        with rep.phase(f"{name} throughput: {args.messages:,} messages", None,
                       lambda: sum(counter) - n_lat, "consumed"):
            tp_info = _recv(pa, "throughput", args.timeout + args.messages / 1000)
            _wait(lambda: sum(counter) >= n_lat + args.messages, args.timeout)
        del t_lat
        pa.send(("stop",))
        stop.set()
        outs = [_recv(c, "done", 60) for c in cconns]
        lat0 = [x for o in outs for x in o["lat"][0]]
        lat1 = [x for o in outs for x in o["lat"][1]]
        seq0 = [s for o in outs for s in o["seqs"][0]]
        seq1 = [s for o in outs for s in o["seqs"][1]]
        last1 = max((o["last_recv"][1] for o in outs), default=0.0)
        result["latency.p50_ms"] = rnd(percentile(lat0, 50), 2)
        result["latency.p99_ms"] = rnd(percentile(lat0, 99), 2)
        result["latency.max_ms"] = rnd(max(lat0) if lat0 else None, 2)
        result["latency.produce_ack_p50_ms"] = rnd(percentile(lat_info["acks"], 50), 2)
        result["latency.produce_ack_p99_ms"] = rnd(percentile(lat_info["acks"], 99), 2)
        result["throughput.produce_ack_p50_ms"] = rnd(percentile(tp_info["acks"], 50), 2)
        result["throughput.produce_ack_p99_ms"] = rnd(percentile(tp_info["acks"], 99), 2)
        result["latency.msgs_per_s"] = rnd(len(lat0) / args.duration, 1)
        result["throughput.produce_msgs_per_s"] = rnd(tp_info["sent"] / tp_info["elapsed"], 1)
        span = last1 - tp_info["t_first"]
        result["throughput.e2e_msgs_per_s"] = rnd(len(set(seq1)) / span, 1) if span > 0 else None
        result["throughput.e2e_mb_per_s"] = (rnd(len(set(seq1)) * args.size / span / 1e6, 2)
                                             if span > 0 else None)
        result["throughput.p50_ms"] = rnd(percentile(lat1, 50), 2)
        result["throughput.p99_ms"] = rnd(percentile(lat1, 99), 2)
        missing = (n_lat - len(set(seq0))) + (args.messages - len(set(seq1)))
        result["missing"] = missing
        result["duplicates"] = (len(seq0) - len(set(seq0))) + (len(seq1) - len(set(seq1)))
        result["produce_failed"] = lat_info["failed"] + tp_info["failed"]
        result["consume_errors"] = sum(o["errors"] for o in outs)
    finally:
        stop.set()
        for pr in procs:
            pr.join(15)
            if pr.is_alive():
                pr.kill()
                pr.join(5)
    return result
