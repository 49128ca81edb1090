"""``kcoord topics``: create / list / describe / alter / delete topics, as ``kafka-topics.sh`` does.

Everything goes through the Kafka protocol (CreateTopics, Metadata, CreatePartitions,
DeleteTopics), so it works
against Apache Kafka as well. Exit status: 0 on success, 1 when something failed.
"""

from __future__ import annotations

import argparse
from typing import Any

from cluster.tools.common import (
    ToolError,
    add_common,
    admin,
    admin_class,
    error,
    kafka_error,
    print_table,
    result,
    timeout_s,
    warn,
)

COMMAND = "topics"
OFFSETS_TOPIC = "__consumer_offsets"


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(COMMAND, help="create, list, describe, alter, delete topics", description=__doc__)
    sub = p.add_subparsers(dest="topics_cmd", required=True)

    pc = sub.add_parser("create", help="create a topic")
    add_common(pc)
    pc.add_argument("--topic", required=True)
    pc.add_argument("--partitions", type=int, default=None, help="default: the broker's num.partitions")
    pc.add_argument("--replication-factor", type=int, default=None, help="default: the broker's")
    pc.add_argument("--config", action="append", default=[], metavar="NAME=VALUE", help="topic config (repeatable)")
    pc.add_argument("--if-not-exists", action="store_true", help="no error if the topic exists")

    pl = sub.add_parser("list", help="list topic names")
    add_common(pl)
    pl.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")

    pd = sub.add_parser("describe", help="partitions, leaders, replicas, ISR")
    add_common(pd)
    pd.add_argument("--topic", action="append", help="topic (repeatable; default: all)")
    pd.add_argument("--exclude-internal", action="store_true")
    pd.add_argument("--under-replicated-partitions", action="store_true",
                    help="only partitions whose ISR is smaller than the replica set")

    pa = sub.add_parser("alter", help="grow a topic to more partitions")
    add_common(pa)
    pa.add_argument("--topic", required=True)
    pa.add_argument("--partitions", type=int, required=True, help="the new partition count (an increase)")

    pdel = sub.add_parser("delete", help="delete topics")
    add_common(pdel)
    pdel.add_argument("--topic", action="append", required=True)
    pdel.add_argument("--if-exists", action="store_true", help="no error if a topic does not exist")


def _metadata_topics(adm: Any, args: argparse.Namespace, names: list[str] | None) -> dict[str, Any]:
    """Topic metadata by name. Asks for ``__consumer_offsets`` by name too: some brokers leave it out of
    the all-topics answer."""
    if names:
        out = {}
        for n in names:
            md = adm.list_topics(topic=n, timeout=timeout_s(args))
            if n in md.topics:
                out[n] = md.topics[n]
        return out
    md = adm.list_topics(timeout=timeout_s(args))
    topics = dict(md.topics)
    if OFFSETS_TOPIC not in topics:
        extra = adm.list_topics(topic=OFFSETS_TOPIC, timeout=timeout_s(args)).topics.get(OFFSETS_TOPIC)
        if extra is not None and extra.error is None and extra.partitions:
            topics[OFFSETS_TOPIC] = extra
    return topics


def _is_internal(name: str) -> bool:
    return name.startswith("__")


def cmd_create(adm: Any, args: argparse.Namespace) -> int:
    NewTopic = admin_class("NewTopic")  # noqa: N806 - the library's class name
    configs = {}
    for item in args.config:
        if "=" not in item:
            raise ToolError(f"--config expects NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        configs[k.strip()] = v.strip()
    nt = NewTopic(args.topic, num_partitions=args.partitions if args.partitions is not None else -1,
                  replication_factor=args.replication_factor if args.replication_factor is not None else -1,
                  config=configs)
    for f in adm.create_topics([nt], request_timeout=timeout_s(args)).values():
        try:
            result(f, args)
        except Exception as e:  # noqa: BLE001
            name, msg = kafka_error(e)
            if args.if_not_exists and name == "TOPIC_ALREADY_EXISTS":
                return 0
            error(f"failed to create topic {args.topic}: {msg}")
            return 1
    print(f"Created topic {args.topic}.")
    return 0


def cmd_list(adm: Any, args: argparse.Namespace) -> int:
    for name in sorted(_metadata_topics(adm, args, None)):
        if args.exclude_internal and _is_internal(name):
            continue
        print(name)
    return 0


def cmd_describe(adm: Any, args: argparse.Namespace) -> int:
    topics = _metadata_topics(adm, args, args.topic)
    rc = 0
    for name in args.topic or []:
        t = topics.get(name)
        if t is None or t.error is not None:
            error(f"Topic '{name}' does not exist" + (f" ({t.error.str()})" if t is not None else ""))
            rc = 1
    summary: list[tuple[object, ...]] = []
    parts: list[tuple[object, ...]] = []
    for name in sorted(topics):
        t = topics[name]
        if t.error is not None or (args.exclude_internal and _is_internal(name)):
            continue
        ps = [t.partitions[i] for i in sorted(t.partitions)]
        rf = len(ps[0].replicas) if ps else 0
        shown = [p for p in ps if not args.under_replicated_partitions or len(p.isrs) < len(p.replicas)]
        summary.append((name, len(ps), rf))
        for p in shown:
            parts.append((name, p.id, p.leader if p.leader >= 0 else "none",
                          ",".join(str(r) for r in p.replicas), ",".join(str(r) for r in p.isrs)))
    if not args.under_replicated_partitions:
        print_table(["TOPIC", "PARTITION-COUNT", "REPLICATION-FACTOR"], summary)
        print()
    print_table(["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"], parts)
    return rc


def cmd_alter(adm: Any, args: argparse.Namespace) -> int:
    grow = admin_class("NewPartitions")(args.topic, args.partitions)
    for f in adm.create_partitions([grow], request_timeout=timeout_s(args)).values():
        try:
            result(f, args)
        except Exception as e:  # noqa: BLE001
            error(f"failed to alter topic {args.topic}: {kafka_error(e)[1]}")
            return 1
    print(f"Topic {args.topic} now has {args.partitions} partitions.")
    return 0


def cmd_delete(adm: Any, args: argparse.Namespace) -> int:
    rc = 0
    for name, f in adm.delete_topics(list(dict.fromkeys(args.topic)), request_timeout=timeout_s(args)).items():
        try:
            result(f, args)
            print(f"Deleted topic {name}.")
        except Exception as e:  # noqa: BLE001
            code, msg = kafka_error(e)
            if args.if_exists and code == "UNKNOWN_TOPIC_OR_PART":
                continue
            error(f"failed to delete topic {name}: {msg}")
            rc = 1
    return rc


HANDLERS = {"create": cmd_create, "list": cmd_list, "describe": cmd_describe, "alter": cmd_alter,
            "delete": cmd_delete}


def run(args: argparse.Namespace) -> int:
    try:
        return HANDLERS[args.topics_cmd](admin(args), args)
    except ToolError as e:
        error(str(e))
        return 1
    except Exception as e:  # noqa: BLE001
        from confluent_kafka import KafkaException

        if isinstance(e, KafkaException | TimeoutError | OSError):
            warn(f"Error: topics command failed: {e}")
            return 1
        raise
