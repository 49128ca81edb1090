"""The SASL authenticator (cluster/security/sasl.py): Kafka's order of requests before
authentication, the handshake, PLAIN and SCRAM exchanges (scramp as the client), failures."""

from __future__ import annotations

import pytest
import scramp

from cluster.security.sasl import (
    ILLEGAL_SASL_STATE,
    UNSUPPORTED_SASL_MECHANISM,
    AuthenticationFailed,
    Gate,
    SaslAuthenticator,
    SaslConfig,
    State,
)
from cluster.security.scram import make_credential

METADATA, API_VERSIONS, HANDSHAKE, AUTHENTICATE = 3, 18, 17, 36
CREDS = {("bob", "SCRAM-SHA-512"): make_credential("SCRAM-SHA-512", "bob-secret")}
CONFIG = SaslConfig(["PLAIN", "SCRAM-SHA-512"], {"alice": "alice-secret"}, lambda u, m: CREDS.get((u, m)))


def test_plain_after_api_versions_and_a_v1_handshake() -> None:
    a = SaslAuthenticator(CONFIG)
    assert a.gate(API_VERSIONS) is Gate.SERVE
    assert a.gate(HANDSHAKE) is Gate.HANDSHAKE
    assert a.handshake(1, "PLAIN") == (0, ["PLAIN", "SCRAM-SHA-512"])
    assert a.gate(AUTHENTICATE) is Gate.AUTHENTICATE
    assert a.authenticate(b"alice\x00alice\x00alice-secret") == b""  # authzid = the user is fine
    assert a.complete and a.principal == "User:alice"
    assert a.gate(METADATA) is Gate.SERVE


def test_scram_over_a_v0_handshake_is_raw_frames() -> None:
    a = SaslAuthenticator(CONFIG)
    assert a.gate(HANDSHAKE) is Gate.HANDSHAKE  # ApiVersions is optional
    assert a.handshake(0, "SCRAM-SHA-512")[0] == 0 and not a.framed
    client = scramp.ScramClient(["SCRAM-SHA-512"], "bob", "bob-secret")
    first = a.authenticate(client.get_client_first().encode())
    assert first is not None and not a.complete
    client.set_server_first(first.decode())
    final = a.authenticate(client.get_client_final().encode())
    assert final is not None
    client.set_server_final(final.decode())
    assert a.principal == "User:bob"


@pytest.mark.parametrize("first", [METADATA, AUTHENTICATE])
def test_other_requests_before_the_handshake_close_the_connection(first: int) -> None:
    a = SaslAuthenticator(CONFIG)
    assert a.gate(first) is Gate.CLOSE and a.state is State.FAILED
    assert a.gate(API_VERSIONS) is Gate.CLOSE


def test_a_second_api_versions_closes_and_after_a_v1_handshake_others_get_illegal_state() -> None:
    a = SaslAuthenticator(CONFIG)
    a.gate(API_VERSIONS)
    assert a.gate(API_VERSIONS) is Gate.CLOSE
    b = SaslAuthenticator(CONFIG)
    b.gate(HANDSHAKE)
    b.handshake(1, "PLAIN")
    assert b.gate(METADATA) is Gate.ILLEGAL_STATE and ILLEGAL_SASL_STATE == 34


def test_an_unknown_mechanism_is_refused_with_the_enabled_list() -> None:
    a = SaslAuthenticator(CONFIG)
    a.gate(HANDSHAKE)
    assert a.handshake(1, "GSSAPI") == (UNSUPPORTED_SASL_MECHANISM, ["PLAIN", "SCRAM-SHA-512"])
    assert a.state is State.FAILED


@pytest.mark.parametrize("token", [b"alice\x00alice\x00wrong", b"\x00bob\x00x", b"\x00\x00alice-secret",
                                   b"\x00alice\x00", b"carol\x00alice\x00alice-secret", b"alice-secret", b"\xff\x00a\x00b"])
def test_plain_failures(token: bytes) -> None:
    a = SaslAuthenticator(CONFIG)
    a.gate(HANDSHAKE)
    a.handshake(1, "PLAIN")
    with pytest.raises(AuthenticationFailed):
        a.authenticate(token)
    assert a.state is State.FAILED and a.principal is None


def test_a_scram_failure_does_not_say_whether_the_user_exists() -> None:
    messages = []
    for user, pw in (("nobody", "x"), ("bob", "wrong")):
        a = SaslAuthenticator(CONFIG)
        a.gate(HANDSHAKE)
        a.handshake(1, "SCRAM-SHA-512")
        client = scramp.ScramClient(["SCRAM-SHA-512"], user, pw)
        with pytest.raises(AuthenticationFailed) as e:
            first = a.authenticate(client.get_client_first().encode())
            assert first is not None
            client.set_server_first(first.decode())
            a.authenticate(client.get_client_final().encode())
        messages.append(str(e.value))
    assert all("SCRAM-SHA-512" in m and "nobody" not in m and "bob" not in m for m in messages)
