"""``kcoord groups``: what Kafka's ``kafka-consumer-groups.sh`` does, over the Kafka protocol.

Subcommands: ``list`` (``--state``), ``describe`` (offsets by default, ``--members`` [``--verbose``],
``--state``), ``delete``, ``delete-offsets`` and ``reset-offsets`` (``--to-earliest``, ``--to-latest``,
``--to-current``, ``--to-offset N``, ``--shift-by N``, ``--to-datetime``, ``--by-duration``; scope
``--topic T[:P,P]`` or ``--all-topics``; ``--dry-run`` (default) or ``--execute``). Column names and
messages follow Kafka's tool. Exit status: 0 on success, 1 when something failed.
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from cluster.tools.common import (
    ToolError,
    add_common,
    admin,
    admin_class,
    consumer_group_describe,
    error,
    error_text,
    kafka_error,
    offset_delete,
    print_table,
    result,
    timeout_s,
    warn,
)

COMMAND = "groups"

TP = tuple[str, int]

KAFKA_STATES = {
    "STABLE": "Stable",
    "EMPTY": "Empty",
    "DEAD": "Dead",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "UNKNOWN": "Unknown",
}
_INACTIVE = ("Empty", "Dead")
_REBALANCING = ("PreparingRebalance", "CompletingRebalance")


def kafka_state(state: Any) -> str:
    """confluent-kafka's ConsumerGroupState -> Kafka's name (``Stable``, ``PreparingRebalance`` ...)."""
    name = getattr(state, "name", None) or str(state)
    return KAFKA_STATES.get(name.upper(), name)


def _state_enum(name: str) -> Any:
    from confluent_kafka import ConsumerGroupState

    wanted = name.strip().lower()
    for member_name, kafka_name in KAFKA_STATES.items():
        if wanted in (kafka_name.lower(), member_name.lower()):
            return ConsumerGroupState[member_name]
    raise ToolError(f"unknown group state {name!r}; valid: {', '.join(v for v in KAFKA_STATES.values())}")


# ------------------------------------------------------------------ argument parsing


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(COMMAND, help="list, describe, delete consumer groups; reset or delete offsets",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="groups_cmd", required=True)

    pl = sub.add_parser("list", help="list groups")
    add_common(pl)
    pl.add_argument("--state", nargs="?", const="", default=None, metavar="STATE[,STATE]",
                    help="show the STATE column; with values, only groups in those states")

    pd = sub.add_parser("describe", help="describe groups: offsets and lag (default), --members or --state")
    add_common(pd)
    _add_group_scope(pd)
    mode = pd.add_mutually_exclusive_group()
    mode.add_argument("--members", action="store_true", help="one row per member")
    mode.add_argument("--state", action="store_true", help="one row per group: coordinator, strategy, state")
    mode.add_argument("--offsets", action="store_true", help="offsets and lag per partition (the default)")
    pd.add_argument("--verbose", action="store_true",
                    help="with --members: the assignment of each member (and, in a consumer group, its epoch and "
                         "target assignment); with --state: a consumer group's epochs")

    pdel = sub.add_parser("delete", help="delete groups (only empty ones, as Kafka)")
    add_common(pdel)
    _add_group_scope(pdel)

    pdo = sub.add_parser("delete-offsets", help="delete a group's committed offsets of some topics")
    add_common(pdo)
    pdo.add_argument("--group", required=True)
    pdo.add_argument("--topic", action="append", required=True, metavar="TOPIC[:P,P]")

    pr = sub.add_parser("reset-offsets", help="reset a group's committed offsets (group must be inactive)")
    add_common(pr)
    _add_group_scope(pr)
    scope = pr.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC[:P,P]")
    scope.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for")
    spec = pr.add_mutually_exclusive_group(required=True)
    spec.add_argument("--to-earliest", action="store_true")
    spec.add_argument("--to-latest", action="store_true")
    spec.add_argument("--to-current", action="store_true")
    spec.add_argument("--to-offset", type=int, metavar="N")
    spec.add_argument("--shift-by", type=int, metavar="N")
    spec.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss[TZ]")
    spec.add_argument("--by-duration", metavar="PnDTnHnMnS")
    act = pr.add_mutually_exclusive_group()
    act.add_argument("--dry-run", action="store_true", help="print the new offsets only (the default)")
    act.add_argument("--execute", action="store_true", help="commit the new offsets")


def _add_group_scope(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--group", action="append", metavar="GROUP", help="a group id (repeatable)")
    g.add_argument("--all-groups", action="store_true")


def parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    topic, sep, parts = spec.partition(":")
    if not topic:
        raise ToolError(f"bad --topic {spec!r}")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(x) for x in parts.split(",") if x.strip()})
    except ValueError:
        raise ToolError(f"bad partition list in --topic {spec!r}") from None


# ------------------------------------------------------------------ protocol helpers


def _list_groups(adm: Any, args: argparse.Namespace, states: set[Any] | None = None) -> list[Any]:
    kwargs: dict[str, Any] = {"request_timeout": timeout_s(args)}
    if states:
        kwargs["states"] = states
    res = result(adm.list_consumer_groups(**kwargs), args)
    for e in getattr(res, "errors", None) or []:
        warn(f"Warning: {e}")
    return list(res.valid)


def _group_ids(adm: Any, args: argparse.Namespace) -> list[str]:
    if getattr(args, "all_groups", False):
        return sorted(g.group_id for g in _list_groups(adm, args))
    return list(dict.fromkeys(args.group))


def _describe(adm: Any, args: argparse.Namespace, groups: list[str]) -> dict[str, Any]:
    if not groups:
        return {}
    futures = adm.describe_consumer_groups(groups, request_timeout=timeout_s(args))
    return {g: result(f, args) for g, f in futures.items()}


def _committed(adm: Any, args: argparse.Namespace, group: str) -> dict[TP, int]:
    """The group's committed offsets (only partitions that have one)."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = adm.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                              request_timeout=timeout_s(args))
    out: dict[TP, int] = {}
    for f in futures.values():
        for tp in result(f, args).topic_partitions or []:
            if tp.error is None and tp.offset >= 0:
                out[(tp.topic, tp.partition)] = tp.offset
    return out


