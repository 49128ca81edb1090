"""``kcoord acls add|remove|list``: the ACLs of the cluster, as Kafka's ``kafka-acls.sh`` manages them
(CreateAcls, DeleteAcls, DescribeAcls through the Admin client).

Resources: ``--topic``, ``--group``, ``--transactional-id`` (each repeatable, ``*`` is the
wildcard) and ``--cluster``; ``--resource-pattern-type`` literal (default) or prefixed, and for
list/remove also any or match. Entries: ``--allow-principal``/``--deny-principal Type:Name``, hosts
``--allow-host``/``--deny-host`` (default ``*``), ``--operation`` (default All; Read, Write, Create,
Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite).
``--producer`` (topics: Write, Describe, Create; transactional ids: Write, Describe; ``--idempotent``:
IdempotentWrite on the cluster) and ``--consumer`` (topics: Read, Describe; groups: Read) as Kafka's.
``remove`` without a principal removes every ACL of the resources. Exit status 1 on an error.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from cluster.security.authorizer import CLUSTER_NAME, SUPPORTED_OPERATIONS, Operation, ResourceType
from cluster.tools.common import (
    ToolError,
    add_common,
    admin,
    admin_class,
    failed,
    print_table,
    timeout_s,
    warn,
)

COMMAND = "acls"
_OPS = {op.name.replace("_", ""): op for op in Operation if op not in (Operation.UNKNOWN, Operation.ANY)}


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(COMMAND, help="add, remove and list ACLs (kafka-acls.sh)", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True)
    for action, text in (("add", "create ACLs"), ("remove", "delete ACLs"), ("list", "show ACLs")):
        a = sub.add_parser(action, help=text)
        add_common(a)
        a.add_argument("--topic", action="append", default=[])
        a.add_argument("--group", action="append", default=[])
        a.add_argument("--transactional-id", action="append", default=[])
        a.add_argument("--cluster", action="store_true", help="the cluster resource (kafka-cluster)")
        patterns = ["literal", "prefixed"] + (["any", "match"] if action != "add" else [])
        a.add_argument("--resource-pattern-type", choices=patterns, default="literal")
        if action == "list":
            a.add_argument("--principal", help="only the ACLs of this principal")
            continue
        a.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
        a.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
        a.add_argument("--allow-host", action="append", default=[])
        a.add_argument("--deny-host", action="append", default=[])
        a.add_argument("--operation", action="append", default=[], help="repeatable; default All")
        a.add_argument("--producer", action="store_true")
        a.add_argument("--consumer", action="store_true")
        a.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")


def operation(name: str) -> Operation:
    op = _OPS.get(name.replace("-", "").replace("_", "").upper())
    if op is None:
        raise ToolError(f"unknown operation {name!r} (one of {', '.join(sorted(o.title() for o in _OPS))})")
    return op


def resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topic] + [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, x) for x in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def entries(args: argparse.Namespace) -> list[tuple[ResourceType, str, str, str, Operation, str]]:
    """(resource type, name, principal, host, operation, ALLOW|DENY) for add and remove: Kafka's cross
    product of principals x hosts x operations per resource, or the --producer/--consumer sets."""
    if (args.producer or args.consumer) and (args.operation or args.deny_principal):
        raise ToolError("--operation and --deny-principal cannot go with --producer or --consumer")
    per: list[tuple[ResourceType, str, Iterable[Operation]]] = []
    if args.producer or args.consumer:
        if not args.topic or args.consumer and not args.group:
            raise ToolError("--producer needs --topic; --consumer needs --topic and --group")
        for t in args.topic:
            ops = ([Operation.WRITE, Operation.DESCRIBE, Operation.CREATE] if args.producer else []) + \
                  ([Operation.READ, Operation.DESCRIBE] if args.consumer else [])
            per.append((ResourceType.TOPIC, t, dict.fromkeys(ops)))
        per += [(ResourceType.GROUP, g, [Operation.READ]) for g in args.group if args.consumer]
        per += [(ResourceType.TRANSACTIONAL_ID, x, [Operation.WRITE, Operation.DESCRIBE])
                for x in args.transactional_id if args.producer]
        if args.producer and args.idempotent:
            per.append((ResourceType.CLUSTER, CLUSTER_NAME, [Operation.IDEMPOTENT_WRITE]))
    else:
        ops = [operation(o) for o in args.operation] or [Operation.ALL]
        for rtype, name in resources(args):
            bad = [o.name for o in ops if o != Operation.ALL and o not in SUPPORTED_OPERATIONS[rtype]]
            if bad:
                raise ToolError(f"{', '.join(bad)} is not an operation of {rtype.name} resources")
            per.append((rtype, name, ops))
    if not per:
        raise ToolError("name a resource: --topic, --group, --transactional-id or --cluster")
    out = []
    for permission, principals, hosts in (("ALLOW", args.allow_principal, args.allow_host),
                                          ("DENY", args.deny_principal, args.deny_host)):
        for principal in principals:
            if ":" not in principal:
                raise ToolError(f"principal {principal!r} is not Type:Name (e.g. User:alice)")
            out += [(rtype, name, principal, host, op, permission) for rtype, name, ops in per
                    for host in hosts or ["*"] for op in ops]
    return out


def _binding(cls: Any, rtype: ResourceType, name: str | None, pattern: str, principal: str | None,
             host: str | None, op: Operation, permission: str) -> Any:
    return cls(admin_class("ResourceType")(int(rtype)), name, admin_class("ResourcePatternType")[pattern.upper()],
               principal, host, admin_class("AclOperation")(int(op)), admin_class("AclPermissionType")[permission])


def _rows(bindings: Iterable[Any], principal: str | None = None) -> list[tuple[str, ...]]:
    rows = {(ResourceType(int(b.restype.value)).name, b.name, b.resource_pattern_type.name, b.principal, b.host,
             b.operation.name, b.permission_type.name) for b in bindings if principal in (None, b.principal)}
    return sorted(rows)


COLUMNS = ["ResourceType", "Name", "PatternType", "Principal", "Host", "Operation", "Permission"]


def run(args: argparse.Namespace) -> int:
    try:
        adm = admin(args)
        t = timeout_s(args)
        if args.action == "add":
            wanted = [_binding(admin_class("AclBinding"), r, n, args.resource_pattern_type, p, h, o, perm)
                      for r, n, p, h, o, perm in entries(args)]
            for f in adm.create_acls(wanted, request_timeout=t).values():
                f.result(t)
            print_table(COLUMNS, _rows(wanted))
            return 0
        pattern = args.resource_pattern_type
        flt = admin_class("AclBindingFilter")
        if args.action == "list":
            res = resources(args)
            filters = [_binding(flt, r, n, pattern, None, None, Operation.ANY, "ANY") for r, n in res] or \
                      [_binding(flt, ResourceType.ANY, None, "any", None, None, Operation.ANY, "ANY")]
            found = [b for f in filters for b in adm.describe_acls(f, request_timeout=t).result(t)]
            print_table(COLUMNS, _rows(found, args.principal))
            if not found:  # librdkafka drops DescribeAcls' error code: say what an empty answer may mean
                warn("(no ACLs listed: none match, or the principal may not DESCRIBE the cluster, or the cluster "
                     "has no authorizer; librdkafka reports none of these apart)")
            return 0
        if args.allow_principal or args.deny_principal or args.producer or args.consumer:
            filters = [_binding(flt, r, n, pattern, p, h, o, perm) for r, n, p, h, o, perm in entries(args)]
        else:  # every ACL of the resources
            filters = [_binding(flt, r, n, pattern, None, None, Operation.ANY, "ANY") for r, n in resources(args)]
            if not filters:
                raise ToolError("name a resource: --topic, --group, --transactional-id or --cluster")
        removed = [b for f in adm.delete_acls(filters, request_timeout=t).values() for b in f.result(t)]
        print_table(COLUMNS, _rows(removed))
        return 0
    except Exception as e:  # noqa: BLE001 - a usage error, or the admin client's: name and message
        return failed(e)
