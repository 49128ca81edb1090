"""SASL on a listener (issue 17, first step: SASL_PLAINTEXT): a node with a PLAINTEXT listener and a
SASL_PLAINTEXT one. Real clients authenticate with SCRAM-SHA-512 (confluent-kafka), SCRAM-SHA-256
and PLAIN (kafka-python) and run a produce / consume-with-commits round trip; a wrong password gets
Kafka's authentication error while the node keeps serving everyone else; a client that skips the
exchange is cut off; the PLAINTEXT listener is unchanged."""

from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.tools.local_cluster import free_low_port
from tests.cluster.harness import NodeProcess

pytestmark = pytest.mark.cluster
USER, PASSWORD = "alice", "alice-secret"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NodeProcess, str]]:
    base = tmp_path_factory.mktemp("sasl")
    port, sasl_port = free_low_port(), free_low_port()
    n = NodeProcess(base, port=port, settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
        "sasl_users": f"{USER}:{PASSWORD},bob:bob-secret",
        "group.initial.rebalance.delay.ms": 0}).start()
    yield n, f"127.0.0.1:{sasl_port}"
    n.kill()


def sasl_conf(bootstrap: str, mechanism: str = "SCRAM-SHA-512", password: str = PASSWORD) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": USER, "sasl.password": password}


def test_confluent_kafka_round_trip_with_scram_sha_512(node: tuple[NodeProcess, str]) -> None:
    _, bootstrap = node
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(sasl_conf(bootstrap))
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(15)
    p = Producer(sasl_conf(bootstrap))
    for i in range(100):
        p.produce(topic, value=f"m{i}".encode())
    assert p.flush(20) == 0
    c = Consumer({**sasl_conf(bootstrap), "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    seen = []
    for _ in range(200):
        m = c.poll(0.2)
        if m is not None and not m.error():
            seen.append(m.value())
            c.commit(message=m, asynchronous=False)
        if len(seen) == 100:
            break
    c.close()
    assert sorted(seen) == sorted(f"m{i}".encode() for i in range(100))


def test_kafka_python_with_scram_sha_256_and_plain(node: tuple[NodeProcess, str]) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    _, bootstrap = node
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(sasl_conf(bootstrap))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    for mechanism in ("SCRAM-SHA-256", "PLAIN"):
        auth = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
                "sasl_plain_username": USER, "sasl_plain_password": PASSWORD}
        producer = KafkaProducer(bootstrap_servers=bootstrap, **auth)
        producer.send(topic, mechanism.encode()).get(timeout=20)
        producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username=USER, sasl_plain_password=PASSWORD)
    assert sorted(m.value for m in consumer) == [b"PLAIN", b"SCRAM-SHA-256"]
    consumer.close()


def test_a_wrong_password_is_refused_and_the_others_go_on(node: tuple[NodeProcess, str]) -> None:
    n, bootstrap = node
    errors: list[KafkaError] = []
    bad = AdminClient({**sasl_conf(bootstrap, password="wrong"), "error_cb": errors.append})
    with pytest.raises(KafkaException):
        bad.list_topics(timeout=3)
    bad.poll(0.5)  # the error callbacks run here
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    del bad
    assert AdminClient(sasl_conf(bootstrap)).list_topics(timeout=10).topics is not None
    assert AdminClient({"bootstrap.servers": n.bootstrap}).list_topics(timeout=10).topics is not None  # PLAINTEXT
    assert n.alive()
    assert "event=sasl_authentication_failed" in n.log_text()


def test_a_request_before_authentication_is_cut_off(node: tuple[NodeProcess, str]) -> None:
    """Metadata v1 without a handshake: the connection closes with no answer."""
    _, bootstrap = node
    host, port = bootstrap.rsplit(":", 1)
    body = struct.pack(">hhi", 3, 1, 7) + struct.pack(">h", 4) + b"test" + struct.pack(">i", -1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        assert s.recv(4) == b""  # closed, nothing written


def test_plaintext_listener_unchanged(tmp_path: Path, node: tuple[NodeProcess, str]) -> None:
    n, _ = node
    topic = f"pt-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": n.bootstrap})
    p.produce(topic, value=b"x")
    assert p.flush(20) == 0


@pytest.fixture(scope="module")
def reauth_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NodeProcess, str]]:
    base = tmp_path_factory.mktemp("reauth")
    port, sasl_port = free_low_port(), free_low_port()
    n = NodeProcess(base, port=port, settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN", "sasl_users": f"{USER}:{PASSWORD}",
        "connections.max.reauth.ms": 1000, "group.initial.rebalance.delay.ms": 0}).start()
    yield n, f"127.0.0.1:{sasl_port}"
    n.kill()


def test_sessions_expire_and_an_expired_connection_is_closed(reauth_node: tuple[NodeProcess, str]) -> None:
    """KIP-368: the final SaslAuthenticate tells the session's lifetime; past it, a request that is
    not a re-authentication closes the connection, unanswered."""
    import time

    from kio.schema.metadata.v12.request import MetadataRequest

    from tests.wire.raw import RawConn

    _, bootstrap = reauth_node
    conn = RawConn(bootstrap)
    done = conn.sasl_plain_response(USER, PASSWORD)
    assert int(done.error_code) == 0 and done.session_lifetime.total_seconds() == 1.0
    ask = MetadataRequest(topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    assert conn.call(3, 12, ask) is not None
    time.sleep(1.2)
    assert conn.call(3, 12, ask) is None  # closed, no answer
    conn.close()


def test_librdkafka_re_authenticates_and_keeps_its_connections(reauth_node: tuple[NodeProcess, str]) -> None:
    n, bootstrap = reauth_node
    before = len(n.log_text())
    topic = f"re-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(sasl_conf(bootstrap))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    p = Producer(sasl_conf(bootstrap))
    import time

    deadline = time.monotonic() + 2.8  # more than two lifetimes
    sent = 0
    while time.monotonic() < deadline:
        p.produce(topic, value=b"x")
        sent += 1
        p.poll(0.1)
    assert p.flush(20) == 0
    log = n.log_text()[before:]
    assert log.count("event=sasl_reauthentication_started") >= 2, "librdkafka did not re-authenticate"
    assert "event=sasl_session_expired" not in log
    c = Consumer({**sasl_conf(bootstrap), "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = 0
    for _ in range(40):
        got += sum(1 for m in c.consume(num_messages=1000, timeout=0.5) if not m.error())
        if got >= sent:
            break
    c.close()
    assert got == sent
