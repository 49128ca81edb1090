"""TLS listeners (issue 17) on a live 3-node cluster, test certificates from ``trustme`` (made here,
never committed).

Every node's first listener is SSL and requires client certificates, so the nodes' own requests to
each other (transaction markers) go over mutual TLS too; a second listener is SASL_SSL (TLS, then
SCRAM). Real clients run a produce / consume-with-commits round trip over SSL with a client
certificate (its subject mapped to the principal by ``ssl.principal.mapping.rules``) and over
SASL_SSL with SCRAM-SHA-512; a client without a certificate, or with one from another CA, fails
its handshake, a wrong password gets Kafka's authentication error, and the cluster keeps serving
the others.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from cluster.tools.local_cluster import free_low_port
from tests.cluster.cluster_harness import Cluster

pytestmark = pytest.mark.cluster
USER, PASSWORD = "alice", "alice-secret"
INTRUDER = "mallory"
N = 60


@dataclass(frozen=True)
class Secure:
    cluster: Cluster
    ssl_boot: str  # the SSL listeners (client certificates required)
    sasl_boot: str  # the SASL_SSL listeners
    ca: str
    cert: str  # alice's client certificate and key
    key: str
    base: Path


def _write(blob: trustme.Blob, path: Path) -> str:
    blob.write_to_path(str(path))
    return str(path)


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secure]:
    base = tmp_path_factory.mktemp("tls")
    ca = trustme.CA(organization_name="kcoord tests")
    server = ca.issue_cert("127.0.0.1", "localhost", common_name="kcoord-node")
    alice = ca.issue_cert("alice@example.com", common_name="alice", organization_name="Acme")
    ca_pem = _write(ca.cert_pem, base / "ca.pem")
    keystore = _write(server.private_key_and_cert_chain_pem, base / "node.pem")
    cert = str(base / "alice.crt")
    with open(cert, "wb") as fh:
        for blob in alice.cert_chain_pems:
            fh.write(blob.bytes())
    key = _write(alice.private_key_pem, base / "alice.key")
    sasl_ports = [free_low_port() for _ in range(3)]
    cluster = Cluster(base / "cluster", settings={
        "group.initial.rebalance.delay.ms": 0, "ssl.keystore.location": keystore, "ssl.truststore.location": ca_pem,
        "ssl.client.auth": "required", "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        "sasl_users": f"{USER}:{PASSWORD},{INTRUDER}:{INTRUDER}-secret",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        # ACLs on: alice and the nodes (their certificates' principal) are super users; mallory has nothing
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:alice;User:kcoord-node"})
    cluster.per_node = {i: {"listeners": f"SSL://127.0.0.1:{n.kafka_port},SASL_SSL://127.0.0.1:{sasl_ports[i]}"}
                        for i, n in enumerate(cluster.layout)}
    cluster.start()
    try:
        yield Secure(cluster, ",".join(f"127.0.0.1:{n.kafka_port}" for n in cluster.layout),
                     ",".join(f"127.0.0.1:{p}" for p in sasl_ports), ca_pem, cert, key, base)
    finally:
        cluster.kill_all()


def ssl_conf(s: Secure, **more: object) -> dict[str, Any]:
    return {"bootstrap.servers": s.ssl_boot, "security.protocol": "SSL", "ssl.ca.location": s.ca,
            "ssl.certificate.location": s.cert, "ssl.key.location": s.key, **more}


def sasl_ssl_conf(s: Secure, password: str = PASSWORD, **more: object) -> dict[str, Any]:
    return {"bootstrap.servers": s.sasl_boot, "security.protocol": "SASL_SSL", "ssl.ca.location": s.ca,
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": password, **more}


def names() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"tls-{tag}", f"g-{tag}"


def create_topic(conf: dict[str, Any], topic: str, partitions: int) -> None:
    admin = AdminClient(conf)  # kept until the result is in: a dropped client cancels its requests
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3)])[topic].result(20)


def confluent_round_trip(conf: dict[str, Any]) -> None:
    topic, group = names()
    create_topic(conf, topic, 3)
    p = Producer({**conf, "acks": "all"})
    for i in range(N):
        p.produce(topic, value=f"m{i}".encode(), partition=i % 3)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    seen = []
    for _ in range(300):
        m = c.poll(0.2)
        if m is not None and not m.error():
            seen.append(m.value())
            c.commit(message=m, asynchronous=False)
        if len(seen) == N:
            break
    c.close()
    assert sorted(seen) == sorted(f"m{i}".encode() for i in range(N))
    again = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    again.subscribe([topic])
    assert all(m is None or m.error() for m in (again.poll(0.5) for _ in range(6))), "the commits were lost"
    again.close()


def test_confluent_kafka_over_ssl_with_a_client_certificate(secure: Secure) -> None:
    confluent_round_trip(ssl_conf(secure))
    logs = "".join(secure.cluster.log_text(i) for i in range(3))
    assert "event=tls_authenticated" in logs and "principal=User:alice" in logs


def test_confluent_kafka_over_sasl_ssl_with_scram_sha_512(secure: Secure) -> None:
    confluent_round_trip(sasl_ssl_conf(secure))


def test_transaction_markers_travel_between_nodes_over_mutual_tls(secure: Secure) -> None:
    """Three partitions led by three nodes: the coordinator writes two of the markers over the wire,
    to the other nodes' SSL listeners, showing its own certificate."""
    topic, _ = names()
    conf = ssl_conf(secure)
    create_topic(conf, topic, 3)
    p = Producer({**conf, "transactional.id": f"tx-{topic}"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(9):
        p.produce(topic, value=b"t%d" % i, partition=i % 3)
    p.commit_transaction(30)
    c = Consumer({**conf, "group.id": f"r-{topic}", "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.subscribe([topic])
    got = []
    for _ in range(150):
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m.value())
        if len(got) == 9:
            break
    c.close()
    assert sorted(got) == sorted(b"t%d" % i for i in range(9))


def test_kafka_python_over_ssl_and_sasl_ssl(secure: Secure) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic, group = names()
    create_topic(ssl_conf(secure), topic, 1)
    tls = {"ssl_cafile": secure.ca, "ssl_check_hostname": True}
    over_ssl = {"bootstrap_servers": secure.ssl_boot, "security_protocol": "SSL", "ssl_certfile": secure.cert,
                "ssl_keyfile": secure.key, **tls}
    over_sasl = {"bootstrap_servers": secure.sasl_boot, "security_protocol": "SASL_SSL",
                 "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": USER, "sasl_plain_password": PASSWORD, **tls}
    for name, conf in (("ssl", over_ssl), ("sasl", over_sasl)):
        producer = KafkaProducer(**conf)
        producer.send(topic, name.encode()).get(timeout=20)
        producer.close()
    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", consumer_timeout_ms=5000,
                             enable_auto_commit=False, **over_sasl)
    assert sorted(m.value for m in consumer) == [b"sasl", b"ssl"]
    consumer.commit()
    consumer.close()
    again = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", consumer_timeout_ms=2000, **over_ssl)
    assert list(again) == []
    again.close()


def test_aiokafka_over_ssl_and_sasl_ssl(secure: Secure) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context
    from aiokafka.structs import TopicPartition

    topic, group = names()
    create_topic(ssl_conf(secure), topic, 1)

    async def run() -> list[bytes]:
        with_cert = create_ssl_context(cafile=secure.ca, certfile=secure.cert, keyfile=secure.key)
        plain = create_ssl_context(cafile=secure.ca)
        producer = AIOKafkaProducer(bootstrap_servers=secure.ssl_boot, security_protocol="SSL", ssl_context=with_cert)
        await producer.start()
        await producer.send_and_wait(topic, b"aio")
        await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=secure.sasl_boot, group_id=group,
                                    security_protocol="SASL_SSL", ssl_context=plain, sasl_mechanism="SCRAM-SHA-512",
                                    sasl_plain_username=USER, sasl_plain_password=PASSWORD,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            got = await asyncio.wait_for(consumer.getone(), 30)
            await consumer.commit()
            assert await consumer.committed(TopicPartition(got.topic, got.partition)) == got.offset + 1
            return [got.value]
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [b"aio"]


def test_refused_clients_and_the_cluster_goes_on(secure: Secure) -> None:
    """No certificate, a certificate of another CA, a wrong password: each refused, as Kafka refuses
    them (a failed handshake; SASL_AUTHENTICATION_FAILED), and the others keep being served."""
    no_cert: dict[str, Any] = {"bootstrap.servers": secure.ssl_boot, "security.protocol": "SSL",
                               "ssl.ca.location": secure.ca}
    with pytest.raises(KafkaException):
        AdminClient(no_cert).list_topics(timeout=2)
    other = trustme.CA().issue_cert("mallory@example.com", common_name="mallory")
    other_cert = str(secure.base / "mallory.crt")
    with open(other_cert, "wb") as fh:
        fh.write(other.cert_chain_pems[0].bytes())
    other_key = _write(other.private_key_pem, secure.base / "mallory.key")
    with pytest.raises(KafkaException):
        AdminClient({**no_cert, "ssl.certificate.location": other_cert, "ssl.key.location": other_key}) \
            .list_topics(timeout=2)
    logs = "".join(secure.cluster.log_text(i) for i in range(3))
    assert "event=tls_handshake_failed" in logs and "PEER_DID_NOT_RETURN_A_CERTIFICATE" in logs
    assert "CERTIFICATE_VERIFY_FAILED" in logs  # mallory's certificate is not of the cluster's CA
    sasl_errors: list[KafkaError] = []
    bad = AdminClient(sasl_ssl_conf(secure, password="wrong", error_cb=sasl_errors.append))
    with pytest.raises(KafkaException):
        bad.list_topics(timeout=2)
    bad.poll(0.5)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in sasl_errors), sasl_errors
    # A client that speaks plain Kafka to a TLS listener: an alert or nothing, then the connection closes.
    host, port = secure.ssl_boot.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"\x00\x00\x00\x05hello")  # not a TLS record
        answer = sock.recv(100)
        assert answer == b"" or answer[0] == 0x15, answer  # 0x15: a TLS alert record
        sock.settimeout(5)
        while answer:
            answer = sock.recv(100)
    assert AdminClient(ssl_conf(secure)).list_topics(timeout=10).brokers
    assert AdminClient(sasl_ssl_conf(secure)).list_topics(timeout=10).brokers
    assert all(secure.cluster.alive(i) for i in range(3))



