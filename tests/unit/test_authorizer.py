"""The ACL decision (cluster/security/authorizer.py): cases of Kafka's StandardAuthorizerTest (SADT),
AuthorizerTest (AZT) and BaseAuthorizerTest (BAZT) under their names, plus a property: the indexed
decision equals a brute-force reading of the rules over every ACL."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.security.authorizer import (
    AclBinding,
    AclFilter,
    Authorizer,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
)
from cluster.security.authorizer import ResourceType as R

ALICE, BOB = "User:alice", "User:bob"
HOST = "192.168.0.1"
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
Op = Operation


def acl(rtype: R, name: str, op: Operation, perm: Permission = ALLOW, principal: str = ALICE, host: str = "*",
        pattern: PatternType = LIT) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm).validate()


def authorizer(*acls: AclBinding, supers: tuple[str, ...] = (), everyone: bool = False) -> Authorizer:
    a = Authorizer(supers, everyone)
    for x in acls:
        a.add(x)
    return a


def test_get_configured_super_users_and_super_user_has_access() -> None:
    """SADT.testGetConfiguredSuperUsers, AZT.testSuperUserHasAccess: no ACL is looked at, a DENY neither."""
    a = authorizer(acl(R.TOPIC, "t", Op.ALL, DENY, principal="User:admin"), supers=("User:admin", "User:ANONYMOUS"))
    assert a.authorize("User:admin", HOST, Op.WRITE, R.TOPIC, "t")
    assert a.authorize("User:ANONYMOUS", HOST, Op.ALTER, R.CLUSTER, "kafka-cluster")
    assert not a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "t")


def test_allow_everyone_if_no_acl_found_config_enabled_and_disabled() -> None:
    """SADT.testAllowEveryoneIfNoAclFoundConfig{Enabled,Disabled}: the default applies only to a
    resource no ACL covers; an ACL for someone else makes it deny-by-default for everybody."""
    for everyone in (True, False):
        a = authorizer(acl(R.TOPIC, "covered", Op.READ, principal=BOB), everyone=everyone)
        assert a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "bare") is everyone
        assert not a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "covered")
        assert a.authorize(BOB, HOST, Op.READ, R.TOPIC, "covered")


def test_no_acl_found_and_override() -> None:
    """AZT.testNoAclFound, testNoAclFoundOverride."""
    assert not authorizer().authorize(ALICE, HOST, Op.READ, R.TOPIC, "t")
    assert authorizer(everyone=True).authorize(ALICE, HOST, Op.READ, R.TOPIC, "t")


def test_find_result_implication() -> None:
    """SADT.testFindResultImplication: ALLOW READ/WRITE/DELETE/ALTER imply DESCRIBE, ALLOW
    ALTER_CONFIGS implies DESCRIBE_CONFIGS; DENY never implies."""
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert authorizer(acl(R.TOPIC, "t", op)).authorize(ALICE, HOST, Op.DESCRIBE, R.TOPIC, "t")
    assert authorizer(acl(R.TOPIC, "t", Op.ALTER_CONFIGS)).authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, R.TOPIC, "t")
    assert not authorizer(acl(R.TOPIC, "t", Op.DESCRIBE)).authorize(ALICE, HOST, Op.READ, R.TOPIC, "t")
    denied_read = authorizer(acl(R.TOPIC, "t", Op.READ, DENY), acl(R.TOPIC, "t", Op.DESCRIBE))
    assert denied_read.authorize(ALICE, HOST, Op.DESCRIBE, R.TOPIC, "t")
    assert not denied_read.authorize(ALICE, HOST, Op.READ, R.TOPIC, "t")


def test_find_result_principal_matching() -> None:
    """SADT.testFindResultPrincipalMatching: the principal itself or User:* only."""
    a = authorizer(acl(R.TOPIC, "t", Op.READ, principal="User:*"), acl(R.TOPIC, "u", Op.READ, principal=BOB))
    assert a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "t") and a.authorize("User:bob", HOST, Op.READ, R.TOPIC, "t")
    assert not a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "u")
    assert not authorizer(acl(R.TOPIC, "t", Op.READ, principal="User:ali*")).authorize(ALICE, HOST, Op.READ, R.TOPIC, "t")


def test_deny_precedence_with_operation_all_and_deny_takes_precedence() -> None:
    """SADT.testDenyPrecedenceWithOperationAll, AZT.testDenyTakesPrecedence."""
    a = authorizer(acl(R.TOPIC, "t", Op.ALL), acl(R.TOPIC, "t", Op.ALL, DENY, principal="User:*", host=HOST))
    assert not a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "t")
    assert a.authorize(ALICE, "10.0.0.9", Op.READ, R.TOPIC, "t")
    b = authorizer(acl(R.TOPIC, "t", Op.READ), acl(R.TOPIC, "t", Op.READ, DENY))
    assert not b.authorize(ALICE, HOST, Op.READ, R.TOPIC, "t")


def test_topic_acl_with_operation_all() -> None:
    """SADT.testTopicAclWithOperationAll: ALL allows every operation of the topic."""
    a = authorizer(acl(R.TOPIC, "t", Op.ALL))
    assert all(a.authorize(ALICE, HOST, op, R.TOPIC, "t") for op in (Op.READ, Op.WRITE, Op.DESCRIBE, Op.DELETE,
                                                                       Op.ALTER, Op.DESCRIBE_CONFIGS))
    assert not a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "t2")


def test_prefix_acls_and_authorize_with_prefixed_resource() -> None:
    """SADT.testPrefixAcls, AZT.testAuthorizeWithPrefixedResource: a prefix covers names that start
    with it (the whole name too); a LITERAL that is only a prefix covers nothing else."""
    a = authorizer(acl(R.TOPIC, "foo", Op.READ, pattern=PRE), acl(R.TOPIC, "foob", Op.READ, DENY, pattern=PRE),
                   acl(R.TOPIC, "ba", Op.READ))
    assert a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "foo")
    assert a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "foo-1")
    assert not a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "foobar")
    assert not a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "bar")
    assert not a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "fo")


def test_host_address_acl_validation() -> None:
    """SADT.testHostAddressAclValidation / AIT.testHostAddressBasedAcls: an exact address or *."""
    a = authorizer(acl(R.TOPIC, "t", Op.READ, host=HOST))
    assert a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "t")
    assert not a.authorize(ALICE, "192.168.0.2", Op.READ, R.TOPIC, "t")


def test_wild_card_acls_and_acl_inheritance() -> None:
    """AZT.testWildCardAcls, testAclInheritance: LITERAL * covers every name of the type; a group ACL
    does not reach topics."""
    a = authorizer(acl(R.TOPIC, "*", Op.WRITE), acl(R.GROUP, "*", Op.READ))
    assert a.authorize(ALICE, HOST, Op.WRITE, R.TOPIC, "any") and a.authorize(ALICE, HOST, Op.DESCRIBE, R.TOPIC, "any")
    assert not a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "any")
    assert a.authorize(ALICE, HOST, Op.READ, R.GROUP, "g")
    assert not a.authorize(ALICE, HOST, Op.DELETE, R.GROUP, "g")


def test_single_character_resource_acls_and_empty_resource_name() -> None:
    """AZT.testSingleCharacterResourceAcls, testAuthorizeWithEmptyResourceName: only wildcards
    cover the empty name."""
    a = authorizer(acl(R.TOPIC, "f", Op.READ))
    assert a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "f") and not a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "foo")
    assert not a.authorize(ALICE, HOST, Op.READ, R.GROUP, "")
    assert authorizer(acl(R.GROUP, "*", Op.READ)).authorize(ALICE, HOST, Op.READ, R.GROUP, "")


def test_simple_authorizations() -> None:
    """SADT.testSimpleAuthorizations: a consumer's topic and group ACLs."""
    a = authorizer(acl(R.TOPIC, "foo", Op.READ, pattern=PRE), acl(R.GROUP, "g", Op.READ),
                   acl(R.CLUSTER, "kafka-cluster", Op.IDEMPOTENT_WRITE, principal=BOB))
    assert a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "foobar") and a.authorize(ALICE, HOST, Op.DESCRIBE, R.TOPIC, "foobar")
    assert a.authorize(ALICE, HOST, Op.READ, R.GROUP, "g")
    assert not a.authorize(ALICE, HOST, Op.IDEMPOTENT_WRITE, R.CLUSTER, "kafka-cluster")
    assert a.authorize(BOB, HOST, Op.IDEMPOTENT_WRITE, R.CLUSTER, "kafka-cluster")


