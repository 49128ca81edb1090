"""Without an authorizer the ACL APIs answer SECURITY_DISABLED (54), as Kafka does: nothing is
stored that nothing would enforce; the SCRAM admin APIs work (everything is allowed)."""

from __future__ import annotations

from cluster.security.authorizer import Operation, PatternType, ResourceType
from tests.cluster.test_authorization import acl, req, sub
from tests.wire.raw import RawConn


def test_acl_apis_say_security_disabled(bootstrap: str) -> None:
    conn = RawConn(bootstrap)
    try:
        everything = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                          principal_filter=None, host_filter=None, operation=1, permission_type=1)
        described = conn.call(29, 3, req(29, 3, **everything))
        assert int(described.error_code) == 54 and described.error_message
        created = conn.call(30, 3, req(30, 3, creations=(
            acl(ResourceType.TOPIC, "t", PatternType.LITERAL, Operation.READ),)))
        assert [int(r.error_code) for r in created.results] == [54]
        deleted = conn.call(31, 3, req(31, 3, filters=(sub(31, 3, "DeleteAclsFilter", **everything),)))
        assert [int(r.error_code) for r in deleted.filter_results] == [54]
        assert int(conn.call(29, 3, req(29, 3, **everything)).error_code) == 54  # and still nothing stored
    finally:
        conn.close()