def list_offsets(adm: Any, args: argparse.Namespace, tps: Iterable[TP], spec: Any) -> dict[TP, int]:
    """ListOffsets for each partition: ``spec`` is an OffsetSpec. Failed partitions are left out."""
    from confluent_kafka import TopicPartition

    wanted = {TopicPartition(t, p): spec for t, p in sorted(set(tps))}
    if not wanted:
        return {}
    futures = adm.list_offsets(wanted, request_timeout=timeout_s(args))
    out: dict[TP, int] = {}
    for tp, f in futures.items():
        try:
            out[(tp.topic, tp.partition)] = int(result(f, args).offset)
        except Exception as e:  # noqa: BLE001 - report and go on with the other partitions
            warn(f"Warning: cannot list offsets of {tp.topic}-{tp.partition}: {e}")
    return out


def _end_offsets(adm: Any, args: argparse.Namespace, tps: Iterable[TP]) -> dict[TP, int]:
    return list_offsets(adm, args, tps, admin_class("OffsetSpec").latest())


def topic_partitions(adm: Any, args: argparse.Namespace, topic: str) -> list[int]:
    md = adm.list_topics(topic=topic, timeout=timeout_s(args))
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        raise ToolError(f"topic {topic!r} does not exist" + (f" ({t.error})" if t is not None else ""))
    return sorted(t.partitions)


def _assignment(member: Any) -> list[TP]:
    a = getattr(member, "assignment", None)
    return sorted((tp.topic, tp.partition) for tp in (getattr(a, "topic_partitions", None) or []))


def format_assignment(tps: list[TP]) -> str:
    if not tps:
        return "-"
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    return ",".join(f"{t}({','.join(str(p) for p in sorted(ps))})" for t, ps in sorted(by_topic.items()))


# ------------------------------------------------------------------ commands


def cmd_list(adm: Any, args: argparse.Namespace) -> int:
    if args.state is None:
        for g in sorted(_list_groups(adm, args), key=lambda g: g.group_id):
            print(g.group_id)
        return 0
    states = {_state_enum(s) for s in args.state.split(",") if s.strip()}
    groups = _list_groups(adm, args, states or None)
    names = {kafka_state(s) for s in states}
    rows = [(g.group_id, kafka_state(g.state)) for g in sorted(groups, key=lambda g: g.group_id)
            if not names or kafka_state(g.state) in names]
    print_table(["GROUP", "STATE"], rows)
    return 0


