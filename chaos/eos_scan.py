"""``python -m chaos.eos_scan BOOTSTRAP INPUT_TOPIC OUTPUT_TOPIC OUT``: the end state of an
exactly-once run, read once every fault is healed and every worker has stopped.

One JSON line per record to OUT (``eos-final.jsonl``): ``scan, partition, offset, value`` where
``scan`` is ``input`` (the input topic, everything), ``committed`` (the output topic as a
``read_committed`` consumer reads it) or ``all`` (the output topic ``read_uncommitted``: aborted
records too). Then one ``ends`` line per output partition with its high watermark and last
stable offset, so a transaction left open (an LSO below the high watermark) is visible.

The ends are read first, once no transaction is open or ``OPEN_WAIT_S`` has passed. Each scan
reads until every partition is at its end, or nothing new came for ``SETTLE_S``: a consumer
never returns the control record (a transaction marker) that may end a partition.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

SETTLE_S = 5.0
OPEN_WAIT_S = 45.0  # > the workers' transaction.timeout.ms (20 s): the coordinator has aborted by then


def _scan(bootstrap: str, topic: str, isolation: str, timeout: float = 180.0) -> list[tuple[int, int, str]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"eos-scan-{isolation}", "isolation.level": isolation,
                  "enable.auto.commit": False, "log_level": 3})
    try:
        parts = sorted(c.list_topics(topic, timeout=30).topics[topic].partitions)
        highs = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in parts}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        got: list[tuple[int, int, str]] = []
        nxt = dict.fromkeys(parts, 0)
        deadline = time.monotonic() + timeout
        last_new = time.monotonic()
        while time.monotonic() < deadline:
            msgs = [m for m in c.consume(num_messages=1000, timeout=0.5) if m.error() is None]
            for m in msgs:
                p, o = int(m.partition() or 0), int(m.offset() or 0)
                got.append((p, o, (m.value() or b"").decode()))
                nxt[p] = o + 1
            if msgs:
                last_new = time.monotonic()
            done = all(nxt[p] >= highs[p] for p in parts)
            if done or time.monotonic() - last_new > SETTLE_S:
                break
        return got
    finally:
        c.close()


def _ends(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka import admin as kadmin

    admin = kadmin.AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    parts = sorted(admin.list_topics(topic, timeout=30).topics[topic].partitions)
    spec: Any = kadmin.OffsetSpec  # type: ignore[attr-defined]
    out = []
    for p in parts:
        tp = TopicPartition(topic, p)
        hw = admin.list_offsets({tp: spec.latest()}, request_timeout=20)[tp].result(timeout=30).offset
        lso = admin.list_offsets({tp: spec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED,
                                 request_timeout=20)[tp].result(timeout=30).offset
        out.append({"scan": "ends", "partition": p, "high_watermark": int(hw), "last_stable_offset": int(lso)})
    return out


def settled_ends(bootstrap: str, topic: str, wait_s: float = OPEN_WAIT_S) -> list[dict[str, Any]]:
    """The output's ends once no transaction is open (or after ``wait_s``: then an LSO below the
    high watermark is a transaction that outlived its timeout, a hanging transaction)."""
    deadline = time.monotonic() + wait_s
    while True:
        ends = _ends(bootstrap, topic)
        if all(e["last_stable_offset"] >= e["high_watermark"] for e in ends) or time.monotonic() > deadline:
            return ends
        time.sleep(1.0)


def scan(bootstrap: str, input_topic: str, output_topic: str, out: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    ends = settled_ends(bootstrap, output_topic)
    with open(out, "w", encoding="utf-8") as f:
        for name, topic, isolation in (("input", input_topic, "read_uncommitted"),
                                       ("committed", output_topic, "read_committed"),
                                       ("all", output_topic, "read_uncommitted")):
            rows = _scan(bootstrap, topic, isolation)
            counts[name] = len(rows)
            for p, o, v in rows:
                f.write(json.dumps({"scan": name, "partition": p, "offset": o, "value": v}) + "\n")
        for e in ends:
            f.write(json.dumps(e) + "\n")
    counts["open_partitions"] = sum(e["last_stable_offset"] < e["high_watermark"] for e in ends)
    return counts


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    print(json.dumps(scan(*args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