@pytest.mark.parametrize(("binding", "message"), [
    (AclBinding(R.CLUSTER, "other", LIT, ALICE, "*", Op.ALTER, ALLOW), "kafka-cluster"),
    (AclBinding(R.TOPIC, "", LIT, ALICE, "*", Op.READ, ALLOW), "empty"),
    (AclBinding(R.ANY, "t", LIT, ALICE, "*", Op.READ, ALLOW), "resourceType"),
    (AclBinding(R.TOPIC, "t", PatternType.MATCH, ALICE, "*", Op.READ, ALLOW), "patternType"),
    (AclBinding(R.TOPIC, "t", LIT, ALICE, "*", Op.ANY, ALLOW), "operation"),
    (AclBinding(R.TOPIC, "t", LIT, ALICE, "*", Op.READ, Permission.ANY), "permissionType"),
    (AclBinding(R.TOPIC, "t", LIT, "alice", "*", Op.READ, ALLOW), "principal"),
])
def test_validate_new_acl(binding: AclBinding, message: str) -> None:
    """AclControlManagerTest.testValidateNewAcl (and the principal form)."""
    with pytest.raises(InvalidAcl, match=message):
        binding.validate()


def test_create_acl_delete_acl_and_delete_dedupe() -> None:
    """AclControlManagerTest.testCreateAclDeleteAcl, testDeleteDedupe: creating twice is one ACL; a
    removal removes it once."""
    a = Authorizer()
    x = acl(R.TOPIC, "t", Op.READ)
    assert a.add(x) and not a.add(x)
    assert a.acls() == [x]
    assert a.remove(x) and not a.remove(x)
    assert a.acls() == [] and not a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "t")