def cmd_describe(adm: Any, args: argparse.Namespace) -> int:
    groups = _group_ids(adm, args)
    rc = 0
    for i, (g, d) in enumerate(_describe(adm, args, groups).items()):
        if i:
            print()
        state = kafka_state(d.state)
        if state == "Dead":
            error(f"Consumer group '{g}' does not exist.")
            rc = 1
            continue
        modern = _is_consumer_group(d) and args.verbose
        described = _consumer_describe(args, g, d) if modern else None
        if args.state:
            c = d.coordinator
            coordinator = f"{c.host}:{c.port} ({c.id})" if c is not None else "-"
            row: tuple[object, ...] = (g, coordinator, d.partition_assignor or "", state)
            if described is not None:
                print_table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                             "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"],
                            [(*row, described.group_epoch, described.assignment_epoch, len(d.members))])
            else:
                print_table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                            [(*row, len(d.members))])
            continue
        if state in _REBALANCING:
            warn(f"Warning: Consumer group '{g}' is rebalancing.")
        if args.members and described is not None:
            _print_consumer_members(g, d, described)
            continue
        if args.members:
            if not d.members:
                warn(f"Consumer group '{g}' has no active members.")
            cols = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
            if args.verbose:
                cols = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                        "ASSIGNMENT"]
            rows: list[tuple[object, ...]] = []
            for m in sorted(d.members, key=lambda m: (-len(_assignment(m)), m.member_id)):
                tps = _assignment(m)
                if args.verbose:
                    rows.append((g, m.member_id, m.group_instance_id, m.host, m.client_id, len(tps),
                                 format_assignment(tps)))
                else:
                    rows.append((g, m.member_id, m.host, m.client_id, len(tps)))
            print_table(cols, rows)
            continue
        rc |= _describe_offsets(adm, args, g, d, state)
    return rc


def _is_consumer_group(d: Any) -> bool:
    """A group of the consumer protocol (KIP-848), as confluent-kafka reports its type."""
    return getattr(getattr(d, "type", None), "name", "") == "CONSUMER"


def _consumer_describe(args: argparse.Namespace, g: str, d: Any) -> Any:
    """The coordinator's own description (epochs, targets); None if it cannot be had."""
    c = d.coordinator
    if c is None:
        return None
    try:
        described = consumer_group_describe(c.host, c.port, g, timeout_s(args))
    except (OSError, ValueError, ToolError) as e:
        warn(f"Warning: ConsumerGroupDescribe to {c.host}:{c.port} failed: {e}")
        return None
    if described.error_code.value != 0:
        warn(f"Warning: ConsumerGroupDescribe of '{g}' failed: {error_text(described.error_code.value)}")
        return None
    return described


def consumer_assignment(parts: Any) -> str:
    """Kafka 4's assignment text: ``topic:0,1;other:2``."""
    text = ";".join(f"{tp.topic_name}:{','.join(str(p) for p in sorted(tp.partitions))}"
                    for tp in sorted(parts.topic_partitions, key=lambda tp: tp.topic_name) if tp.partitions)
    return text or "-"


def _print_consumer_members(g: str, d: Any, described: Any) -> None:
    """``--members --verbose`` of a consumer group, with Kafka 4's columns: each member's epoch and
    current assignment against the group's target epoch and the member's target assignment."""
    if not described.members:
        warn(f"Consumer group '{g}' has no active members.")
    static = any(m.instance_id for m in described.members)
    cols = ["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if static else []), "HOST", "CLIENT-ID", "#PARTITIONS",
            "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    rows: list[tuple[object, ...]] = []
    for m in sorted(described.members, key=lambda m: m.member_id):
        n = sum(len(tp.partitions) for tp in m.assignment.topic_partitions)
        rows.append((g, m.member_id, *([m.instance_id or "-"] if static else []), m.client_host, m.client_id, n,
                     m.member_epoch, consumer_assignment(m.assignment), described.assignment_epoch,
                     consumer_assignment(m.target_assignment)))
    print_table(cols, rows)


def _describe_offsets(adm: Any, args: argparse.Namespace, g: str, d: Any, state: str) -> int:
    owner: dict[TP, Any] = {}
    for m in d.members:
        for tp in _assignment(m):
            owner[tp] = m
    committed = _committed(adm, args, g)
    if not d.members:
        warn(f"Consumer group '{g}' has no active members.")
    tps = sorted(set(owner) | set(committed))
    ends = _end_offsets(adm, args, tps)
    rows: list[tuple[object, ...]] = []
    for tp in tps:
        cur, end = committed.get(tp), ends.get(tp)
        lag = end - cur if cur is not None and end is not None else None
        m = owner.get(tp)
        rows.append((g, tp[0], tp[1], cur, end, lag, m.member_id if m else None, m.host if m else None,
                     m.client_id if m else None))
    print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                 "HOST", "CLIENT-ID"], rows)
    return 0


