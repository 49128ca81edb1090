"""The chaos run's client processes: ``python -m chaos.workload ROLE ...``.

Each process writes its own history file (``chaos/history.py`` format) and shares the
run clock through ``KCOORD_CHAOS_T0``. SIGTERM asks for a clean stop (flush/close, then a
``leave`` event); the runner SIGKILLs a process to crash it and then appends the
``crash`` event to the process's file on its behalf.

Roles:
- ``producer``: confluent-kafka, ``acks=all``, idempotent (so librdkafka's internal
  retries cannot duplicate a value); unique values ``<proc>-<n>``.
- ``ck-consumer``: confluent-kafka (librdkafka) consumer, manual sync commits.
- ``kp-consumer``: kafka-python consumer, manual sync commits.
- ``eos-worker`` and ``rc-reader``: exactly-once consume-transform-produce and a
  ``read_committed`` reader of its output (``chaos/eos_workload.py``).

What the consumer events mean:
- ``member`` is the member's identity as the group protocol sees it across rejoins:
  for a dynamic member, the client process id (``proc``: one process incarnation — a
  restarted process is a new member); for a static member, its ``group.instance.id``
  (KIP-345: a restarted static member *is* the same member, it takes over the old member
  id's assignment in the same generation without a rebalance). The Kafka member id is in
  the extra field ``member_id`` (on ``assign``) and the ``group.instance.id``, if any, in
  ``instance`` (on ``assign``, ``revoke``, ``leave``, ``crash``; null for dynamic members).
- ``generation`` is the group generation the assignment belongs to, as the protocol
  defines it (JoinGroup/SyncGroup generation id):
  - kafka-python: read from the client's coordinator state at the assignment callback;
  - confluent-kafka: librdkafka does not expose it, so it is parsed from the client's
    ``cgrp`` debug log line ``JoinGroup response: GenerationId N`` (the latest one before the
    assignment callback). If no such line was seen, the value is the count of assignment
    callbacks of this process so far and the event carries ``generation_source: "local"``
    (otherwise ``"protocol"``). Either way ``generation`` never decreases within a process.
  The runner also samples DescribeGroups into ``RUN_DIR/groups.jsonl`` (state, members,
  assignments as the coordinator reports them), independent of the clients.
  With ``--group-protocol consumer`` (KIP-848, confluent-kafka only; kafka-python members stay
  classic, so the groups hold both kinds) the generation is the member epoch of the latest
  ConsumerGroupHeartbeat response before the callback; ``assign`` lists the whole assignment
  after the callback (which only carries what was added), ``revoke`` what was taken away.
  ``assign`` carries ``protocol`` (classic or consumer).
- ``poll`` and ``commit.*`` carry the generation of the member's current assignment.
- ``fetch_committed`` is what ``Consumer.committed()`` returned right after an assignment
  (confluent-kafka: inside the assignment callback, before any record of it is consumed;
  kafka-python: right after the poll that ran the assignment, before that poll's ``poll``
  event is written — kafka-python refuses blocking calls inside its listeners).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from chaos import eos_workload
from chaos.history import HistoryWriter

STOP = threading.Event()


MEMBER = ""  # set in main(): the history ``member`` of this process (see above)


def member_name(proc: str, instance_id: str | None) -> str:
    return instance_id or proc


def _on_term(signum: int, frame: object) -> None:
    STOP.set()


# ------------------------------------------------------------------ producer

def run_producer(args: argparse.Namespace, h: HistoryWriter) -> None:
    from confluent_kafka import KafkaError, Producer

    conf = {"bootstrap.servers": args.bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000,
            "request.timeout.ms": 10000, "enable.idempotence": True}
    p = Producer(conf)
    fatal = threading.Event()
    unknown_codes = {KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
                     KafkaError.REQUEST_TIMED_OUT, KafkaError._PURGE_INFLIGHT, KafkaError.NETWORK_EXCEPTION}
    definite_fail = {KafkaError._PURGE_QUEUE}

    def delivered(op: str, value: str, err: Any, msg: Any) -> None:
        if err is not None and err.fatal():
            fatal.set()
        if err is None:
            h.write("produce.ok", op=op, topic=msg.topic(), partition=msg.partition(), offset=msg.offset(),
                    value=value)
        elif err.code() in definite_fail:
            h.write("produce.fail", op=op, value=value, error=err.name())
        elif err.code() in unknown_codes or err.retriable():
            h.write("produce.unknown", op=op, value=value, error=err.name())
        else:
            # Errors the broker returned for the request are definite, except that a
            # retried request may have been written by an earlier attempt: stay safe.
            h.write("produce.unknown", op=op, value=value, error=err.name())

    def callback(op: str, value: str) -> Any:
        return lambda err, msg: delivered(op, value, err, msg)

    n = 0
    interval = 1.0 / max(args.rate, 1)
    next_at = time.monotonic()
    while not STOP.is_set():
        n += 1
        value = f"{h.proc}-{n}"
        op = h.next_op()
        h.write("produce.invoke", op=op, topic=args.topic, value=value)
        try:
            p.produce(args.topic, value=value.encode(), key=str(n).encode(),
                      on_delivery=callback(op, value))
        except BufferError as e:
            h.write("produce.fail", op=op, value=value, error=f"BufferError: {e}")
        # poll() returns as soon as it has served a callback, so one call per message let the
        # schedule run ahead of the clock while deliveries flowed, and the next stall of
        # deliveries (any fault) then held the producer in poll() for the whole lead (9 s seen).
        # Wait out each slot; after a stall catch up at most a second's worth of messages.
        next_at = max(next_at + interval, time.monotonic() - 1.0)
        p.poll(0)
        while (wait := next_at - time.monotonic()) > 0 and not STOP.is_set():
            p.poll(wait)
        if fatal.is_set():
            # A fatal idempotence error (e.g. OUT_OF_ORDER_SEQUENCE) ends this producer:
            # what it still holds is unknown, and a new producer (new producer id) goes on.
            logging.getLogger("chaos").warning("fatal producer error: starting a new producer")
            p.purge(in_queue=True, in_flight=True)
            p.flush(5)
            p = Producer(conf)
            fatal.clear()
    p.flush(30)
    p.purge(in_queue=True, in_flight=True)
    p.flush(5)


# ------------------------------------------------------------------ consumers

class _GenerationLog(logging.Handler):
    """Picks the generation id out of librdkafka's ``cgrp`` debug log: the JoinGroup response's
    (classic protocol), or the member epoch of a ConsumerGroupHeartbeat response (KIP-848)."""

    PATTERN = re.compile(r"GenerationId (-?\d+)")
    EPOCH = re.compile(r"ConsumerGroupHeartbeat response received .* with epoch (-?\d+)")

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.generation: int | None = None

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        m = self.PATTERN.search(text) if "JoinGroup response" in text else self.EPOCH.search(text)
        if m:
            gen = int(m.group(1))
            if gen >= 0:
                self.generation = gen


class _State:
    def __init__(self) -> None:
        self.generation = 0
        self.assigns = 0
        self.owned: set[tuple[str, int]] = set()


def _parts(tps: Any) -> list[list[Any]]:
    return sorted([tp.topic, tp.partition] for tp in tps)


def run_ck_consumer(args: argparse.Namespace, h: HistoryWriter) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    gen_log = _GenerationLog()
    logger = logging.getLogger(f"rdkafka.{h.proc}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(gen_log)
    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "debug": "cgrp", "logger": logger, "client.id": h.proc,
    }
    # KIP-848: the coordinator assigns and owns the session and heartbeat settings; the callbacks
    # carry only what moves, so ``assign`` events list the member's whole assignment after it
    incremental = args.group_protocol == "consumer"
    if incremental:
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": args.session_ms, "heartbeat.interval.ms": 1000,
                     "partition.assignment.strategy": "range"})
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    c = Consumer(conf)
    st = _State()
    definite = {KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS,
                KafkaError.FENCED_INSTANCE_ID, KafkaError._NO_OFFSET, KafkaError.OFFSET_METADATA_TOO_LARGE,
                KafkaError._STATE, KafkaError._ASSIGNMENT_LOST}

    def on_assign(consumer: Any, parts: list[Any]) -> None:
        st.assigns += 1
        if gen_log.generation is not None:
            gen, source = max(gen_log.generation, st.generation), "protocol"
        else:
            gen, source = max(st.assigns, st.generation), "local"
        st.generation = gen
        got = {(tp.topic, tp.partition) for tp in parts}
        st.owned = st.owned | got if incremental else got
        h.write("assign", group=args.group, member=MEMBER, generation=gen, partitions=sorted([t, p] for t, p in st.owned),
                member_id=consumer.memberid(), instance=args.instance_id, generation_source=source,
                protocol=args.group_protocol)
        if parts:
            try:
                got = consumer.committed(parts, timeout=15)
                h.write("fetch_committed", group=args.group, member=MEMBER,
                        offsets=sorted([tp.topic, tp.partition, tp.offset if tp.offset >= 0 else -1]
                                       for tp in got))
            except KafkaException as e:
                logging.getLogger("chaos").warning("committed() failed: %s", e)

    def on_revoke(consumer: Any, parts: list[Any]) -> None:
        h.write("revoke", group=args.group, member=MEMBER, generation=st.generation, partitions=_parts(parts),
                instance=args.instance_id)
        st.owned -= {(tp.topic, tp.partition) for tp in parts}

    def on_lost(consumer: Any, parts: list[Any]) -> None:
        h.write("revoke", group=args.group, member=MEMBER, generation=st.generation, partitions=_parts(parts),
                lost=True, instance=args.instance_id)
        st.owned -= {(tp.topic, tp.partition) for tp in parts}

    c.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    fatal_seen = False
    while not STOP.is_set():
        got = c.consume(num_messages=500, timeout=0.5)
        msgs = [m for m in got if m.error() is None]
        errors = [e for e in (m.error() for m in got) if e is not None]
        fatal = next((e for e in errors if e.fatal()), None)
        if fatal is not None and not fatal_seen:  # e.g. FENCED_INSTANCE_ID: librdkafka stops here
            fatal_seen = True
            logging.getLogger("chaos").error("fatal consumer error: %s", fatal)
        if not msgs:
            continue
        h.write("poll", group=args.group, member=MEMBER, generation=st.generation,
                records=[[m.topic(), m.partition(), m.offset(), (m.value() or b"").decode()] for m in msgs])
        positions: dict[tuple[str, int], int] = {}
        for m in msgs:
            positions[(str(m.topic()), int(m.partition() or 0))] = int(m.offset() or 0) + 1
        offsets: list[tuple[str, int, int]] = sorted((t, p, o) for (t, p), o in positions.items())
        op = h.next_op()
        h.write("commit.invoke", op=op, group=args.group, member=MEMBER, generation=st.generation,
                offsets=[list(x) for x in offsets])
        try:
            done: list[Any] = c.commit(offsets=[TopicPartition(t, p, o) for t, p, o in offsets],
                                       asynchronous=False)
        except KafkaException as e:
            err = e.args[0]
            kind = "commit.fail" if err.code() in definite else "commit.unknown"
            h.write(kind, op=op, error=err.name())
            continue
        errors = [tp.error for tp in (done or []) if tp.error is not None]
        if not errors:
            h.write("commit.ok", op=op, error=None)
        elif all(e.code() in definite for e in errors):
            h.write("commit.fail", op=op, error=errors[0].name())
        else:
            h.write("commit.unknown", op=op, error=errors[0].name())
    c.close()
    h.write("leave", group=args.group, member=MEMBER, instance=args.instance_id)


def run_kp_consumer(args: argparse.Namespace, h: HistoryWriter) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka import errors as kerr
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.structs import OffsetAndMetadata

    st = _State()
    holder: dict[str, Any] = {}
    pending: list[list[Any]] = []
    definite = (kerr.CommitFailedError, kerr.IllegalGenerationError, kerr.UnknownMemberIdError,
                kerr.RebalanceInProgressError, kerr.FencedInstanceIdError)

    def generation() -> tuple[int | None, str | None]:
        coord = getattr(holder["c"], "_coordinator", None)
        gen = getattr(coord, "_generation", None)
        if gen is None:
            return None, None
        return int(gen.generation_id), str(gen.member_id)

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            h.write("revoke", group=args.group, member=MEMBER, generation=st.generation,
                    partitions=_parts(revoked), instance=args.instance_id)
            st.owned -= {(tp.topic, tp.partition) for tp in revoked}

        def on_partitions_lost(self, lost: Any) -> None:
            # kafka-python 3 (KIP-429): the member was already expired or fenced; its default
            # calls on_partitions_revoked, which would hide from the checker that the partitions
            # were taken away before the client knew (a zombie, as librdkafka's on_lost reports).
            h.write("revoke", group=args.group, member=MEMBER, generation=st.generation,
                    partitions=_parts(lost), lost=True, instance=args.instance_id)
            st.owned -= {(tp.topic, tp.partition) for tp in lost}

        def on_partitions_assigned(self, assigned: Any) -> None:
            st.assigns += 1
            gen, member_id = generation()
            source = "protocol"
            if gen is None or gen < 0:
                gen, source = max(st.assigns, st.generation), "local"
            st.generation = max(gen, st.generation)
            st.owned = {(tp.topic, tp.partition) for tp in assigned}
            h.write("assign", group=args.group, member=MEMBER, generation=st.generation,
                    partitions=_parts(assigned), member_id=member_id, instance=args.instance_id,
                    generation_source=source, protocol="classic")
            # kafka-python 3 runs listeners on its IO thread, where blocking calls are refused:
            # the main loop reads the committed offsets right after the poll that assigned.
            if assigned:
                pending.append(list(assigned))

    c = KafkaConsumer(bootstrap_servers=args.bootstrap.split(","), group_id=args.group,
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      group_instance_id=args.instance_id, session_timeout_ms=args.session_ms,
                      heartbeat_interval_ms=1000, partition_assignment_strategy=[RangePartitionAssignor],
                      client_id=h.proc, request_timeout_ms=30000)
    holder["c"] = c
    c.subscribe([args.topic], listener=Listener())
    while not STOP.is_set():
        try:
            batch = c.poll(timeout_ms=500, max_records=500)
        except Exception as e:  # noqa: BLE001 - kafka-python 3 raises connection errors out of poll()
            logging.getLogger("chaos").warning("poll() failed: %r", e)
            time.sleep(0.5)
            continue
        while pending:
            assigned = pending.pop(0)
            try:
                got = [[tp.topic, tp.partition, c.committed(tp, timeout_ms=15000)] for tp in assigned]
                h.write("fetch_committed", group=args.group, member=MEMBER,
                        offsets=sorted([t, p, -1 if o is None else int(o)] for t, p, o in got))
            except Exception as e:  # noqa: BLE001 - not recorded when it fails
                logging.getLogger("chaos").warning("committed() failed: %r", e)
        if not batch:
            continue
        records = [[tp.topic, tp.partition, m.offset, (m.value or b"").decode()]
                   for tp, msgs in batch.items() for m in msgs]
        h.write("poll", group=args.group, member=MEMBER, generation=st.generation, records=records)
        positions = {tp: msgs[-1].offset + 1 for tp, msgs in batch.items() if msgs}
        offsets = sorted([tp.topic, tp.partition, o] for tp, o in positions.items())
        op = h.next_op()
        h.write("commit.invoke", op=op, group=args.group, member=MEMBER, generation=st.generation,
                offsets=offsets)
        try:
            c.commit(offsets={TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for t, p, o in offsets},
                     timeout_ms=15000)
        except definite as e:
            h.write("commit.fail", op=op, error=type(e).__name__)
            continue
        except Exception as e:  # noqa: BLE001 - timeouts, lost connections: outcome unknown
            h.write("commit.unknown", op=op, error=f"{type(e).__name__}: {e}"[:200])
            continue
        h.write("commit.ok", op=op, error=None)
    c.close(autocommit=False, timeout_ms=15000)
    h.write("leave", group=args.group, member=MEMBER, instance=args.instance_id)


ROLES: dict[str, Callable[[argparse.Namespace, HistoryWriter], None]] = {
    "producer": run_producer, "ck-consumer": run_ck_consumer, "kp-consumer": run_kp_consumer,
         "eos-worker": lambda a, h: eos_workload.run_eos_worker(a, h, STOP),
         "rc-reader": lambda a, h: eos_workload.run_rc_reader(a, h, STOP)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m chaos.workload")
    ap.add_argument("role", choices=sorted(ROLES))
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--proc", required=True)
    ap.add_argument("--history", required=True)
    ap.add_argument("--group", default="")
    ap.add_argument("--instance-id", default=None)
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--session-ms", type=int, default=10000)
    ap.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic",
                    help="ck-consumer: the group protocol (consumer: KIP-848)")
    ap.add_argument("--out-topic", default="", help="eos-worker: the topic it writes")
    ap.add_argument("--hang-s", type=float, default=eos_workload.HANG_S,
                    help="eos-worker: seconds without progress before its watchdog restarts it")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format=f"%(asctime)s {args.proc} %(levelname)s %(name)s %(message)s")
    # KCOORD_CHAOS_CLIENT_DEBUG=kafka.consumer.fetcher,kafka.cluster: DEBUG logs of those client loggers
    for name in filter(None, os.environ.get("KCOORD_CHAOS_CLIENT_DEBUG", "").split(",")):
        logging.getLogger(name).setLevel(logging.DEBUG)
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    global MEMBER
    MEMBER = member_name(args.proc, args.instance_id)
    h = HistoryWriter(args.history, args.proc)
    try:
        ROLES[args.role](args, h)
    finally:
        h.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
