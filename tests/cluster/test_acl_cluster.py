"""DeleteAcls on a 3-node cluster: its filters are matched where the change is applied, on the
committed ACLs. An ACL created through node 0 and at once deleted through node 1 (which had not
applied the creation yet) used to stay, with a success that matched nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.security.authorizer import Operation, PatternType, ResourceType
from tests.cluster.cluster_harness import Cluster, running_cluster
from tests.cluster.test_authorization import acl, req, sub
from tests.wire.raw import RawConn

pytestmark = pytest.mark.cluster


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    yield from running_cluster(tmp_path, request, settings={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",  # PLAINTEXT clients may manage ACLs
        "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1})  # fewer groups to start


def test_an_acl_created_through_one_node_is_deleted_at_once_through_another(cluster: Cluster) -> None:
    first, second = RawConn(cluster.address(0), timeout=15), RawConn(cluster.address(1), timeout=15)
    try:
        for i in range(5):  # node 1 is a moment behind node 0 most times; five make it certain
            name = f"t{i}"
            created = first.call(30, 3, req(30, 3, creations=(
                acl(ResourceType.TOPIC, name, PatternType.LITERAL, Operation.READ),)))
            assert [int(r.error_code) for r in created.results] == [0]
            deleted = second.call(31, 3, req(31, 3, filters=(sub(
                31, 3, "DeleteAclsFilter", resource_type_filter=int(ResourceType.TOPIC), resource_name_filter=name,
                pattern_type_filter=int(PatternType.ANY), principal_filter=None, host_filter=None, operation=1,
                permission_type=1),)))
            (result,) = deleted.filter_results
            assert int(result.error_code) == 0
            assert [(a.resource_name, a.principal, a.operation) for a in result.matching_acls] == \
                [(name, "User:bob", int(Operation.READ))]
        everything = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                          principal_filter=None, host_filter=None, operation=1, permission_type=1)
        assert second.call(29, 3, req(29, 3, **everything)).resources == ()
    finally:
        first.close()
        second.close()