def cmd_delete(adm: Any, args: argparse.Namespace) -> int:
    groups = _group_ids(adm, args)
    if not groups:
        warn("No consumer groups to delete.")
        return 0
    futures = adm.delete_consumer_groups(groups, request_timeout=timeout_s(args))
    failed: dict[str, str] = {}
    for g, f in futures.items():
        try:
            result(f, args)
        except Exception as e:  # noqa: BLE001 - collected and reported like Kafka does
            failed[g] = _kafka_error_text(e)
    ok = [g for g in groups if g not in failed]
    if ok:
        print("Deletion of requested consumer groups (" + ", ".join(f"'{g}'" for g in ok) + ") was successful.")
    if failed:
        error("Deletion of some consumer groups failed:")
        for g, why in failed.items():
            warn(f"* Group '{g}' could not be deleted due to: {why}")
        return 1
    return 0


def _kafka_error_text(e: Exception) -> str:
    name, msg = kafka_error(e)
    return f"{name}: {msg}"


def cmd_delete_offsets(adm: Any, args: argparse.Namespace) -> int:
    g = args.group
    wanted: dict[str, list[int]] = {}
    for spec in args.topic:
        topic, parts = parse_topic_spec(spec)
        wanted.setdefault(topic, []).extend(parts if parts is not None else topic_partitions(adm, args, topic))
    code, per_part = 15, dict[tuple[str, int], int]()
    for attempt in range(10):  # the coordinator may move or still be loading: look it up again
        d = _describe(adm, args, [g])[g]
        if kafka_state(d.state) == "Dead":
            error(f"Deletion of offsets failed because group '{g}' does not exist.")
            return 1
        c = d.coordinator
        try:
            code, per_part = offset_delete(c.host, c.port, g, wanted, timeout_s(args))
        except (OSError, ToolError) as e:
            warn(f"Warning: OffsetDelete to {c.host}:{c.port} failed: {e}")
            code = 15
        if code not in (14, 15, 16):
            break
        time.sleep(min(2.0, 0.2 * (attempt + 1)))
    if code != 0:
        error(f"Deletion of offsets failed: {error_text(code)}")
        return 1
    print(f"Request succeed for deleting offsets with topic {', '.join(wanted)} group {g}")
    rows = [(t, p, "Successful" if e == 0 else f"Error: {error_text(e)}") for (t, p), e in sorted(per_part.items())]
    print_table(["TOPIC", "PARTITION", "STATUS"], rows)
    return 1 if any(e != 0 for e in per_part.values()) else 0


# ------------------------------------------------------------------ reset-offsets

_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    m = _DURATION.match(text.strip())
    if not m or not any(m.groups()):
        raise ToolError(f"bad duration {text!r}, expected ISO-8601 like PT1H30M or P1DT2H")
    d, h, mi, s = m.groups()
    return int(timedelta(days=int(d or 0), hours=int(h or 0), minutes=int(mi or 0),
                         seconds=float(s or 0)).total_seconds() * 1000)


def parse_datetime_ms(text: str) -> int:
    """Kafka's ``--to-datetime`` format ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone (local otherwise)."""
    try:
        dt = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ToolError(f"bad datetime {text!r}, expected YYYY-MM-DDTHH:mm:SS.sss[Z|+HH:MM]") from None
    if dt.tzinfo is None:
        dt = dt.astimezone()  # local time zone, as Kafka's tool
    return int(dt.timestamp() * 1000)


