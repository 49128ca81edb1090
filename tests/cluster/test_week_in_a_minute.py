"""A week of compaction and retention in a minute, on a 3-node cluster whose node settings shrink
Kafka's time scales about 50,000 times (segments roll after 300 ms instead of 7 days, tombstones
and markers live 1.5 s instead of a day, time retention is 3 s): topics created as Kafka Streams
and Connect create theirs (with only their policy; everything else from the node's defaults) are
written in the way those applications write them:

- a Streams changelog (3 partitions): counts per key written in transactions, some aborted, keys
  deleted and written again;
- Connect's config topic (one partition): connector configs written, rewritten and deleted with
  tombstones; and its offsets topic (5 partitions): a source's offsets, rewritten at each flush;
- a plain ``delete`` topic beside them, which time retention empties as it should.

The cleaner and retention run many times while they are written; then every node is killed and
started again, and a reader from the start (read_committed) finds every key's latest committed
value at the offset it was acknowledged at, no deleted key, no aborted value, and far fewer
records than were written.
"""

from __future__ import annotations

import random
import re
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.cluster_harness import Cluster, wait_for

pytestmark = pytest.mark.cluster

WEEK: dict[str, object] = {"log.roll.ms": 300, "log.cleaner.backoff.ms": 200, "log.cleaner.delete.retention.ms": 1500,
        "log.cleaner.min.cleanable.ratio": 0.01, "log.retention.ms": 3000,
        "log.retention.check.interval.ms": 500, "group.initial.rebalance.delay.ms": 0}
PASS = re.compile(r"event=log_compacted dir=")

Model = dict[tuple[str, int, bytes], tuple[int, bytes | None]]  # (topic, partition, key) -> (offset, value)


class Writer:
    """Writes as the applications do and keeps the model: each key's last acknowledged value."""

    def __init__(self, bootstrap: str, seed: int) -> None:
        self.rng = random.Random(seed)
        self.model: Model = {}
        self.aborted: set[bytes] = set()
        self.written = 0
        self.plain = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                               "linger.ms": 5})
        self.txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"app-{seed}", "linger.ms": 5})
        self.txn.init_transactions(30)
        self.counts: dict[bytes, int] = {}

    def _acked(self, err: object, msg: object) -> None:
        assert err is None, err
        m = msg
        key = (m.topic(), m.partition(), m.key())  # type: ignore[attr-defined]
        self.model[key] = max(self.model.get(key, (-1, None)), (m.offset(), m.value()))  # type: ignore[attr-defined]

    def changelog_round(self, topic: str) -> None:
        """One Streams commit: counts of a few keys in a transaction; one in eight aborted; now
        and then a key deleted (a window or session store's tombstone)."""
        abort = self.rng.random() < 0.125
        self.txn.begin_transaction()
        for _ in range(8):
            k = b"word-%d" % self.rng.randrange(40)
            if abort:
                value: bytes | None = b"aborted-%d" % self.written
                self.aborted.add(value)
                self.txn.produce(topic, key=k, value=value)
            elif self.rng.random() < 0.05:
                self.counts.pop(k, None)
                self.txn.produce(topic, key=k, value=None, on_delivery=self._acked)
            else:
                self.counts[k] = self.counts.get(k, 0) + 1
                self.txn.produce(topic, key=k, value=b"%d" % self.counts[k], on_delivery=self._acked)
            self.written += 1
        if abort:
            self.txn.flush(10)  # the aborted records reach the log before their marker
            self.txn.abort_transaction(30)
        else:
            self.txn.commit_transaction(30)

    def connect_round(self, configs: str, offsets: str, n: int) -> None:
        """A worker's offset flush, and every few rounds a connector created, reconfigured or deleted."""
        for task in range(10):
            self.plain.produce(offsets, key=b'["src-%d",{"file":"f"}]' % task, partition=task % 5,
                               value=b'{"position":%d}' % (n * 100 + task), on_delivery=self._acked)
        if n % 3 == 0:
            name = b"connector-conn-%d" % self.rng.randrange(6)
            value = None if self.rng.random() < 0.3 else b'{"properties":{"round":"%d"}}' % n
            self.plain.produce(configs, key=name, value=value, on_delivery=self._acked)
        self.written += 11
        self.plain.poll(0)


