"""``kcoord users create|delete|list``: the cluster's SCRAM users (AlterUserScramCredentials and
DescribeUserScramCredentials through the Admin client, as ``kafka-configs.sh --entity-type users``).

``create --user NAME --password PW [--mechanism SCRAM-SHA-512] [--iterations 4096]`` sets (or
changes) a user's credential for a mechanism; the client salts the password, the cluster keeps only
the salt and the keys derived from it. ``delete --user NAME [--mechanism M]`` removes one.
``list [--user NAME ...]`` prints each user's mechanisms and iterations. Exit status 1 on an error.
"""

from __future__ import annotations

import argparse
from typing import Any

from cluster.security.scram import MAX_ITERATIONS, MIN_ITERATIONS
from cluster.tools.common import (
    ToolError,
    add_common,
    admin,
    admin_class,
    failed,
    print_table,
    timeout_s,
)

COMMAND = "users"
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(COMMAND, help="create, delete and list SCRAM users", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True)
    c = sub.add_parser("create", help="set a user's SCRAM credential (a new user or a new password)")
    add_common(c)
    c.add_argument("--user", required=True)
    c.add_argument("--password", required=True)
    c.add_argument("--mechanism", choices=MECHANISMS, action="append", help="repeatable; default SCRAM-SHA-512")
    c.add_argument("--iterations", type=int, default=MIN_ITERATIONS)
    d = sub.add_parser("delete", help="remove a user's SCRAM credential")
    add_common(d)
    d.add_argument("--user", required=True)
    d.add_argument("--mechanism", choices=MECHANISMS, action="append", help="repeatable; default SCRAM-SHA-512")
    ls = sub.add_parser("list", help="users and their mechanisms")
    add_common(ls)
    ls.add_argument("--user", action="append", help="repeatable; default every user")


def _mechanism(name: str) -> Any:
    return admin_class("ScramMechanism")[name.replace("-", "_")]


def _alter(args: argparse.Namespace, adm: Any, t: float) -> None:
    mechanisms = args.mechanism or ["SCRAM-SHA-512"]
    if args.action == "create":
        if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
            raise ToolError(f"--iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}")
        info = admin_class("ScramCredentialInfo")
        changes = [admin_class("UserScramCredentialUpsertion")(args.user, info(_mechanism(m), args.iterations),
                                                               args.password.encode()) for m in mechanisms]
    else:
        changes = [admin_class("UserScramCredentialDeletion")(args.user, _mechanism(m)) for m in mechanisms]
    for change in changes:  # one request each: Kafka refuses a user named twice in one request
        for f in adm.alter_user_scram_credentials([change], request_timeout=t).values():
            f.result(t)
    print(f"{'Set' if args.action == 'create' else 'Removed'} {', '.join(mechanisms)} for user {args.user}.")


def run(args: argparse.Namespace) -> int:
    try:
        adm = admin(args)
        t = timeout_s(args)
        if args.action != "list":
            _alter(args, adm, t)
            return 0
        if args.user:
            found = {u: f.result(t) for u, f in adm.describe_user_scram_credentials(args.user, request_timeout=t).items()}
        else:
            found = adm.describe_user_scram_credentials(request_timeout=t).result(t)
        print_table(["User", "Mechanism", "Iterations"], sorted(
            (user, info.mechanism.name.replace("_", "-"), info.iterations)
            for user, d in found.items() for info in d.scram_credential_infos))
        return 0
    except Exception as e:  # noqa: BLE001 - a usage error, or the admin client's: name and message
        return failed(e)
