"""TLS listener settings and certificate principals (issue 17): which listeners ask for client
certificates (Kafka's rule that SASL_SSL heeds only its own ``listener.name.<l>.ssl.client.auth``),
what a node refuses to start with, and the subject string the mapping rules read (Java's RFC 2253
form, checked against Java 17's ``X500Principal.getName()``; DefaultKafkaPrincipalBuilderTest's
anonymous and mapped cases)."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from cluster.config import ConfigError, load_config
from cluster.security.principal_mapper import NoMatchingRule, PrincipalMapper
from cluster.security.tls import ANONYMOUS, certificate_principal, distinguished_name, server_context

LISTENERS = "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094"


def config(**more: object) -> object:
    return load_config(env={}, overrides={"listeners": LISTENERS, "ssl.keystore.location": "node.pem",
                                          "ssl.truststore.location": "ca.pem", "sasl_users": "a:b", **more})


def test_ssl_client_auth_applies_to_ssl_listeners_and_sasl_ssl_only_when_set_for_it() -> None:
    c = load_config(env={}, overrides={"listeners": LISTENERS, "ssl.keystore.location": "k", "sasl_users": "a:b",
                                       "ssl.truststore.location": "ca", "ssl.client.auth": "required"})
    assert (c.client_auth_for("SSL"), c.client_auth_for("SASL_SSL"), c.client_auth_for("PLAINTEXT")) == \
        ("required", "none", "none")
    c = load_config(env={}, overrides={"listeners": LISTENERS, "ssl.keystore.location": "k", "sasl_users": "a:b",
                                       "ssl.truststore.location": "ca",
                                       "listener.name.sasl_ssl.ssl.client.auth": "requested"})
    assert (c.client_auth_for("SSL"), c.client_auth_for("SASL_SSL")) == ("none", "requested")


def test_the_per_listener_key_is_read_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "node.toml"
    path.write_text(f'listeners = "{LISTENERS}"\n"ssl.keystore.location" = "k"\n"ssl.truststore.location" = "ca"\n'
                    '"listener.name.sasl_ssl.ssl.client.auth" = "required"\n"listener.name.ssl.ssl.client.auth" = '
                    '"requested"\nsasl_users = "a:b"\n')
    c = load_config(str(path), env={})
    assert (c.client_auth_for("SSL"), c.client_auth_for("SASL_SSL")) == ("requested", "required")


@pytest.mark.parametrize(("overrides", "setting"), [
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093"}, "ssl_keystore_location"),
    ({"listeners": "SASL_SSL://127.0.0.1:9092", "ssl.keystore.location": "k", "sasl_users": "a:b",
      "peers": "127.0.0.1:9092:19092,127.0.0.1:9093:19093,127.0.0.1:9094:19094", "cluster_secret": "0f3a9c1e7b5d2486aa17c3e9f05b8d62"},
     "listener_security_protocol_map"),
    ({"listeners": "SSL://127.0.0.1:9092", "ssl.keystore.location": "k", "ssl.client.auth": "always"},
     "ssl_client_auth"),
    ({"listeners": "SSL://127.0.0.1:9092", "ssl.keystore.location": "k", "ssl.client.auth": "required"},
     "ssl_truststore_location"),
    ({"listeners": "SSL://127.0.0.1:9092", "ssl.keystore.location": "k", "ssl.keystore.type": "JKS"},
     "ssl_keystore_type"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093", "ssl.keystore.location": "k"},
     "sasl_users"),
])
def test_settings_a_node_refuses(overrides: dict[str, object], setting: str) -> None:
    with pytest.raises(ConfigError, match=setting):
        load_config(env={}, overrides=overrides)


def test_a_single_node_may_serve_sasl_alone() -> None:
    """Without peers no node calls another, so a SASL listener may be the only one."""
    c = load_config(env={}, overrides={"listeners": "SASL_SSL://127.0.0.1:9092", "ssl.keystore.location": "k",
                                       "sasl_users": "a:b"})
    assert c.listener_protocol("SASL_SSL") == "SASL_SSL"


def _der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


def test_the_subject_reads_as_java_writes_it() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Inc"),
                      x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
                      x509.NameAttribute(NameOID.COMMON_NAME, "alice+bob"),
                      x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b.c")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    # Java 17: X509Certificate.getSubjectX500Principal().getName() of this certificate
    assert distinguished_name(_der(cert)) == "1.2.840.113549.1.9.1=#16056140622e63,CN=alice\\+bob,OU=eng,O=Acme\\, Inc,C=US"


def test_principals_from_certificates() -> None:
    """testReturnAnonymousPrincipalForPlaintext / testPrincipalIfSSLPeerIsNotAuthenticated (no
    certificate: ANONYMOUS), testPrincipalWithSslPrincipalMapper (the rules map the subject)."""
    pem = trustme.CA().issue_cert("alice@example.com", common_name="alice", organization_name="Acme",
                                  organization_unit_name="eng").cert_chain_pems[0].bytes()
    der = _der(x509.load_pem_x509_certificate(pem))
    assert certificate_principal(None, PrincipalMapper()) == ANONYMOUS
    assert certificate_principal(der, PrincipalMapper()) == "User:CN=alice,OU=eng,O=Acme"
    assert certificate_principal(der, PrincipalMapper("RULE:^CN=([^,]+),OU=([^,]+),.*$/$1@$2/U")) == "User:ALICE@ENG"
    with pytest.raises(NoMatchingRule):
        certificate_principal(der, PrincipalMapper("RULE:^CN=bob,.*$/bob/"))


def test_a_listener_context_asks_for_certificates_as_configured(tmp_path: Path) -> None:
    import ssl

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "node.pem"))
    c = load_config(env={}, overrides={"listeners": "SSL://127.0.0.1:9092", "ssl.keystore.location": str(tmp_path / "node.pem"),
                                       "ssl.truststore.location": str(tmp_path / "ca.pem")})
    modes = {mode: server_context(c, mode) for mode in ("none", "requested", "required")}
    assert {m: ctx.verify_mode for m, ctx in modes.items()} == \
        {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
    assert all(ctx.minimum_version == ssl.TLSVersion.TLSv1_2 for ctx in modes.values())
