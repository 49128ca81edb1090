"""DeleteAcls on a 3-node cluster: its filters are matched where the change is applied, on the
committed ACLs. An ACL created through node 0 and at once deleted through node 1 (which had not
applied the creation yet) used to stay, with a success that matched nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from cluster.security.authorizer import Operation, PatternType, ResourceType
from cluster.tools.local_cluster import free_low_port
from tests.cluster.cluster_harness import Cluster
from tests.cluster.test_authorization import acl, req, sub
from tests.wire.raw import RawConn

pytestmark = pytest.mark.cluster


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Cluster, list[str]]]:
    """Nodes that talk to each other over SSL with their certificates (an authorizer needs that);
    the test's clients use a second, PLAINTEXT listener whose ANONYMOUS users may manage ACLs."""
    ca = trustme.CA(organization_name="kcoord tests")
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    ca.issue_cert("127.0.0.1", common_name="kcoord-node").private_key_and_cert_chain_pem.write_to_path(
        str(tmp_path / "node.pem"))
    plain = [free_low_port() for _ in range(3)]
    c = Cluster(tmp_path / "cluster", settings={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "ssl.keystore.location": str(tmp_path / "node.pem"), "ssl.truststore.location": str(tmp_path / "ca.pem"),
        "ssl.client.auth": "required", "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "listener.security.protocol.map": "SSL:SSL,CLIENTS:PLAINTEXT",
        "super.users": "User:kcoord-node;User:ANONYMOUS",  # the nodes, and the CLIENTS listener's users
        "offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1})  # fewer groups to start
    c.per_node = {i: {"listeners": f"SSL://127.0.0.1:{n.kafka_port},CLIENTS://127.0.0.1:{plain[i]}"}
                  for i, n in enumerate(c.layout)}
    c.start()
    try:
        yield c, [f"127.0.0.1:{port}" for port in plain]
    finally:
        c.kill_all()
        rep = getattr(request.node, "rep_call", None)
        if rep is not None and rep.failed:
            for i in range(c.n):
                print(f"--- node {i} log ---\n{c.log_text(i)[-4000:]}")


def test_an_acl_created_through_one_node_is_deleted_at_once_through_another(
        cluster: tuple[Cluster, list[str]]) -> None:
    _nodes, clients = cluster
    first, second = RawConn(clients[0], timeout=15), RawConn(clients[1], timeout=15)
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
