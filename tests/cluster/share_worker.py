"""A librdkafka share consumer (confluent-kafka's preview ShareConsumer, which speaks the share
APIs at v1) for the share group tests: the same rules and output as ``java/ShareConsume.java``.

    python -m tests.cluster.share_worker BOOTSTRAP TOPIC GROUP QUIET_S LIMIT_S
"""

from __future__ import annotations

import sys
import time
from typing import Any

from confluent_kafka import AcknowledgeType, ShareConsumer


def main(bootstrap: str, topic: str, group: str, quiet: float, limit: float) -> None:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})

    def committed(offsets: dict[Any, set[int]], error: Any) -> None:
        for tp, done in offsets.items():
            for o in sorted(done):
                print(f"{'DONE' if error is None else 'FAILED'} {tp.partition} {o}", flush=True)

    consumer.set_acknowledgement_commit_callback(committed)
    consumer.subscribe([topic])
    start = last = time.monotonic()
    seen = False
    try:
        while time.monotonic() - start < limit:
            batch = consumer.poll(0.5)
            got = False
            for m in batch:
                if m.error() is not None:
                    continue
                got = True
                count = m.delivery_count() or 0
                value = (m.value() or b"").decode()
                kind = AcknowledgeType.ACCEPT
                if value.startswith("release") and count == 1:
                    kind = AcknowledgeType.RELEASE
                elif value.startswith("reject"):
                    kind = AcknowledgeType.REJECT
                consumer.acknowledge(m, kind)
                print(f"ACK {m.partition()} {m.offset()} {kind.name.lower()} {count}", flush=True)
            if got:
                consumer.commit_sync()
                seen, last = True, time.monotonic()
            elif seen and time.monotonic() - last > quiet:
                break
    finally:
        consumer.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]))