def test_acls_filter() -> None:
    """AZT.testAclsFilter, testGetAclsPrincipal, testDeleteAllAclOnPrefixedResource: ANY, MATCH,
    exact names, principal and host by string."""
    lit = acl(R.TOPIC, "foo-1", Op.READ)
    wild = acl(R.TOPIC, "*", Op.WRITE, principal=BOB)
    pre = acl(R.TOPIC, "foo", Op.DESCRIBE, pattern=PRE)
    grp = acl(R.GROUP, "foo-1", Op.READ, host=HOST)
    a = authorizer(lit, wild, pre, grp)
    assert set(a.acls()) == {lit, wild, pre, grp}
    assert set(a.acls(AclFilter(R.TOPIC))) == {lit, wild, pre}
    assert set(a.acls(AclFilter(R.ANY, "foo-1"))) == {lit, grp}
    assert set(a.acls(AclFilter(R.TOPIC, "foo-1", PatternType.MATCH))) == {lit, wild, pre}
    assert set(a.acls(AclFilter(R.TOPIC, "*", LIT))) == {wild}
    assert set(a.acls(AclFilter(R.TOPIC, "foo", PRE))) == {pre}
    assert set(a.acls(AclFilter(principal=BOB))) == {wild}
    assert set(a.acls(AclFilter(principal="User:*"))) == set()  # a filter matches principals as strings
    assert set(a.acls(AclFilter(host=HOST))) == {grp}
    assert set(a.acls(AclFilter(operation=Op.READ, permission=ALLOW))) == {lit, grp}


