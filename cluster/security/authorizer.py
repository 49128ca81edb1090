"""ACLs and the decision Kafka's StandardAuthorizer makes with them, free of I/O.

A request is authorized for (principal, client host, operation, resource type, resource name):

1. a super user (``super.users``) is allowed everything, with no ACL looked at;
2. the candidate ACLs are those of the resource type that are LITERAL with exactly the name,
   LITERAL ``*``, or PREFIXED with a prefix of the name (the whole name included);
3. a candidate matches when its principal is the request's or ``User:*``, its host ``*`` or the
   client's address, and its operation ALL or the one asked for; an ALLOW also matches an
   operation it implies (DESCRIBE by READ, WRITE, DELETE, ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS),
   a DENY never does;
4. a matching DENY denies (deny wins); else a matching ALLOW allows; else, if any candidate exists,
   the answer is no; only a resource no ACL covers at all gets ``allow.everyone.if.no.acl.found``.

Codes are Kafka's (AclOperation, ResourceType, PatternType, AclPermissionType), so bindings go on
the wire and into records as they are.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type, the exact name
    MATCH = 2  # filters only: every binding that applies to the (literal) name
    LITERAL = 3
    PREFIXED = 4


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# What an ALLOW of the key also allows (Kafka's implied operations); DENY never implies.
_IMPLIED_BY = {
    Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE,
                                   Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}

# The operations each resource type supports (authorized-operations bitfields, ACL validation).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset({Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE,
                                   Operation.DELETE, Operation.ALTER, Operation.DESCRIBE_CONFIGS,
                                   Operation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.DESCRIBE_CONFIGS,
                                   Operation.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                                     Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER,
                                     Operation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({Operation.DESCRIBE, Operation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({Operation.DESCRIBE}),
    ResourceType.USER: frozenset({Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS}),
}


class InvalidAcl(ValueError):
    """A binding that may not be created (Kafka answers INVALID_REQUEST with this message)."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern: PatternType
    principal: str  # "Type:Name"
    host: str  # "*" or an address
    operation: Operation
    permission: Permission

    def validate(self) -> AclBinding:
        """Kafka's checks before an ACL is created (AclControlManager.validateNewAcl), plus the
        principal's ``Type:Name`` form, which Kafka leaves to fail later."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise InvalidAcl("Invalid resourceType " + self.resource_type.name)
        if self.pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl("Invalid patternType " + self.pattern.name)
        if self.operation in (Operation.ANY, Operation.UNKNOWN):
            raise InvalidAcl("Invalid operation " + self.operation.name)
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise InvalidAcl("Invalid permissionType " + self.permission.name)
        if not self.name:
            raise InvalidAcl("Resource name should not be empty")
        if self.resource_type == ResourceType.CLUSTER and self.name != CLUSTER_NAME:
            raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        if ":" not in self.principal:
            raise InvalidAcl(f"Could not parse principal from `{self.principal}` (no colon is present "
                             "separating the principal type from the principal name)")
        return self


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls / DeleteAcls: None and ANY match anything; see ``matches``."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if self.pattern == PatternType.MATCH:
            if self.name is not None and not _applies(acl, self.name):
                return False
        else:
            if self.pattern != PatternType.ANY and acl.pattern != self.pattern:
                return False
            if self.name is not None and acl.name != self.name:
                return False
        return ((self.principal is None or acl.principal == self.principal)
                and (self.host is None or acl.host == self.host)
                and (self.operation == Operation.ANY or acl.operation == self.operation)
                and (self.permission == Permission.ANY or acl.permission == self.permission))


def _applies(acl: AclBinding, name: str) -> bool:
    """Would ``acl`` be a candidate for a resource called ``name``?"""
    if acl.pattern == PatternType.LITERAL:
        return acl.name in (name, WILDCARD)
    return acl.pattern == PatternType.PREFIXED and name.startswith(acl.name)


class Authorizer:
    """The ACLs of the cluster and the decisions they give (see the module's note)."""

    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._literal: dict[tuple[ResourceType, str], set[AclBinding]] = defaultdict(set)
        self._prefixed: dict[tuple[ResourceType, str], set[AclBinding]] = defaultdict(set)

    # -- the ACLs --------------------------------------------------------------------------------

    def add(self, acl: AclBinding) -> bool:
        """Add one ACL; False if it was there already (creating it again is not an error in Kafka)."""
        index = self._literal if acl.pattern == PatternType.LITERAL else self._prefixed
        bucket = index[(acl.resource_type, acl.name)]
        if acl in bucket:
            return False
        bucket.add(acl)
        return True

    def remove(self, acl: AclBinding) -> bool:
        index = self._literal if acl.pattern == PatternType.LITERAL else self._prefixed
        bucket = index.get((acl.resource_type, acl.name))
        if bucket is None or acl not in bucket:
            return False
        bucket.discard(acl)
        if not bucket:
            del index[(acl.resource_type, acl.name)]
        return True

    def acls(self, flt: AclFilter = AclFilter()) -> list[AclBinding]:
        """Every ACL the filter matches, in a stable order."""
        found = [acl for bucket in (*self._literal.values(), *self._prefixed.values()) for acl in bucket
                 if flt.matches(acl)]
        return sorted(found, key=lambda a: (a.resource_type, a.pattern, a.name, a.principal, a.host, a.operation,
                                            a.permission))

    # -- decisions -------------------------------------------------------------------------------

    def _candidates(self, resource_type: ResourceType, name: str) -> Iterator[AclBinding]:
        for key in ((resource_type, name), (resource_type, WILDCARD)):
            yield from self._literal.get(key, ())
        if self._prefixed:
            for i in range(1, len(name) + 1):
                yield from self._prefixed.get((resource_type, name[:i]), ())

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        covered = allowed = False
        for acl in self._candidates(resource_type, name):
            covered = True
            if acl.principal not in (principal, WILDCARD_PRINCIPAL) or acl.host not in (WILDCARD, host):
                continue
            if acl.permission == Permission.DENY:
                if acl.operation in (Operation.ALL, operation):
                    return False
            elif acl.operation == Operation.ALL or acl.operation in _IMPLIED_BY.get(operation, (operation,)):
                allowed = True
        if allowed:
            return True
        return not covered and self.allow_everyone_if_no_acl_found

    def authorize_by_resource_type(self, principal: str, host: str, operation: Operation,
                                   resource_type: ResourceType) -> bool:
        """Is ``operation`` allowed on at least one resource of the type (Kafka's
        ``authorizeByResourceType``; no implied operations here)? InitProducerId of an idempotent
        producer asks it for WRITE on some topic."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        relevant = [acl for bucket in (*self._literal.values(), *self._prefixed.values()) for acl in bucket
                    if acl.resource_type == resource_type and acl.principal in (principal, WILDCARD_PRINCIPAL)
                    and acl.host in (WILDCARD, host) and acl.operation in (Operation.ALL, operation)]
        denied_literal = {a.name for a in relevant if a.permission == Permission.DENY and a.pattern == PatternType.LITERAL}
        denied_prefix = [a.name for a in relevant if a.permission == Permission.DENY and a.pattern == PatternType.PREFIXED]
        if WILDCARD in denied_literal:
            return False
        for acl in relevant:
            if acl.permission != Permission.ALLOW:
                continue
            if acl.pattern == PatternType.LITERAL and acl.name == WILDCARD:
                return True
            if acl.pattern == PatternType.LITERAL and acl.name in denied_literal:
                continue
            if any(acl.name.startswith(prefix) for prefix in denied_prefix):
                continue
            return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """The bitfield Kafka answers in ``...AuthorizedOperations``: bit ``1 << op`` for each
        supported operation allowed."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits
