"""The SASL side of a connection, as Kafka's SaslServerAuthenticator decides it: which requests may
come before authentication, the handshake, and the mechanism exchange (PLAIN, SCRAM-SHA-256/512),
free of sockets and of the wire codec (the connection loop encodes what this decides).

Before authentication only ApiVersions (once, before the handshake), SaslHandshake and, after a
v1 handshake, SaslAuthenticate are served; anything else closes the connection without an answer,
except that after a v1 handshake another API gets its error answer with ILLEGAL_SASL_STATE (34)
first. A v0 handshake means the tokens that follow are raw frames without a Kafka header.

Re-authentication (KIP-368, ``connections.max.reauth.ms`` > 0): a session lasts that long (told to
v1+ clients in SaslAuthenticate's SessionLifetimeMs). A SaslHandshake on an authenticated connection
starts a new exchange (at most one a second), which must use the same mechanism and end as the same
principal; meanwhile the connection keeps its principal. Once the session has expired, any other
request closes the connection without an answer.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from cluster.security.scram import MECHANISMS as SCRAM_MECHANISMS
from cluster.security.scram import ScramCredential, ScramError, ScramServer

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 33, 34, 58


class AuthenticationFailed(Exception):
    """The exchange failed: answer SASL_AUTHENTICATION_FAILED (v1 framing) with this message, then close."""


class State(Enum):
    HANDSHAKE_OR_VERSIONS = "handshake or ApiVersions"
    REAUTH_HANDSHAKE = "re-authentication handshake"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


class Gate(Enum):
    """What to do with a request that arrives before authentication is complete."""

    SERVE = "serve"  # answer it as usual (ApiVersions; anything once authenticated)
    HANDSHAKE = "handshake"  # SaslHandshake: ``handshake``
    AUTHENTICATE = "authenticate"  # SaslAuthenticate: ``authenticate``
    ILLEGAL_STATE = "illegal state"  # answer this API's error with ILLEGAL_SASL_STATE, then close
    CLOSE = "close"  # close without an answer


class _Plain:
    """PLAIN: ``[authzid] NUL user NUL password``, in one step."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = users
        self.user: str | None = None

    def step(self, token: bytes) -> tuple[bytes | None, bool]:
        try:
            parts = token.decode("utf-8").split("\x00")
        except UnicodeDecodeError as e:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from e
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authz, user, password = parts
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self.users.get(user)
        # compared even for an unknown user, so the time taken does not tell
        ok = hmac.compare_digest((expected or "\x00" + password).encode(), password.encode())
        if expected is None or not ok:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authz and authz != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        self.user = user
        return b"", True


class _Scram:
    def __init__(self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None]) -> None:
        self.server = ScramServer(mechanism, lookup)
        self.mechanism = mechanism
        self.steps = 0
        self.user: str | None = None

    def step(self, token: bytes) -> tuple[bytes | None, bool]:
        self.steps += 1
        try:
            if self.steps == 1:
                return self.server.first(token), False
            if self.steps == 2:
                reply = self.server.final(token)
                self.user = self.server.user
                return reply, True
        except ScramError as e:
            # Kafka's message names the phase and the mechanism only: whether the user exists
            # must not show (the failing step does differ, as in Kafka)
            phase = "client first" if self.steps == 1 else "client final"
            raise AuthenticationFailed(f"Authentication failed during authentication due to invalid credentials "
                                       f"with SASL mechanism {self.mechanism} ({phase})") from e
        raise AuthenticationFailed("Unexpected SASL token after the exchange completed")


@dataclass(frozen=True, slots=True)
class SaslConfig:
    mechanisms: Sequence[str]  # sasl.enabled.mechanisms, in the order the handshake lists them
    plain_users: Mapping[str, str]  # PLAIN: user -> password
    scram: Callable[[str, str], ScramCredential | None]  # (user, mechanism) -> stored credential
    reauth_ms: int = 0  # connections.max.reauth.ms: a session's lifetime (0: for ever)
    now: Callable[[], float] = time.monotonic  # seconds (injected by tests)


