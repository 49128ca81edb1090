"""DescribeCluster (60): the brokers as the client's listener reaches them, the cluster id and the
controller, as Metadata names them; the controllers' endpoints are not served (kcoord's nodes are
both), answered UNSUPPORTED_ENDPOINT_TYPE as a Kafka broker answers it."""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import AdminClient

from cluster.apis.common import req_mod
from tests.wire.raw import ask

UNSUPPORTED_ENDPOINT_TYPE = 115


def _ask(bootstrap: str, version: int, body: Any) -> Any:
    return ask(bootstrap, 60, version, body)


def test_describe_cluster_names_what_metadata_names(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_cluster(request_timeout=15).result(15)
    metadata = admin.list_topics(timeout=15)
    assert described.cluster_id == metadata.cluster_id and described.cluster_id
    assert described.controller.id == metadata.controller_id
    assert {(n.id, n.host, n.port) for n in described.nodes} == {
        (b.id, b.host, b.port) for b in metadata.brokers.values()}
    assert str(described.nodes[0].port) == bootstrap.rsplit(":", 1)[1]


def test_the_controllers_endpoints_are_not_served(bootstrap: str) -> None:
    m = req_mod(60, 2)
    brokers = _ask(bootstrap, 2, m.DescribeClusterRequest(include_cluster_authorized_operations=True,
                                                          endpoint_type=1, include_fenced_brokers=True))
    assert int(brokers.error_code.value) == 0 and [b.broker_id for b in brokers.brokers] == [0]
    assert not brokers.brokers[0].is_fenced
    controllers = _ask(bootstrap, 2, m.DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                              endpoint_type=2, include_fenced_brokers=False))
    assert int(controllers.error_code.value) == UNSUPPORTED_ENDPOINT_TYPE and controllers.brokers == ()
