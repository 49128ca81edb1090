"""``kcoord configs describe|alter``: a topic's, node's or group's configs, as ``kafka-configs.sh``
describes and alters them (DescribeConfigs and IncrementalAlterConfigs through the Admin client).

``describe --topic T`` (or ``--broker ID``, ``--group G``) prints every config with its value and
source; ``--all`` includes the defaults, otherwise only what was set. ``alter --topic T|--group
G|--broker ID [--add-config K=V[,K=V...]] [--delete-config K[,K...]] [--append-config K=V]
[--subtract-config K=V]`` changes a topic's, a group's or a node's configs in one request, which
the cluster applies whole or not at all (a group's: ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms``, within the nodes' bounds, from the group's next heartbeat; a
node's: its log defaults, ``log.retention.ms``, ``log.roll.ms`` and the others of
``cluster/broker_configs.py``). The cluster-wide defaults (a BROKER resource named "") are not
reachable through confluent-kafka's admin client: ``kafka-configs.sh --entity-type brokers
--entity-default`` sets them.
Exit status 1 on an error.
"""

from __future__ import annotations

import argparse
from typing import Any

from cluster.tools.common import ToolError, add_common, admin, admin_class, failed, print_table, timeout_s

COMMAND = "configs"
DEFAULT_SOURCES = ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(COMMAND, help="describe and alter topic, node and group configs (kafka-configs.sh)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True)
    d = sub.add_parser("describe", help="a resource's configs, their values and sources")
    add_common(d)
    _entity(d)
    d.add_argument("--all", action="store_true", help="the defaults too")
    a = sub.add_parser("alter", help="set, delete, append to or subtract from a topic's, a group's or the nodes' "
                                     "configs")
    add_common(a)
    _entity(a)
    a.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=V]")
    a.add_argument("--delete-config", action="append", default=[], metavar="K[,K]")
    a.add_argument("--append-config", action="append", default=[], metavar="K=V", help="to a list config")
    a.add_argument("--subtract-config", action="append", default=[], metavar="K=V", help="from a list config")


def _entity(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--topic")
    g.add_argument("--broker", help="a node id")
    g.add_argument("--group")


def _resource(args: argparse.Namespace, **kw: Any) -> Any:
    cls = admin_class("ConfigResource")
    if getattr(args, "broker", None) is not None:
        return cls(cls.Type.BROKER, str(args.broker), **kw)
    if getattr(args, "group", None) is not None:
        return cls(cls.Type.GROUP, args.group, **kw)
    return cls(cls.Type.TOPIC, args.topic, **kw)


def _pairs(items: list[str], what: str) -> list[tuple[str, str]]:
    """``K=V[,K=V]`` items; a value may hold commas when it is the only pair (``cleanup.policy=compact,delete``)."""
    out: list[tuple[str, str]] = []
    for item in items:
        parts = item.split(",")
        if all("=" in x for x in parts):
            out += [tuple(x.split("=", 1)) for x in parts]  # type: ignore[misc]
        elif "=" in item:
            out.append(tuple(item.split("=", 1)))  # type: ignore[arg-type]
        else:
            raise ToolError(f"--{what} expects K=V, got {item!r}")
    return [(k.strip(), v.strip()) for k, v in out]


def _alter(args: argparse.Namespace, adm: Any, t: float) -> None:
    entry, op = admin_class("ConfigEntry"), admin_class("AlterConfigOpType")
    entries = [entry(k, v, incremental_operation=op.SET) for k, v in _pairs(args.add_config, "add-config")]
    entries += [entry(k.strip(), None, incremental_operation=op.DELETE)
                for item in args.delete_config for k in item.split(",") if k.strip()]
    entries += [entry(k, v, incremental_operation=op.APPEND) for k, v in _pairs(args.append_config, "append-config")]
    entries += [entry(k, v, incremental_operation=op.SUBTRACT)
                for k, v in _pairs(args.subtract_config, "subtract-config")]
    if not entries:
        raise ToolError("nothing to alter: give --add-config, --delete-config, --append-config or --subtract-config")
    res = _resource(args, incremental_configs=entries)
    adm.incremental_alter_configs([res], request_timeout=t)[res].result(t)
    what = (f"group {args.group}" if args.group is not None else f"broker {args.broker}" if args.broker is not None
            else f"topic {args.topic}")
    print(f"Completed updating config for {what}.")


def _describe(args: argparse.Namespace, adm: Any, t: float) -> None:
    res = _resource(args)
    found = adm.describe_configs([res], request_timeout=t)[res].result(t)
    rows = []
    for name in sorted(found):
        e = found[name]
        source = admin_class("ConfigSource")(e.source).name if isinstance(e.source, int) else e.source.name
        if not args.all and source in DEFAULT_SOURCES:
            continue
        rows.append((name, "(sensitive)" if e.is_sensitive else e.value, source))
    print_table(["Config", "Value", "Source"], rows)


def run(args: argparse.Namespace) -> int:
    try:
        adm = admin(args)
        t = timeout_s(args)
        if args.action == "alter":
            _alter(args, adm, t)
        else:
            _describe(args, adm, t)
        return 0
    except Exception as e:  # noqa: BLE001 - told to the operator, exit 1
        return failed(e)