class SaslAuthenticator:
    """One connection's authentication. ``principal`` is ``User:<name>`` once complete."""

    def __init__(self, config: SaslConfig) -> None:
        self.config = config
        self.state = State.HANDSHAKE_OR_VERSIONS
        self.framed = False  # a v1 handshake: tokens come in SaslAuthenticate requests
        self.principal: str | None = None
        self._mechanism: _Plain | _Scram | None = None
        self.mechanism_name = ""
        self.expires_at: float | None = None  # when the session ends (re-authentication on)
        self._reauth_started = float("-inf")
        self._reauth_refusal: str | None = None  # a re-authentication that must fail at its first token

    @property
    def session_lifetime_ms(self) -> int:
        return self.config.reauth_ms

    def expired(self) -> bool:
        return self.expires_at is not None and self.config.now() > self.expires_at

    def begin_reauth(self) -> bool:
        """A SaslHandshake on the authenticated connection: start re-authenticating (True), or
        not (no session lifetime, or the last start was under a second ago)."""
        now = self.config.now()
        if self.state is not State.COMPLETE or self.expires_at is None or now - self._reauth_started < 1.0:
            return False
        self._reauth_started = now
        self.state = State.REAUTH_HANDSHAKE
        return True

    @property
    def complete(self) -> bool:
        return self.state is State.COMPLETE

    @property
    def expects_raw_token(self) -> bool:
        """After a v0 handshake the tokens come as bare frames, without a Kafka header."""
        return self.state is State.AUTHENTICATE and not self.framed

    def gate(self, api_key: int) -> Gate:
        """Where a request with this API key goes in the current state."""
        if self.state is State.COMPLETE:
            return Gate.SERVE
        if self.state is State.FAILED:
            return Gate.CLOSE
        if api_key == API_VERSIONS and self.state is State.HANDSHAKE_OR_VERSIONS:
            self.state = State.HANDSHAKE
            return Gate.SERVE
        if api_key == SASL_HANDSHAKE and self.state in (State.HANDSHAKE_OR_VERSIONS, State.HANDSHAKE,
                                                        State.REAUTH_HANDSHAKE):
            return Gate.HANDSHAKE
        if self.state is State.AUTHENTICATE and self.framed:
            return Gate.AUTHENTICATE if api_key == SASL_AUTHENTICATE else Gate.ILLEGAL_STATE
        self.state = State.FAILED
        return Gate.CLOSE

    def handshake(self, version: int, mechanism: str) -> tuple[int, list[str]]:
        """The handshake's error code and the enabled mechanisms; on an error, close after answering."""
        enabled = list(self.config.mechanisms)
        if self.state is State.REAUTH_HANDSHAKE and mechanism != self.mechanism_name:
            # Kafka answers the handshake, then fails the exchange at its first token
            self._reauth_refusal = (f"SASL mechanism changed during re-authentication: {self.mechanism_name} "
                                    f"-> {mechanism}")
        if mechanism not in enabled:
            self.state = State.FAILED
            return UNSUPPORTED_SASL_MECHANISM, enabled
        if mechanism == "PLAIN":
            self._mechanism = _Plain(self.config.plain_users)
        elif mechanism in SCRAM_MECHANISMS:
            self._mechanism = _Scram(mechanism, self.config.scram)
        else:
            self.state = State.FAILED
            return UNSUPPORTED_SASL_MECHANISM, enabled
        self.framed = version >= 1
        self.state = State.AUTHENTICATE
        self.mechanism_name = mechanism
        return 0, enabled

    def authenticate(self, token: bytes) -> bytes | None:
        """Feed one token (a raw frame after a v0 handshake, SaslAuthenticate's bytes after v1); the
        reply to send (None: nothing, for a v0 PLAIN success Kafka sends an empty frame)."""
        if self.state is not State.AUTHENTICATE or self._mechanism is None or self._reauth_refusal:
            self.state = State.FAILED
            raise AuthenticationFailed(self._reauth_refusal or "Unexpected SASL token")
        try:
            reply, done = self._mechanism.step(token)
        except AuthenticationFailed:
            self.state = State.FAILED
            raise
        if done:
            principal = f"User:{self._mechanism.user}"
            if self.principal is not None and principal != self.principal:  # a re-authentication
                self.state = State.FAILED
                raise AuthenticationFailed(f"Cannot change principals during re-authentication from "
                                           f"{self.principal} to {principal}")
            self.state = State.COMPLETE
            self.principal = principal
            if self.config.reauth_ms > 0:
                self.expires_at = self.config.now() + self.config.reauth_ms / 1000
        return reply
