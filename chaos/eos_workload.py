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
new producer and consumer. A step that hangs for ``HANG_S`` ends the process: the runner starts
a new incarnation, which fences this one's transaction as any restarted Kafka application does.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import threading
import time
from typing import Any

from chaos.history import HistoryWriter

OUTPUT_TOPIC, OUTPUT_PARTITIONS = "chaos-output", 3
EOS_GROUP = "chaos-eos"
HANG_S = 120.0
HOLD_S = 0.3
ABORT_SHARE = 0.1  # of the transactions, aborted on purpose after their output and offsets were sent
LOG = logging.getLogger("chaos.eos")


def output_value(partition: int, offset: int, value: str, txn: str) -> str:
    return f"{partition}:{offset}:{value}|{txn}"


class _Stall(threading.Thread):
    """Ends the process when one transaction has been under way for ``HANG_S``."""

    def __init__(self, h: HistoryWriter) -> None:
        super().__init__(daemon=True, name="eos-stall")
        self.h = h
        self.since: float | None = None
        self.op: str | None = None

    def run(self) -> None:
        while True:
            time.sleep(1.0)
            since = self.since
            if since is not None and time.monotonic() - since > HANG_S:
                if self.op is not None:
                    self.h.write("txn.commit.unknown", op=self.op, error=f"hung for {HANG_S:.0f} s")
                LOG.error("a transaction step hung for %.0f s: exiting", HANG_S)
                logging.shutdown()
                os._exit(3)


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
        consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "session.timeout.ms": args.session_ms,
                             "heartbeat.interval.ms": 1000, "client.id": h.proc})
        producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": args.instance_id,
                             "linger.ms": 5, "transaction.timeout.ms": 20000, "client.id": h.proc})
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
    stall = _Stall(h)
    stall.start()
    stall.since = time.monotonic()  # init_transactions may hang too
    consumer, producer = clients()
    stall.since = None
    n = 0
    while not stop.is_set():
        msgs = [m for m in consumer.consume(num_messages=50, timeout=0.5) if m.error() is None]
        if not msgs:
            continue
        n += 1
        txn = f"{h.proc}#{n}"
        op = h.next_op()
        stall.since, stall.op = time.monotonic(), op
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
        except KafkaException as e:
            err = e.args[0]
            if err.fatal():
                # fenced (or another fatal error): what EndTxn did, if it was sent, is unknown here
                h.write("txn.commit.unknown" if sent_commit else "txn.commit.fail", op=op, error=err.name())
                LOG.warning("fatal producer error %s: new producer and consumer", err.name())
                consumer.close()
                stall.since, stall.op = time.monotonic(), None
                consumer, producer = clients()
            else:
                try:
                    producer.abort_transaction(30)
                    h.write("txn.commit.fail", op=op, error=err.name())
                except KafkaException as e2:
                    h.write("txn.commit.unknown" if sent_commit else "txn.commit.fail", op=op,
                            error=f"{err.name()}; abort: {e2.args[0].name()}")
                    # a producer that cannot abort is left to the next incarnation to fence
                    raise
                must_rewind = True
        if must_rewind:
            rewind(consumer)  # a failure here ends the process: never go on from a wrong position
        stall.since, stall.op = None, None
    consumer.close()


def run_rc_reader(args: argparse.Namespace, h: HistoryWriter, stop: threading.Event) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": args.bootstrap, "group.id": f"{h.proc}-unused",
                  "isolation.level": "read_committed", "enable.auto.commit": False, "client.id": h.proc})
    meta = c.list_topics(args.topic, timeout=30)
    c.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in sorted(meta.topics[args.topic].partitions)])
    while not stop.is_set():
        msgs = [m for m in c.consume(num_messages=500, timeout=0.5) if m.error() is None]
        if msgs:
            h.write("read", records=[[m.topic(), m.partition(), m.offset(), (m.value() or b"").decode()]
                                     for m in msgs])
    c.close()
