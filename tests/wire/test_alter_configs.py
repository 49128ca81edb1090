"""IncrementalAlterConfigs (44) and AlterConfigs (33): a client changes a topic's configs and
describes them back, an alteration Kafka refuses changes nothing, ``validate_only`` changes
nothing, and a new ``max.message.bytes`` holds for the next produce. Asked as clients ask:
confluent-kafka's AdminClient and Producer, and raw requests for the errors."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from kio.schema.errors import ErrorCode

from cluster.apis.common import req_mod
from tests.wire.raw import ask as _ask

TOPIC_OVERRIDE = 1




def _described(admin: AdminClient, topic: str) -> dict[str, Any]:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return dict(admin.describe_configs([res])[res].result(15))


def _incremental(admin: AdminClient, topic: str, *entries: ConfigEntry, validate_only: bool = False) -> None:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=list(entries))
    admin.incremental_alter_configs([res], validate_only=validate_only)[res].result(15)


def test_a_client_alters_a_topics_configs_and_they_hold(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("alt-t", 1, 1, config={"retention.ms": "3600000"})])["alt-t"].result(15)
    _incremental(admin, "alt-t", ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
                 ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET),
                 ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE))
    got = _described(admin, "alt-t")
    assert got["cleanup.policy"].value == "delete,compact" and got["cleanup.policy"].source == TOPIC_OVERRIDE
    assert got["max.message.bytes"].value == "2000"
    assert got["retention.ms"].source != TOPIC_OVERRIDE  # back to the node's setting
    # the new max.message.bytes holds for the next produce (a key: the topic is compacted now)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "compression.type": "none"})
    errors: list[Any] = []
    p.produce("alt-t", key=b"k", value=b"x" * 5000, on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)  # a batch of its own
    p.produce("alt-t", key=b"k", value=b"x" * 100, on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    assert errors[0] is not None and errors[0].name() == "MSG_SIZE_TOO_LARGE" and errors[1] is None, errors
    # validate_only changes nothing
    _incremental(admin, "alt-t", ConfigEntry("retention.bytes", "5000", incremental_operation=AlterConfigOpType.SET),
                 validate_only=True)
    assert _described(admin, "alt-t")["retention.bytes"].source != TOPIC_OVERRIDE


def test_alter_configs_replaces_the_whole_override_set(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("alt-r", 1, 1, config={"retention.ms": "3600000"})])["alt-r"].result(15)
    m = req_mod(33, 2)
    resp = _ask(bootstrap, 33, 2, m.AlterConfigsRequest(validate_only=False, resources=(
        m.AlterConfigsResource(resource_type=2, resource_name="alt-r",
                               configs=(m.AlterableConfig(name="retention.bytes", value="100000"),)),)))
    assert resp.responses[0].error_code == ErrorCode.none
    got = _described(admin, "alt-r")
    assert got["retention.bytes"].value == "100000" and got["retention.bytes"].source == TOPIC_OVERRIDE
    assert got["retention.ms"].source != TOPIC_OVERRIDE


def test_what_kafka_refuses_changes_nothing(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("alt-e", 1, 1, config={"retention.ms": "3600000"})])["alt-e"].result(15)
    with pytest.raises(KafkaException) as e:
        _incremental(admin, "alt-e", ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET),
                     ConfigEntry("retention.bytes", "x", incremental_operation=AlterConfigOpType.SET))
    assert e.value.args[0].name() == "INVALID_CONFIG"
    assert _described(admin, "alt-e")["retention.ms"].value == "3600000"
    m = req_mod(44, 1)

    def res(rtype: int, name: str, *configs: tuple[str, int, str | None]) -> Any:
        return m.AlterConfigsResource(resource_type=rtype, resource_name=name, configs=tuple(
            m.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in configs))

    resp = _ask(bootstrap, 44, 1, m.IncrementalAlterConfigsRequest(validate_only=False, resources=(
        res(2, "no-such-topic", ("retention.ms", 0, "1")),
        res(2, "alt-e", ("retention.ms", 2, "1")),  # APPEND to a LONG
        res(2, "alt-e", ("retention.ms", 0, None), ("retention.ms", 1, None)),  # named twice, and alt-e twice
        res(4, "0", ("log.retention.check.interval.ms", 0, "1")),  # a node setting that is not dynamic
        res(4, ""),  # an empty alteration of them is fine
        res(32, "g", ("consumer.session.timeout.ms", 0, "30000")),  # below group.consumer.min.session.timeout.ms
    )))
    codes = [(r.resource_name, r.error_code) for r in resp.responses]
    assert codes == [("no-such-topic", ErrorCode.unknown_topic_or_partition), ("alt-e", ErrorCode.invalid_request),
                     ("alt-e", ErrorCode.invalid_request), ("0", ErrorCode.invalid_request), ("", ErrorCode.none),
                     ("g", ErrorCode.invalid_config)], codes
    assert _described(admin, "alt-e")["retention.ms"].value == "3600000"
