"""``kcoord up --secure``: what a local cluster needs to run as a secure one, made once and kept in
``<data>/secure``: a CA of its own, the nodes' key and certificate (for 127.0.0.1 and localhost),
an admin user with a random password, and the settings that use them.

The Raft port speaks TLS too (``raft_tls``), with the same CA and node certificate, so Raft
traffic (the metadata log holds SCRAM stored and server keys) is not readable on the network.
Each node gets two listeners: INTERNAL (SSL, client certificates required: the nodes' own requests,
mutual TLS with the nodes' certificate) on its usual port, and CLIENT (SASL_SSL, SCRAM) on that
port + 100, the one clients are told about. ACLs are on (StandardAuthorizer rules) with the admin
and the nodes as super users, so every other user needs ACLs (``kcoord acls``). The admin's client
settings are written to ``admin.properties``, ready for ``--command-config`` and for librdkafka.
Keys and the password are files only their owner may read.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from cluster.config import STANDARD_AUTHORIZER
from cluster.tools.local_cluster import LocalNode

CLIENT_PORT_OFFSET = 100
NODE_NAME = "kcoord-node"  # the nodes' certificate subject: CN=kcoord-node, principal User:CN=kcoord-node


@dataclass(frozen=True)
class SecureSetup:
    directory: Path
    settings: dict[str, object]  # for every node
    private: dict[str, str]  # for every node, by field name, through the environment (the admin's password)
    per_node: dict[int, dict[str, object]]  # each node's listeners
    client_ports: list[int]  # the SASL_SSL ports, which clients are told
    admin_properties: Path


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _certificate(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name | None,
                 signer: ec.EllipticCurvePrivateKey, *, ca: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=3650 if ca else 825))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
            decipher_only=False), critical=True)
    else:  # a node is a server to clients and a client of the other nodes
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                               ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return builder.sign(signer, hashes.SHA256())


def make_material(directory: Path) -> tuple[Path, Path, str]:
    """The CA, the nodes' keystore and the admin's password, made on first use and kept:
    ``(ca.pem, node.pem, password)``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_path, keystore, password_path = directory / "ca.pem", directory / "node.pem", directory / "admin.password"
    if not (ca_path.exists() and keystore.exists() and password_path.exists()):
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = _certificate("kcoord local CA", ca_key, None, ca_key, ca=True)
        node_key = ec.generate_private_key(ec.SECP256R1())
        node_cert = _certificate(NODE_NAME, node_key, ca_cert.subject, ca_key, ca=False)
        pem = serialization.Encoding.PEM
        _write_private(directory / "ca-key.pem", _pem_key(ca_key))  # kept to sign client certificates
        ca_path.write_bytes(ca_cert.public_bytes(pem))
        _write_private(keystore, _pem_key(node_key) + node_cert.public_bytes(pem) + ca_cert.public_bytes(pem))
        _write_private(password_path, secrets.token_urlsafe(18).encode())
    return ca_path, keystore, password_path.read_text().strip()


def prepare(root: Path, layout: list[LocalNode]) -> SecureSetup:
    directory = root / "secure"
    ca, keystore, password = make_material(directory)
    client_ports = [n.kafka_port + CLIENT_PORT_OFFSET for n in layout]
    settings: dict[str, object] = {
        "listener.security.protocol.map": "INTERNAL:SSL,CLIENT:SASL_SSL",
        "ssl.keystore.location": str(keystore), "ssl.truststore.location": str(ca), "ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": f"User:admin;User:CN={NODE_NAME}",
        "raft_tls": "true"}
    per_node: dict[int, dict[str, object]] = {
        n.node_id: {"listeners": f"INTERNAL://{n.host}:{n.kafka_port},CLIENT://{n.host}:{client_ports[n.node_id]}"}
        for n in layout}
    properties = directory / "admin.properties"
    _write_private(properties, "".join(f"{k}={v}\n" for k, v in (
        ("bootstrap.servers", ",".join(f"{n.host}:{p}" for n, p in zip(layout, client_ports, strict=True))),
        ("security.protocol", "SASL_SSL"), ("sasl.mechanism", "SCRAM-SHA-512"), ("sasl.username", "admin"),
        ("sasl.password", password), ("ssl.ca.location", str(ca)))).encode())
    return SecureSetup(directory, settings, {"sasl_users": f"admin:{password}"}, per_node, client_ports, properties)
