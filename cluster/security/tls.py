"""TLS of the SSL and SASL_SSL listeners (Python's ``ssl``) and the principal a client certificate
gives, as Kafka builds it: ``User:<mapped subject>`` with a certificate, ``User:ANONYMOUS`` without.

The subject is written as Java's ``X500Principal.getName()`` does (RFC 2253, most specific RDN
first, e.g. ``CN=alice,OU=eng,O=Acme``, so Kafka's mapping rules read the same string): the
attributes RFC 2253 names (CN, L, ST, O, OU, C, STREET, DC, UID) as cryptography's RFC 4514 form
writes them, any other as its dotted OID and ``#`` with the hex of the value's DER encoding
(``1.2.840.113549.1.9.1=#16056140622e63`` for emailAddress ``a@b.c``; checked against Java 17).
"""

from __future__ import annotations

import ssl
from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID

from cluster.config import NodeConfig
from cluster.security.principal_mapper import PrincipalMapper
from replication.hub import RaftTLS

ANONYMOUS = "User:ANONYMOUS"
HANDSHAKE_TIMEOUT_S = 10.0  # an unauthenticated connection is not held longer than this in the handshake
_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_context(config: NodeConfig, client_auth: str) -> ssl.SSLContext:
    """A listener's TLS: the node's key and chain, TLS 1.2 or later, and client certificates asked
    for as ``client_auth`` says (none, requested, required), checked against the truststore."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(config.ssl_keystore_location, password=config.ssl_key_password or None)
    if config.ssl_truststore_location:
        ctx.load_verify_locations(cafile=config.ssl_truststore_location)
    ctx.verify_mode = _VERIFY[client_auth]
    return ctx


def client_context(config: NodeConfig) -> ssl.SSLContext:
    """The node as a client of another node's SSL listener: it trusts the truststore and shows its
    own certificate, so a listener that requires client certificates admits its peers."""
    ctx = ssl.create_default_context(cafile=config.ssl_truststore_location or None)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(config.ssl_keystore_location, password=config.ssl_key_password or None)
    return ctx


def peer_context(config: NodeConfig) -> ssl.SSLContext | None:
    """How this node reaches the others' first listener (the one in ``peers``): TLS if it is SSL."""
    return client_context(config) if config.listener_protocol(config.listener_list()[0].name) == "SSL" else None


def raft_tls(config: NodeConfig) -> RaftTLS | None:
    """TLS of the Raft port (``raft_tls``): mutual, the peers' certificates checked against the
    truststore, each dialed peer's against its host."""
    if not config.raft_tls:
        return None
    server = server_context(config, "required")
    server.minimum_version = ssl.TLSVersion.TLSv1_3  # both ends are kcoord nodes: nothing older to speak
    client = client_context(config)
    client.minimum_version = ssl.TLSVersion.TLSv1_3
    return RaftTLS(server=server, client=client)


_RFC2253_KEYWORDS = frozenset({NameOID.COMMON_NAME, NameOID.LOCALITY_NAME, NameOID.STATE_OR_PROVINCE_NAME,
                               NameOID.ORGANIZATION_NAME, NameOID.ORGANIZATIONAL_UNIT_NAME, NameOID.COUNTRY_NAME,
                               NameOID.STREET_ADDRESS, NameOID.DOMAIN_COMPONENT, NameOID.USER_ID})
_ENCODINGS = {12: "utf-8", 19: "ascii", 22: "ascii", 20: "latin-1", 30: "utf-16-be", 28: "utf-32-be"}


def _der_value(attribute: x509.NameAttribute[Any]) -> bytes:
    """The DER encoding of an attribute's value (tag, length, content), as Java prints it in hex."""
    tag = int(getattr(getattr(attribute, "_type", None), "value", 12))  # the ASN.1 string type; UTF8String if unknown
    value = attribute.value if isinstance(attribute.value, bytes) else \
        attribute.value.encode(_ENCODINGS.get(tag, "utf-8"))
    n = len(value)
    length = bytes([n]) if n < 0x80 else bytes([0x80 | ((n.bit_length() + 7) // 8)]) + n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag]) + length + value


def distinguished_name(der: bytes) -> str:
    """A certificate's subject as Java's RFC 2253 ``getName()`` writes it (see the module's note)."""
    subject = x509.load_der_x509_certificate(der).subject
    return ",".join("+".join(a.rfc4514_string() if a.oid in _RFC2253_KEYWORDS else
                             f"{a.oid.dotted_string}=#{_der_value(a).hex()}" for a in rdn)
                    for rdn in reversed(subject.rdns))


def certificate_principal(der: bytes | None, mapper: PrincipalMapper) -> str:
    """``User:<name>`` from a client certificate (``NoMatchingRule`` if no rule maps its subject),
    ``User:ANONYMOUS`` when the client showed none."""
    if der is None:
        return ANONYMOUS
    return f"User:{mapper.name(distinguished_name(der))}"
