"""The node's access control over the metadata's ACLs, and the ACL sets ``kcoord acls`` builds
(kafka-acls.sh's --producer / --consumer expansions and its validation)."""

from __future__ import annotations

import argparse

import pytest

from cluster.metadata import AclRow
from cluster.security.access import AccessControl, binding, row
from cluster.security.authorizer import Operation as Op
from cluster.security.authorizer import PatternType, Permission
from cluster.security.authorizer import ResourceType as R
from cluster.tools import acls as tool
from cluster.tools.common import ToolError

ALICE, HOST = "User:alice", "10.0.0.1"


def test_without_an_authorizer_everything_is_allowed_and_bitfields_list_every_supported_operation() -> None:
    access = AccessControl(False, [], False, lambda: frozenset())
    assert access.allowed(ALICE, HOST, Op.DELETE, R.TOPIC, "t")
    assert access.allowed_on_some(ALICE, HOST, Op.WRITE, R.TOPIC)
    assert access.operations(ALICE, HOST, R.GROUP, "g") == 3400
    assert access.operations(ALICE, HOST, R.TOPIC, "t") == 3576
    assert access.operations(ALICE, HOST, R.CLUSTER, "kafka-cluster") == 8096


def test_decisions_follow_the_metadata_acls_as_they_are_replaced() -> None:
    current: list[frozenset[AclRow]] = [frozenset()]
    access = AccessControl(True, ["User:admin"], False, lambda: current[0])
    assert not access.allowed(ALICE, HOST, Op.READ, R.TOPIC, "orders")  # no ACL: denied by default
    assert access.allowed("User:admin", HOST, Op.READ, R.TOPIC, "orders")  # super user
    read = (int(R.TOPIC), "ord", int(PatternType.PREFIXED), ALICE, "*", int(Op.READ), int(Permission.ALLOW))
    current[0] = frozenset({read})
    assert access.allowed(ALICE, HOST, Op.READ, R.TOPIC, "orders")
    assert access.allowed(ALICE, HOST, Op.DESCRIBE, R.TOPIC, "orders")  # implied by READ
    assert not access.allowed(ALICE, HOST, Op.WRITE, R.TOPIC, "orders")
    deny = read[:5] + (int(Op.ALL), int(Permission.DENY))
    current[0] = frozenset({read, deny})
    assert not access.allowed(ALICE, HOST, Op.READ, R.TOPIC, "orders")  # deny wins
    current[0] = frozenset()
    assert not access.allowed(ALICE, HOST, Op.READ, R.TOPIC, "orders")


def test_rows_and_bindings_convert_both_ways() -> None:
    r: AclRow = (2, "t", 3, ALICE, "*", 3, 3)
    assert row(binding(r)) == r


def args(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = dict(topic=[], group=[], transactional_id=[], cluster=False, allow_principal=[],
                                   deny_principal=[], allow_host=[], deny_host=[], operation=[], producer=False,
                                   consumer=False, idempotent=False)
    return argparse.Namespace(**{**base, **kw})


def test_consumer_and_producer_sets_are_kafka_acls() -> None:
    consumer = tool.entries(args(allow_principal=[ALICE], consumer=True, topic=["t"], group=["g"]))
    assert sorted((r.name, n, o.name) for r, n, _p, _h, o, _perm in consumer) == [
        ("GROUP", "g", "READ"), ("TOPIC", "t", "DESCRIBE"), ("TOPIC", "t", "READ")]
    producer = tool.entries(args(allow_principal=[ALICE], producer=True, idempotent=True, topic=["t"],
                                 transactional_id=["x"]))
    assert sorted((r.name, o.name) for r, _n, _p, _h, o, _perm in producer) == [
        ("CLUSTER", "IDEMPOTENT_WRITE"), ("TOPIC", "CREATE"), ("TOPIC", "DESCRIBE"), ("TOPIC", "WRITE"),
        ("TRANSACTIONAL_ID", "DESCRIBE"), ("TRANSACTIONAL_ID", "WRITE")]


def test_entries_are_principals_by_hosts_by_operations() -> None:
    made = tool.entries(args(allow_principal=[ALICE, "User:bob"], allow_host=["1.1.1.1", "2.2.2.2"],
                             operation=["Read", "describe"], topic=["t"], deny_principal=["User:eve"]))
    assert len(made) == 2 * 2 * 2 + 1 * 1 * 2  # eve's DENY on the default host *
    assert {(p, h, perm) for _r, _n, p, h, _o, perm in made if p == "User:eve"} == {("User:eve", "*", "DENY")}


@pytest.mark.parametrize("bad", [
    args(allow_principal=[ALICE], operation=["IdempotentWrite"], topic=["t"]),  # not a topic operation
    args(allow_principal=["alice"], topic=["t"]),  # no Type:
    args(allow_principal=[ALICE], consumer=True, topic=["t"]),  # --consumer needs --group
    args(allow_principal=[ALICE], consumer=True, topic=["t"], group=["g"], operation=["Read"]),
    args(allow_principal=[ALICE], operation=["Fly"], topic=["t"]),
    args(allow_principal=[ALICE]),  # no resource
])
def test_usage_errors(bad: argparse.Namespace) -> None:
    with pytest.raises(ToolError):
        tool.entries(bad)


def test_operation_names_as_kafka_acls_spells_them() -> None:
    assert tool.operation("IdempotentWrite") is Op.IDEMPOTENT_WRITE
    assert tool.operation("describe-configs") is Op.DESCRIBE_CONFIGS
    assert tool.operation("ALL") is Op.ALL
