"""Re-authentication (KIP-368) in the connection's SASL state machine, on an injected clock: the
session lasts connections.max.reauth.ms, a SaslHandshake starts a new exchange (at most one a
second), which keeps the mechanism and the principal, and an expired session closes."""

from __future__ import annotations

from cluster.security.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE, Gate, SaslAuthenticator, SaslConfig


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def authenticated(clock: Clock, reauth_ms: int = 10_000, user: str = "alice") -> SaslAuthenticator:
    cfg = SaslConfig(["PLAIN", "SCRAM-SHA-512"], {"alice": "a-pw", "bob": "b-pw"}, lambda u, m: None,
                     reauth_ms=reauth_ms, now=clock)
    auth = SaslAuthenticator(cfg)
    assert auth.gate(SASL_HANDSHAKE) is Gate.HANDSHAKE and auth.handshake(1, "PLAIN")[0] == 0
    assert auth.gate(SASL_AUTHENTICATE) is Gate.AUTHENTICATE
    auth.authenticate(f"\0{user}\0{user[0]}-pw".encode())
    assert auth.complete and auth.principal == f"User:{user}"
    return auth


def reauth(auth: SaslAuthenticator, mechanism: str, token: bytes) -> None:
    assert auth.begin_reauth()
    assert not auth.complete and auth.principal == "User:alice"  # the connection keeps its principal meanwhile
    assert auth.gate(SASL_HANDSHAKE) is Gate.HANDSHAKE and auth.handshake(1, mechanism)[0] == 0
    assert auth.gate(SASL_AUTHENTICATE) is Gate.AUTHENTICATE
    auth.authenticate(token)


def test_a_session_lasts_the_lifetime_and_re_authentication_renews_it() -> None:
    clock = Clock()
    auth = authenticated(clock)
    assert auth.session_lifetime_ms == 10_000 and not auth.expired()
    clock.t += 9.0
    reauth(auth, "PLAIN", b"\0alice\0a-pw")
    assert auth.complete and auth.principal == "User:alice"
    clock.t += 9.0  # 18 s after the first exchange, 9 after the second
    assert not auth.expired()
    clock.t += 1.5
    assert auth.expired()


def test_no_lifetime_no_re_authentication_and_at_most_one_start_a_second() -> None:
    clock = Clock()
    assert not authenticated(clock, reauth_ms=0).begin_reauth()
    auth = authenticated(clock)
    reauth(auth, "PLAIN", b"\0alice\0a-pw")
    clock.t += 0.5
    assert not auth.begin_reauth()
    clock.t += 0.6
    assert auth.begin_reauth()


def test_another_principal_or_mechanism_fails_the_re_authentication() -> None:
    import pytest

    from cluster.security.sasl import AuthenticationFailed

    clock = Clock()
    auth = authenticated(clock)
    clock.t += 2
    with pytest.raises(AuthenticationFailed, match="Cannot change principals"):
        reauth(auth, "PLAIN", b"\0bob\0b-pw")
    assert auth.gate(3) is Gate.CLOSE
    auth = authenticated(clock)
    clock.t += 2
    with pytest.raises(AuthenticationFailed, match="mechanism changed"):  # the handshake succeeds, the token fails
        reauth(auth, "SCRAM-SHA-512", b"n,,n=alice,r=abc")
