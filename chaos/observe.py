"""``python -m chaos.observe``: the run's view of the groups through the Kafka admin API.

- ``sample OUT BOOTSTRAP GROUP...``: every ~2 s, one line per group appended to OUT
  (``groups.jsonl``): ``t, group, describe: {state, protocol, coordinator, members:
  [{member_id, client_id, instance_id, partitions}]}, committed: {partition: offset}``,
  or ``error`` when the cluster did not answer. Until SIGTERM.
- ``state BOOTSTRAP GROUP... [--describe]``: prints one JSON object: ``end_offsets``,
  ``committed`` (and ``describe``).

Run as a child of the runner on purpose: coordinator-routed admin requests pending while
brokers die have aborted the whole process inside librdkafka (assertion in
``rd_kafka_enq_once_del_source_return``); in a child that only costs one sample.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from typing import Any

from chaos.history import run_clock

TOPIC = "chaos-topic"
PARTITIONS = 6


def admin_client(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000, "log_level": 2})


def committed_offsets(admin: Any, group: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    req = ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    res = admin.list_consumer_group_offsets([req], request_timeout=10)[group].result(timeout=20)
    return {tp.partition: tp.offset for tp in res.topic_partitions}


def end_offsets(admin: Any) -> dict[int, int]:
    from confluent_kafka import TopicPartition
    from confluent_kafka import admin as kadmin

    spec: Any = kadmin.OffsetSpec  # type: ignore[attr-defined]
    req = {TopicPartition(TOPIC, p): spec.latest() for p in range(PARTITIONS)}
    futs = admin.list_offsets(req, request_timeout=10)
    return {tp.partition: int(f.result(timeout=20).offset) for tp, f in futs.items()}


def describe(admin: Any, group: str) -> dict[str, Any]:
    d = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=20)
    return {
        "state": str(d.state).rsplit(".", 1)[-1], "protocol": d.partition_assignor,
        "coordinator": d.coordinator.id if d.coordinator is not None else None,
        "members": [{"member_id": m.member_id, "client_id": m.client_id, "instance_id": m.group_instance_id,
                     "partitions": sorted(tp.partition for tp in (m.assignment.topic_partitions or []))}
                    for m in d.members],
    }


def sample(out_path: str, bootstrap: str, groups: list[str]) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    admin = admin_client(bootstrap)
    with open(out_path, "a", buffering=1, encoding="utf-8") as out:
        while not stop.wait(2.0):
            for g in groups:
                row: dict[str, Any] = {"t": round(run_clock(), 6), "group": g}
                try:
                    row["describe"] = describe(admin, g)
                    row["committed"] = committed_offsets(admin, g)
                except Exception as e:  # noqa: BLE001 - unavailable during faults is data too
                    row["error"] = f"{type(e).__name__}: {e}"[:300]
                out.write(json.dumps(row, separators=(",", ":")) + "\n")
    return 0


def state(bootstrap: str, groups: list[str], with_describe: bool) -> int:
    admin = admin_client(bootstrap)
    result: dict[str, Any] = {}
    try:
        result["end_offsets"] = end_offsets(admin)
        result["committed"] = {g: committed_offsets(admin, g) for g in groups}
        if with_describe:
            result["describe"] = {g: describe(admin, g) for g in groups}
    except Exception as e:  # noqa: BLE001 - reported to the runner, which retries
        result["error"] = f"{type(e).__name__}: {e}"[:300]
    print(json.dumps(result))
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["sample"]:
        return sample(argv[1], argv[2], argv[3:])
    if argv[:1] == ["state"]:
        rest = [a for a in argv[2:] if a != "--describe"]
        return state(argv[1], rest, "--describe" in argv)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
