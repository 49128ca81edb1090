"""A node's authorization: its configuration (``authorizer.class.name``, ``super.users``,
``allow.everyone.if.no.acl.found``) over the cluster's replicated ACLs.

Without an authorizer everything is allowed and authorized-operations bitfields list every supported
operation (Kafka's behaviour); the handlers' checks then cost one attribute read. With one, the
``Authorizer`` is rebuilt whenever the metadata's ACL set is replaced (it is replaced whole on every
change), so a decision always reads one consistent snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from cluster.metadata import AclRow
from cluster.security.authorizer import (
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclFilter,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)


def binding(row: AclRow) -> AclBinding:
    t, name, pattern, principal, host, op, perm = row
    return AclBinding(ResourceType(t), name, PatternType(pattern), principal, host, Operation(op), Permission(perm))


def row(acl: AclBinding) -> AclRow:
    return (int(acl.resource_type), acl.name, int(acl.pattern), acl.principal, acl.host, int(acl.operation),
            int(acl.permission))


def matching(acls: Iterable[AclRow], flt: AclFilter) -> list[AclRow]:
    """The ACLs ``flt`` matches (DeleteAcls), sorted: every node lists them alike."""
    return sorted(r for r in acls if flt.matches(binding(r)))


class AccessControl:
    def __init__(self, enabled: bool, super_users: list[str], allow_everyone_if_no_acl_found: bool,
                 acls: Callable[[], frozenset[AclRow]]) -> None:
        self.enabled = enabled
        self._super_users = super_users
        self._allow_everyone = allow_everyone_if_no_acl_found
        self._acls = acls
        self._seen: frozenset[AclRow] | None = None
        self._authorizer = Authorizer(super_users, allow_everyone_if_no_acl_found)

    def authorizer(self) -> Authorizer:
        """The decisions over the ACLs the metadata holds now."""
        current = self._acls()
        if current is not self._seen:
            fresh = Authorizer(self._super_users, self._allow_everyone)
            for r in current:
                fresh.add(binding(r))
            self._authorizer, self._seen = fresh, current
        return self._authorizer

    def allowed(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> bool:
        return not self.enabled or self.authorizer().authorize(principal, host, op, rtype, name)

    def allowed_on_some(self, principal: str, host: str, op: Operation, rtype: ResourceType) -> bool:
        """``op`` allowed on at least one resource of the type (InitProducerId's idempotent check)."""
        return not self.enabled or self.authorizer().authorize_by_resource_type(principal, host, op, rtype)

    def operations(self, principal: str, host: str, rtype: ResourceType, name: str) -> int:
        """Kafka's authorized-operations bitfield for the resource."""
        if not self.enabled:
            return sum(1 << op for op in SUPPORTED_OPERATIONS[rtype])
        return self.authorizer().authorized_operations(principal, host, rtype, name)
