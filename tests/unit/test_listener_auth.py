"""Which listeners authenticate (cluster/security/listener_auth.py) and the settings behind it."""

from __future__ import annotations

import pytest

from cluster.config import ConfigError, NodeConfig
from cluster.security.listener_auth import authenticators, bootstrap_credentials


def config(**kw: object) -> NodeConfig:
    base: dict[str, object] = {"host": "127.0.0.1", "port": 9092,
                               "listeners": "PLAINTEXT://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093"}
    base.update(kw)
    return NodeConfig(**base).validate()  # type: ignore[arg-type]


def test_only_sasl_listeners_authenticate_and_scram_credentials_are_salted() -> None:
    cfg = config(listener_security_protocol_map="EXTERNAL:SASL_PLAINTEXT", sasl_users="alice:secret")
    assert cfg.listener_protocol("PLAINTEXT") == "PLAINTEXT" and cfg.listener_protocol("EXTERNAL") == "SASL_PLAINTEXT"
    boot = bootstrap_credentials(cfg)
    made = authenticators(cfg, lambda user, mechanism: boot.get((user, mechanism)))
    assert set(made) == {"EXTERNAL"}
    a, b = made["EXTERNAL"](), made["EXTERNAL"]()
    assert a is not b  # one exchange per connection
    creds = a.config.scram("alice", "SCRAM-SHA-512")
    assert creds is not None and creds.iterations >= 4096 and a.config.scram("bob", "SCRAM-SHA-512") is None
    assert a.config.plain_users == {}  # PLAIN is not enabled by default
    assert a.handshake(1, "PLAIN")[0] == 33


@pytest.mark.parametrize("kw,why", [
    ({"listener_security_protocol_map": "EXTERNAL:SASL_PLAINTEXT"}, "sasl_users"),
    ({"listener_security_protocol_map": "EXTERNAL:SSL"}, "ssl_keystore_location"),  # TLS needs the node's key
    ({"listener_security_protocol_map": "EXTERNAL:KERBEROS"}, "listener_security_protocol_map"),
    ({"sasl_enabled_mechanisms": "GSSAPI"}, "sasl_enabled_mechanisms"),
    ({"listener_security_protocol_map": "EXTERNAL:SASL_PLAINTEXT", "sasl_users": "alice"}, "sasl_users"),
])
def test_bad_settings_are_refused(kw: dict[str, object], why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        config(**kw)