def plan_reset(adm: Any, args: argparse.Namespace, group: str) -> dict[TP, int]:
    """The new offset of every partition in scope (what dry-run prints and execute commits)."""
    OffsetSpec = admin_class("OffsetSpec")  # noqa: N806 - the library's class name
    committed = _committed(adm, args, group)
    if args.all_topics:
        tps = sorted(committed)
    else:
        tps = []
        for spec in args.topic:
            topic, parts = parse_topic_spec(spec)
            tps.extend((topic, p) for p in (parts if parts is not None else topic_partitions(adm, args, topic)))
        tps = sorted(set(tps))
    earliest = list_offsets(adm, args, tps, OffsetSpec.earliest())
    latest = list_offsets(adm, args, tps, OffsetSpec.latest())
    missing = [tp for tp in tps if tp not in earliest or tp not in latest]
    if missing:
        raise ToolError("cannot get the log offsets of " + ", ".join(f"{t}-{p}" for t, p in missing))

    def clamp(tp: TP, off: int) -> int:
        lo, hi = earliest[tp], latest[tp]
        if off < lo:
            warn(f"New offset ({off}) is lower than earliest offset for topic partition {tp[0]}-{tp[1]}. "
                 f"Value will be set to {lo}")
            return lo
        if off > hi:
            warn(f"New offset ({off}) is higher than latest offset for topic partition {tp[0]}-{tp[1]}. "
                 f"Value will be set to {hi}")
            return hi
        return off

    plan: dict[TP, int] = {}
    if args.to_earliest:
        plan = {tp: earliest[tp] for tp in tps}
    elif args.to_latest:
        plan = {tp: latest[tp] for tp in tps}
    elif args.to_current:
        plan = {tp: committed.get(tp, latest[tp]) for tp in tps}
    elif args.to_offset is not None:
        plan = {tp: clamp(tp, args.to_offset) for tp in tps}
    elif args.shift_by is not None:
        for tp in tps:
            if tp not in committed:
                raise ToolError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no "
                                "current committed offset")
            plan[tp] = clamp(tp, committed[tp] + args.shift_by)
    else:
        if args.to_datetime is not None:
            ts = parse_datetime_ms(args.to_datetime)
        else:
            ts = int(time.time() * 1000) - parse_duration_ms(args.by_duration)
        by_time = list_offsets(adm, args, tps, OffsetSpec.for_timestamp(ts))
        for tp in tps:
            off = by_time.get(tp, -1)
            plan[tp] = latest[tp] if off < 0 else clamp(tp, off)  # no record at/after ts: the log end
    return plan


def cmd_reset(adm: Any, args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    if not args.execute and not args.dry_run:
        warn("WARN: No action will be performed as the --execute option is missing. In a future major release, "
             "the default behavior of this command will be to prompt the user before executing the reset rather "
             "than doing a dry run. You should add the --dry-run option explicitly if you are scripting this "
             "command and want to keep the current default behavior without prompting.")
    groups = _group_ids(adm, args)
    rc = 0
    rows: list[tuple[object, ...]] = []
    for g, d in _describe(adm, args, groups).items():
        state = kafka_state(d.state)
        if state not in _INACTIVE:
            error(f"Assignments can only be reset if the group '{g}' is inactive, but the current state is {state}.")
            rc = 1
            continue
        plan = plan_reset(adm, args, g)
        if args.execute and plan:
            req = ConsumerGroupTopicPartitions(g, [TopicPartition(t, p, off) for (t, p), off in sorted(plan.items())])
            for f in adm.alter_consumer_group_offsets([req], request_timeout=timeout_s(args)).values():
                res = result(f, args)
                bad = [tp for tp in res.topic_partitions or [] if tp.error is not None]
                if bad:
                    error("could not reset " + ", ".join(f"{tp.topic}-{tp.partition}: {tp.error}" for tp in bad))
                    rc = 1
        rows.extend((g, t, p, off) for (t, p), off in sorted(plan.items()))
    if rows:
        print_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows)
    return rc


HANDLERS = {
    "list": cmd_list,
    "describe": cmd_describe,
    "delete": cmd_delete,
    "delete-offsets": cmd_delete_offsets,
    "reset-offsets": cmd_reset,
}


def run(args: argparse.Namespace) -> int:
    try:
        return HANDLERS[args.groups_cmd](admin(args), args)
    except ToolError as e:
        error(str(e))
        return 1
    except Exception as e:  # noqa: BLE001 - a tool reports, it does not dump a traceback
        from confluent_kafka import KafkaException

        if isinstance(e, KafkaException | TimeoutError | OSError):
            error(f"Executing consumer group command failed due to {_kafka_error_text(e) or type(e).__name__}")
            return 1
        raise
