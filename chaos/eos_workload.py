"""The exactly-once roles of the chaos run (``python -m chaos.workload eos-worker|rc-reader``).

- ``eos-worker``: a confluent-kafka consume-transform-produce loop. It reads the run's input topic
  in the group ``--group`` and, per batch, in one transaction: writes one output record per input
  record to ``--out-topic`` and commits the batch's input offsets (``send_offsets_to_transaction``).
  Its ``transactional.id`` is ``--instance-id``, the same in every incarnation, so a restarted
  worker fences the one before it. An output record's value names its input and its transaction:
  ``<input partition>:<input offset>:<input value>|<txn>`` where ``<txn>`` is ``<proc>#<n>``.
- ``rc-reader``: a ``read_committed`` consumer of the output topic (every partition from the
  start, no group), recording everything it reads: the checker's evidence that no aborted record
  was ever returned.

Events (``chaos/history.py``): ``txn.commit.invoke`` (``op, txn, outputs, records``: the batch's
input records), then one of ``txn.commit.ok`` (committed), ``txn.commit.fail`` (definitely not:
the transaction failed before EndTxn(commit) was sent, or was aborted) or ``txn.commit.unknown``
(the outcome is the coordinator's to decide); ``read`` (``records``: output records).

One transaction in ten is aborted on purpose after its output and offsets were sent (its input is
then processed again), so the output holds aborted records for the reader to never return.

Error handling is librdkafka's documented one: retriable errors retry the call, abortable ones
abort and rewind the consumer to the group's committed offsets, a fatal one (fenced) starts a
new producer and consumer. A worker that makes no progress for ``HANG_S`` (no transaction
finished, nor an idle poll with partitions assigned) dumps every thread's stack into its log and
exits 3 (``Watchdog``): the runner starts a new incarnation, which fences this one's transaction
as any restarted Kafka application does. Its clients log librdkafka's ``eos``, ``cgrp`` and
``broker`` debug contexts to the same log (stderr).
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import random
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from chaos.history import HistoryWriter

OUTPUT_TOPIC, OUTPUT_PARTITIONS = "chaos-output", 3
EOS_GROUP = "chaos-eos"
# Every call inside a transaction is bounded by 30 s, so a minute without progress is a hang:
# librdkafka's transactional requests can wait for ever once their coordinator's broker went away
# (its issues #5456, #5511). The worker then dumps its stacks and exits, and the run restarts it,
# as an operator's liveness probe would, soon enough for a bounded run to drain.
HANG_S = 60.0
BOUNDED_HANG_S = 40.0  # in a bounded run: above the 30 s timeouts of the workers' calls
PRODUCER_DEBUG = "eos,broker"  # librdkafka debug contexts (2.x): the transaction manager, connections
CONSUMER_DEBUG = "cgrp,eos,broker"  # and the group's joins, heartbeats and commits
HOLD_S = 0.3
ABORT_SHARE = 0.1  # of the transactions, aborted on purpose after their output and offsets were sent
LOG = logging.getLogger("chaos.eos")


def output_value(partition: int, offset: int, value: str, txn: str) -> str:
    return f"{partition}:{offset}:{value}|{txn}"


class Watchdog(threading.Thread):
    """Ends a worker that made no progress for ``limit`` seconds, so that a hang is never silent:
    it records the open transaction (if any) as unknown, logs why, dumps every thread's stack to
    ``out`` and exits 3. faulthandler's own timer backs it up ``margin`` seconds later: it runs
    in C without the GIL, so a worker stuck in C code that holds the GIL still leaves its stacks
    in its log and exits (1). The worker calls ``progress`` whenever it gets on."""

    def __init__(self, h: HistoryWriter, limit: float = HANG_S, *, out: TextIO | None = None, margin: float = 10.0,
                 clock: Callable[[], float] = time.monotonic, exit_: Callable[[int], None] = os._exit) -> None:
        super().__init__(daemon=True, name="eos-watchdog")
        self.h = h
        self.limit, self.margin = limit, margin
        self.out = out if out is not None else sys.stderr
        self.clock, self.exit = clock, exit_
        self.last = clock()
        self.doing = "starting"
        self.op: str | None = None  # the transaction whose outcome is not recorded yet
        self.stopped = threading.Event()
        self.progress("starting")

    def progress(self, doing: str, op: str | None = None) -> None:
        """The worker got on; it is now ``doing`` this, within transaction ``op`` if any."""
        self.last, self.doing, self.op = self.clock(), doing, op
        faulthandler.dump_traceback_later(self.limit + self.margin, exit=True, file=self.out)

    def check(self) -> bool:
        """Fire if the worker has made no progress for ``limit`` (False: it has)."""
        stuck = self.clock() - self.last
        if stuck <= self.limit:
            return False
        if self.op is not None:
            self.h.write("txn.commit.unknown", op=self.op, error=f"no progress for {stuck:.0f} s")
        LOG.error("watchdog: no progress for %.0f s while %s: dumping the stacks and exiting", stuck, self.doing)
        self.out.write(f"watchdog: no progress for {stuck:.0f} s while {self.doing}; every thread's stack:\n")
        self.out.flush()
        faulthandler.dump_traceback(file=self.out, all_threads=True)
        self.out.flush()
        logging.shutdown()
        self.exit(3)
        return True

    def stop(self) -> None:
        self.stopped.set()
        faulthandler.cancel_dump_traceback_later()

    def run(self) -> None:
        while not self.stopped.wait(min(1.0, self.limit / 4)):
            if self.check():
                return


def run_eos_worker(args: argparse.Namespace, h: HistoryWriter, stop: threading.Event) -> None:
    from confluent_kafka import (
        OFFSET_BEGINNING,
        Consumer,
        KafkaError,
        KafkaException,
        Producer,
        TopicPartition,
    )

    def clients() -> tuple[Any, Any]:
        # librdkafka's debug log (to stderr: the worker's log) of the transaction manager, the group
        # and the broker connections: what a hung worker waited for is then in its log
        consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "session.timeout.ms": args.session_ms,
                             "heartbeat.interval.ms": 1000, "client.id": h.proc, "debug": CONSUMER_DEBUG})
        producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": args.instance_id,
                             "linger.ms": 5, "transaction.timeout.ms": 20000, "client.id": h.proc,
                             "debug": PRODUCER_DEBUG})
        producer.init_transactions(60)
        consumer.subscribe([args.topic])
        return consumer, producer

    def rewind(consumer: Any) -> None:
        """Back to the group's committed offsets. librdkafka's committed() gives up on the first
        NOT_COORDINATOR after a coordinator move instead of looking the coordinator up again (its
        coordinator cache), so retriable errors are retried here for a while."""
        parts = consumer.assignment()
        if not parts:
            return
        again = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                 KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.UNSTABLE_OFFSET_COMMIT, KafkaError._TIMED_OUT,
                 KafkaError._TRANSPORT}
        deadline = time.monotonic() + 60
        while True:
            try:
                got = consumer.committed(parts, 30)
                break
            except KafkaException as e:
                err = e.args[0]
                if not (err.retriable() or err.code() in again) or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        for tp in got:
            start = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            consumer.seek(TopicPartition(tp.topic, tp.partition, start))

    rng = random.Random(h.proc)  # seeded: the incarnation's name
    dog = Watchdog(h, getattr(args, "hang_s", HANG_S))
    dog.start()
    dog.progress("starting the clients")  # init_transactions may hang too
    consumer, producer = clients()
    dog.progress("polling")
    logged: dict[str, float] = {}  # consumer error -> when last logged
    n = 0
    while not stop.is_set():
        polled = consumer.consume(num_messages=50, timeout=0.5)
        msgs = [m for m in polled if m.error() is None]
        for m in polled:
            err = m.error()
            if err is not None and time.monotonic() - logged.get(err.name(), -60.0) >= 10.0:
                logged[err.name()] = time.monotonic()
                LOG.warning("consumer error %s: %s", err.name(), err.str())
        if not msgs:
            if not polled and consumer.assignment():
                dog.progress("polling")  # caught up: nothing to read is no hang (no partitions is)
            continue
        n += 1
        txn = f"{h.proc}#{n}"
        op = h.next_op()
        dog.progress("in a transaction", op)
        records = [[m.topic(), m.partition(), m.offset(), (m.value() or b"").decode()] for m in msgs]
        h.write("txn.commit.invoke", op=op, group=args.group, txn=txn, outputs=len(msgs), records=records)
        sent_commit = must_rewind = False
        try:
            producer.begin_transaction()
            for _topic, p, o, value in records:
                producer.produce(args.out_topic, key=f"{p}:{o}".encode(), value=output_value(p, o, value, txn).encode())
            # the transform's work: holds the transaction open, so faults land inside transactions too
            time.sleep(rng.uniform(0, HOLD_S))
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            if rng.random() < ABORT_SHARE:  # the transform failed: its output must never be read
                producer.abort_transaction(30)
                h.write("txn.commit.fail", op=op, error="aborted by the worker")
                dog.progress("rewinding")
                must_rewind = True
            else:
                sent_commit = True
                while True:
                    try:
                        producer.commit_transaction(30)
                        break
                    except KafkaException as e:
                        if not e.args[0].retriable():
                            raise
                h.write("txn.commit.ok", op=op, error=None)
                dog.progress("polling")
        except KafkaException as e:
            err = e.args[0]
            if err.fatal():
                # fenced (or another fatal error): what EndTxn did, if it was sent, is unknown here
                h.write("txn.commit.unknown" if sent_commit else "txn.commit.fail", op=op, error=err.name())
                LOG.warning("fatal producer error %s: new producer and consumer", err.name())
                dog.progress("starting new clients")
                consumer.close()
                consumer, producer = clients()
            else:
                try:
                    producer.abort_transaction(30)
                    h.write("txn.commit.fail", op=op, error=err.name())
                    dog.progress("rewinding")
                except KafkaException as e2:
                    h.write("txn.commit.unknown" if sent_commit else "txn.commit.fail", op=op,
                            error=f"{err.name()}; abort: {e2.args[0].name()}")
                    # a producer that cannot abort is left to the next incarnation to fence
                    raise
                must_rewind = True
        if must_rewind:
            rewind(consumer)  # a failure here ends the process: never go on from a wrong position
        dog.progress("polling")
    dog.progress("closing")
    consumer.close()
    dog.stop()


def run_rc_reader(args: argparse.Namespace, h: HistoryWriter, stop: threading.Event) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": args.bootstrap, "group.id": f"{h.proc}-unused",
                  "isolation.level": "read_committed", "enable.auto.commit": False, "client.id": h.proc})
    dog = Watchdog(h)
    dog.start()
    meta = c.list_topics(args.topic, timeout=30)
    c.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in sorted(meta.topics[args.topic].partitions)])
    while not stop.is_set():
        dog.progress("reading")
        msgs = [m for m in c.consume(num_messages=500, timeout=0.5) if m.error() is None]
        if msgs:
            h.write("read", records=[[m.topic(), m.partition(), m.offset(), (m.value() or b"").decode()]
                                     for m in msgs])
    dog.progress("closing")
    c.close()
    dog.stop()