def _read(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int, bytes | None, bytes | None]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[tuple[int, int, bytes | None, bytes | None]] = []
        last = {p: -1 for p in range(partitions)}
        deadline = time.monotonic() + 30
        idle = time.monotonic()
        # a partition whose end is a marker never yields its last offset: stop once quiet
        while any(last[p] < ends[p] - 1 for p in last) and time.monotonic() < deadline \
                and time.monotonic() - idle < 3:
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                idle = time.monotonic()
                last[m.partition()] = m.offset()
                out.append((m.partition(), m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


def _check(bootstrap: str, topic: str, partitions: int, w: Writer) -> int:
    got = _read(bootstrap, topic, partitions)
    per_part: dict[int, list[int]] = {}
    latest: dict[tuple[int, bytes | None], tuple[int, bytes | None]] = {}
    for p, o, k, v in got:
        per_part.setdefault(p, []).append(o)
        latest[(p, k)] = (o, v)
        assert v not in w.aborted, (topic, p, o, v)
    for offsets in per_part.values():
        assert offsets == sorted(set(offsets))
    for (t, p, k), (offset, value) in w.model.items():
        if t != topic:
            continue
        if value is None:  # deleted: the delete itself, until a pass past delete.retention.ms removes it
            assert latest.get((p, k), (offset, None)) == (offset, None), (topic, p, k, latest.get((p, k)))
        else:
            assert latest.get((p, k)) == (offset, value), (topic, p, k, latest.get((p, k)), (offset, value))
    return len(got)


def test_a_week_of_compaction_and_retention_in_a_minute_keeps_every_latest_value(tmp_path: Path) -> None:
    seed = int(time.time())
    print(f"seed {seed}")
    c = Cluster(tmp_path, settings=WEEK).start()
    try:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        topics = {"app-store-changelog": (3, "compact"), "connect-configs": (1, "compact"),
                  "connect-offsets": (5, "compact"), "events": (1, "delete")}
        for f in admin.create_topics([NewTopic(t, n, 3, config={"cleanup.policy": policy})
                                      for t, (n, policy) in topics.items()]).values():
            f.result(timeout=30)
        w = Writer(c.bootstrap, seed)
        events = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
        started = time.monotonic()
        n = 0
        while time.monotonic() - started < 20:  # 20 s: about 12 days at this scale
            w.changelog_round("app-store-changelog")
            w.connect_round("connect-configs", "connect-offsets", n)
            events.produce("events", value=b"e%d" % n)
            events.poll(0)
            n += 1
            time.sleep(0.05)
        assert w.plain.flush(30) == 0 and events.flush(30) == 0
        time.sleep(0.4)  # then one more record each, newer than segment.ms: the last segments roll
        w.changelog_round("app-store-changelog")
        w.connect_round("connect-configs", "connect-offsets", n)
        assert w.plain.flush(30) == 0
        passes = [len(PASS.findall(c.log_text(i))) for i in range(3)]
        print(f"{n} rounds, {w.written} records written, compaction passes per node {passes}")
        assert min(passes) >= 20, passes  # compaction ran all along, on every replica
        # retention ran too: the delete topic's old records are gone, its start moved past them
        wait_for(lambda: events_start(c.bootstrap) > 0, 30, "time retention on the delete topic")
        # the deletes' horizon passes (1.5 s), and a pass after it removes them
        time.sleep(3)
        c.kill_all()  # every node at once, with no clean stop
        c.start()
        compacted = [(t, parts) for t, (parts, policy) in topics.items() if policy == "compact"]
        deadline = time.monotonic() + 60
        while True:  # until the nodes lead again and the readers get through
            try:
                read = sum(_check(c.bootstrap, t, parts, w) for t, parts in compacted)
                break
            except (AssertionError, KafkaException):
                if time.monotonic() > deadline:
                    raise  # the last difference, named
                time.sleep(1)
        print(f"read back {read} records of {w.written} written")
        assert read < w.written / 4, (read, w.written)
    finally:
        c.kill_all()


def events_start(bootstrap: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "start"})
    try:
        return int(c.get_watermark_offsets(TopicPartition("events", 0), timeout=10)[0])
    finally:
        c.close()