def test_authorize_by_resource_type() -> None:
    """BAZT.testAuthorizeByResourceType*: WRITE on some topic (an idempotent producer's
    InitProducerId), no implication, denies subtract."""
    def by_type(*acls: AclBinding, everyone: bool = False) -> bool:
        return authorizer(*acls, everyone=everyone).authorize_by_resource_type(ALICE, HOST, Op.WRITE, R.TOPIC)

    assert not by_type()
    assert by_type(everyone=True)  # nothing covers the probe name
    assert by_type(acl(R.TOPIC, "t", Op.WRITE))
    assert by_type(acl(R.TOPIC, "t", Op.ALL))
    assert not by_type(acl(R.TOPIC, "t", Op.READ))
    assert not by_type(acl(R.TOPIC, "t", Op.WRITE), acl(R.TOPIC, "t", Op.WRITE, DENY))
    assert not by_type(acl(R.TOPIC, "t", Op.WRITE), acl(R.TOPIC, "t", Op.ALL, DENY, pattern=PRE))
    assert by_type(acl(R.TOPIC, "t", Op.WRITE), acl(R.TOPIC, "u", Op.WRITE, DENY))
    assert not by_type(acl(R.TOPIC, "*", Op.WRITE), acl(R.TOPIC, "*", Op.WRITE, DENY))
    assert by_type(acl(R.TOPIC, "pre", Op.WRITE, pattern=PRE), acl(R.TOPIC, "pre", Op.WRITE, DENY))
    assert not by_type(acl(R.TOPIC, "prefix", Op.WRITE, pattern=PRE), acl(R.TOPIC, "pre", Op.WRITE, DENY, pattern=PRE))
    assert not by_type(acl(R.TOPIC, "t", Op.WRITE, principal=BOB))
    assert not by_type(acl(R.TOPIC, "t", Op.WRITE, host="10.1.1.1"))


def test_authorized_operations_bitfields() -> None:
    """DescribeAuthorizedOperationsTest: group DESCRIBE -> {DESCRIBE}; DELETE -> {DESCRIBE, DELETE};
    everything allowed -> Kafka's full bitfields."""
    assert authorizer(acl(R.GROUP, "g", Op.DESCRIBE)).authorized_operations(ALICE, HOST, R.GROUP, "g") == 1 << Op.DESCRIBE
    assert authorizer(acl(R.GROUP, "g", Op.DELETE)).authorized_operations(ALICE, HOST, R.GROUP, "g") == \
        (1 << Op.DESCRIBE) | (1 << Op.DELETE)
    everyone = Authorizer(allow_everyone_if_no_acl_found=True)
    assert [everyone.authorized_operations(ALICE, HOST, r, n) for r, n in
            ((R.TOPIC, "t"), (R.GROUP, "g"), (R.CLUSTER, "kafka-cluster"), (R.TRANSACTIONAL_ID, "x"))] == \
        [3576, 3400, 8096, 272]


# -- property: the indexed decision is the rules read literally ------------------------------------

NAMES = st.sampled_from(["", "a", "ab", "abc", "b", "*"])
PRINCIPALS = st.sampled_from([ALICE, BOB, "User:*"])
OPS = st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS])
BINDINGS = st.builds(AclBinding, st.sampled_from([R.TOPIC, R.GROUP]), NAMES.filter(bool), st.sampled_from([LIT, PRE]),
                     PRINCIPALS, st.sampled_from(["*", HOST, "10.0.0.1"]), OPS, st.sampled_from([ALLOW, DENY]))


def brute_force(acls: list[AclBinding], everyone: bool, principal: str, host: str, op: Operation, rtype: R,
                name: str) -> bool:
    implied = {Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}, Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS}}
    candidates = [a for a in acls if a.resource_type == rtype and (
        (a.pattern == LIT and a.name in (name, "*")) or (a.pattern == PRE and name.startswith(a.name)))]
    matching = [a for a in candidates if a.principal in (principal, "User:*") and a.host in ("*", host)]
    if any(a.permission == DENY and a.operation in (Op.ALL, op) for a in matching):
        return False
    if any(a.permission == ALLOW and (a.operation in (Op.ALL, op) or a.operation in implied.get(op, set()))
           for a in matching):
        return True
    return not candidates and everyone


@settings(max_examples=300, deadline=None)
@given(st.lists(BINDINGS, max_size=8), st.booleans(), st.sampled_from([ALICE, BOB]), st.sampled_from([HOST, "10.0.0.1"]),
       OPS.filter(lambda o: o != Op.ALL), st.sampled_from([R.TOPIC, R.GROUP]), NAMES.filter(lambda n: n != "*"))
def test_the_decision_is_the_rules_read_literally(acls: list[AclBinding], everyone: bool, principal: str, host: str,
                                                  op: Operation, rtype: R, name: str) -> None:
    a = authorizer(*acls, everyone=everyone)
    assert a.authorize(principal, host, op, rtype, name) == brute_force(acls, everyone, principal, host, op, rtype, name)