def test_an_unauthorized_principal_is_refused_until_an_acl_lets_it(secure: Secure) -> None:
    """mallory authenticates (SCRAM over TLS) but has no ACL: its producer is told
    TOPIC_AUTHORIZATION_FAILED and its consumer GROUP_AUTHORIZATION_FAILED, while alice goes on. An
    ACL created through one node (CreateAcls, replicated in the metadata log) then lets mallory
    write to partitions every node leads."""
    topic, group = names()
    create_topic(ssl_conf(secure), topic, 3)
    mallory = {**sasl_ssl_conf(secure), "sasl.username": INTRUDER, "sasl.password": f"{INTRUDER}-secret"}
    failed: list[KafkaError] = []
    p = Producer({**mallory, "message.timeout.ms": 10000,
                  "on_delivery": lambda err, _msg: failed.append(err) if err is not None else None})
    p.produce(topic, value=b"x", partition=0)
    p.flush(15)
    assert [e.code() for e in failed] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], failed
    c = Consumer({**mallory, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    seen: list[int] = []
    for _ in range(30):
        m = c.poll(0.5)
        if m is not None and m.error():
            seen.append(m.error().code())
        if KafkaError.GROUP_AUTHORIZATION_FAILED in seen:
            break
    c.close()
    assert KafkaError.GROUP_AUTHORIZATION_FAILED in seen, seen
    confluent_round_trip(sasl_ssl_conf(secure))  # the others are served all along

    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )
    admin = AdminClient(ssl_conf(secure))
    grant = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{INTRUDER}", "*",
                       AclOperation.WRITE, AclPermissionType.ALLOW)
    admin.create_acls([grant])[grant].result(20)
    # The other nodes apply the ACL when they learn the metadata log's commit, a moment later (as
    # Kafka's brokers do): a producer made meanwhile is refused at once, so each try is a new one.
    deadline = time.monotonic() + 20
    while True:
        failed.clear()
        p = Producer({**mallory, "message.timeout.ms": 20000,
                      "on_delivery": lambda err, _msg: failed.append(err) if err is not None else None})
        for i in range(3):
            p.produce(topic, value=b"y", partition=i)
        assert p.flush(30) == 0
        if not failed or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert failed == [], failed


