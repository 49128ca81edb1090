"""Demo workload for docker-compose's ``demo`` profile: produce a message a second, consume and commit.

Environment: BOOTSTRAP_SERVERS, DEMO_TOPIC (default ``demo``), DEMO_GROUP (default ``demo-group``).
"""

from __future__ import annotations

import os
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def main() -> None:
    bootstrap = os.environ.get("BOOTSTRAP_SERVERS", "kcoord-0:9092")
    topic = os.environ.get("DEMO_TOPIC", "demo")
    group = os.environ.get("DEMO_GROUP", "demo-group")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)]).values():
        try:
            fut.result(timeout=30)
        except Exception as e:  # noqa: BLE001 - already exists is fine
            print(f"create topic: {e}", flush=True)
    producer = Producer({"bootstrap.servers": bootstrap})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    sent = received = 0
    last = 0.0
    while True:
        now = time.time()
        if now - last >= 1.0:
            producer.produce(topic, f"hello {sent}".encode())
            producer.poll(0)
            sent, last = sent + 1, now
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            received += 1
            print(f"consumed {msg.topic()}-{msg.partition()}@{msg.offset()}: {msg.value()!r} "
                  f"(sent {sent}, received {received})", flush=True)


if __name__ == "__main__":
    main()
