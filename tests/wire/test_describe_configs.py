"""DescribeConfigs (32): a topic's configs (its overrides, then the defaults it gets from the node's
settings or Kafka's, with their sources and synonyms), the node's own settings under their Kafka
names (secrets hidden), a consumer group's settings, and Kafka's errors for a topic that does not
exist, another node's id and a resource type kcoord does not describe. Asked as clients ask: confluent-kafka's AdminClient, and a
raw v4 request."""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from cluster.apis.common import req_mod
from tests.wire.raw import ask

TOPIC_OVERRIDE, STATIC_BROKER, DEFAULT = 1, 4, 5


def _ask(bootstrap: str, body: Any, version: int = 4) -> Any:
    return ask(bootstrap, 32, version, body)


def test_a_client_describes_a_topics_configs_and_the_nodes(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("cfg-t", 1, 1, config={"retention.ms": "3600000",
                                                        "cleanup.policy": "compact"})])["cfg-t"].result(15)
    topic = ConfigResource(ConfigResource.Type.TOPIC, "cfg-t")
    got = admin.describe_configs([topic])[topic].result(15)
    assert got["retention.ms"].value == "3600000" and got["retention.ms"].source == TOPIC_OVERRIDE
    assert got["cleanup.policy"].value == "compact"
    assert got["segment.bytes"].value == "1073741824" and got["segment.bytes"].source in (STATIC_BROKER, DEFAULT)
    assert got["min.insync.replicas"].value == "1" and got["min.insync.replicas"].source == DEFAULT
    assert not got["retention.ms"].is_read_only
    broker = ConfigResource(ConfigResource.Type.BROKER, "0")
    mine = admin.describe_configs([broker])[broker].result(15)
    assert mine["message.max.bytes"].value.isdigit() and mine["message.max.bytes"].is_read_only
    assert all(e.value is None for name, e in mine.items() if e.is_sensitive)


def test_synonyms_types_and_errors_as_kafka_answers_them(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("cfg-u", 1, 1, config={"retention.bytes": "1000"})])["cfg-u"].result(15)
    m = req_mod(32, 4)
    resp = _ask(bootstrap, m.DescribeConfigsRequest(resources=(
        m.DescribeConfigsResource(resource_type=2, resource_name="cfg-u", configuration_keys=("retention.bytes",
                                                                                            "retention.ms")),
        m.DescribeConfigsResource(resource_type=2, resource_name="no-such-topic", configuration_keys=None),
        m.DescribeConfigsResource(resource_type=4, resource_name="7", configuration_keys=None),
        m.DescribeConfigsResource(resource_type=32, resource_name="g", configuration_keys=None),
        m.DescribeConfigsResource(resource_type=8, resource_name="0", configuration_keys=None),
    ), include_synonyms=True, include_documentation=True))
    topic, missing, other_node, group, logger = resp.results
    entries = {c.name: c for c in topic.configs}
    assert set(entries) == {"retention.bytes", "retention.ms"}  # the keys asked for, no more
    rb = entries["retention.bytes"]
    assert (rb.value, rb.config_source, rb.config_type) == ("1000", TOPIC_OVERRIDE, 5)  # LONG
    assert [(s.name, s.source) for s in rb.synonyms] == [("retention.bytes", TOPIC_OVERRIDE),
                                                          ("log.retention.bytes", DEFAULT)]
    assert [s.name for s in entries["retention.ms"].synonyms] == ["log.retention.ms"]
    assert int(missing.error_code.value) == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert int(other_node.error_code.value) == 42 and "broker id" in (other_node.error_message or "")  # INVALID_REQUEST
    described = {c.name: (c.value, c.config_source) for c in group.configs}
    assert int(group.error_code.value) == 0 and len(described) == 21, described  # Kafka 4.4's, but its internal ones
    assert described["consumer.heartbeat.interval.ms"] == ("5000", DEFAULT)
    assert described["consumer.session.timeout.ms"] == ("45000", DEFAULT)
    assert described["share.record.lock.duration.ms"] == ("30000", DEFAULT)
    assert int(logger.error_code.value) == 42  # BROKER_LOGGER: not described here