def _authenticates(conf: dict[str, Any], timeout: float = 2) -> bool:
    errors: list[KafkaError] = []
    admin = AdminClient({**conf, "error_cb": errors.append})
    try:
        admin.list_topics(timeout=timeout)
        return True
    except KafkaException:
        admin.poll(0.2)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
        return False


def test_scram_users_are_replicated(secure: Secure) -> None:
    """A user created through one node's AlterUserScramCredentials (`kcoord users`' call) signs in on
    every node; once its credential is deleted, on none (each node within moments, as in Kafka)."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )
    admin = AdminClient(ssl_conf(secure))
    user = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"dave-pw")
    admin.alter_user_scram_credentials([user])["dave"].result(20)
    described = admin.describe_user_scram_credentials(["dave"])["dave"].result(20)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    dave = [{**sasl_ssl_conf(secure), "bootstrap.servers": b, "sasl.username": "dave", "sasl.password": "dave-pw"}
            for b in secure.sasl_boot.split(",")]

    def everywhere(expected: bool) -> list[bool]:
        deadline = time.monotonic() + 15
        while True:
            seen = [_authenticates(c) for c in dave]
            if all(x == expected for x in seen) or time.monotonic() > deadline:
                return seen
            time.sleep(0.3)

    assert everywhere(True) == [True, True, True]
    assert not _authenticates({**dave[0], "sasl.password": "wrong"})
    admin.alter_user_scram_credentials([UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)])[
        "dave"].result(20)
    assert everywhere(False) == [False, False, False]


def test_kafkajs_over_ssl_and_sasl_ssl(secure: Secure) -> None:
    import json
    import shutil
    import subprocess

    root = Path(__file__).resolve().parents[2]
    if shutil.which("node") is None or not (root / "node_modules" / "kafkajs").exists():
        pytest.fail("KafkaJS needs node and `make setup` (npm install)")
    for boot, security in (
            (secure.ssl_boot, {"ssl": {"ca": secure.ca, "cert": secure.cert, "key": secure.key}}),
            (secure.sasl_boot, {"ssl": {"ca": secure.ca},
                                "sasl": {"mechanism": "scram-sha-512", "username": USER, "password": PASSWORD}})):
        topic, group = names()
        proc = subprocess.run(["node", str(root / "tests/cluster/js/secure_round_trip.js"), boot, topic, group, str(N),
                               json.dumps(security)], capture_output=True, text=True, timeout=150, cwd=root)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert sorted(result["seen"]) == sorted(f"m{i}" for i in range(N)), result
        assert result["committed"] == N, result


def test_java_client_over_ssl_and_sasl_ssl(secure: Secure, tmp_path: Path) -> None:
    import json
    import subprocess

    from cryptography.hazmat.primitives import serialization

    from tests.cluster.java_client import compile_program

    root = Path(__file__).resolve().parents[2]
    # Java's PEM keystore reads a PKCS#8 key (trustme writes EC keys in SEC1 form) followed by the chain.
    key = serialization.load_pem_private_key(Path(secure.key).read_bytes(), password=None)
    pkcs8 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
    keystore = tmp_path / "alice-keystore.pem"
    keystore.write_bytes(pkcs8 + Path(secure.cert).read_bytes())
    trust = {"ssl.truststore.type": "PEM", "ssl.truststore.location": secure.ca}
    jaas = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{USER}" password="{PASSWORD}";'
    cp = compile_program(root / "tests/cluster/java/SecureRoundTrip.java", tmp_path / "classes")
    for name, boot, props in (
            ("ssl", secure.ssl_boot, {"security.protocol": "SSL", **trust, "ssl.keystore.type": "PEM",
                                      "ssl.keystore.location": str(keystore)}),
            ("sasl", secure.sasl_boot, {"security.protocol": "SASL_SSL", **trust, "sasl.mechanism": "SCRAM-SHA-512",
                                        "sasl.jaas.config": jaas})):
        topic, group = names()
        create_topic(ssl_conf(secure), topic, 3)
        path = tmp_path / f"{name}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        out = subprocess.run(["java", "-cp", cp, "SecureRoundTrip", boot, topic, group, str(N), str(path)],
                             capture_output=True, text=True, timeout=240)
        assert out.returncode == 0, out.stderr[-3000:]
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert result == {"consumed": N, "unique": N, "committed": N}, result
