"""SCRAM-SHA-256/512 as a Kafka broker serves it (RFC 5802/7677 with Kafka's rules): credentials
derived from a password and a salt, and the server side of one exchange.

Kafka's rules, where they differ from a generic server: no SASLprep (names and passwords are plain
UTF-8), a user name only unescapes ``=2C`` and ``=3D``, an authorization id is allowed if it is
the user, multi-letter extensions such as ``tokenauth=true`` are accepted, the channel-binding
data ``c=`` is not checked, the final nonce need only end with the client's and server's nonces,
an unknown user fails at the first message, and failures are never sent as ``e=`` (the Kafka layer
reports them). Stored credentials with fewer than 4096 iterations do not authenticate.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISM_CODES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # Kafka's ScramMechanism ids
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka refuses upserts outside these


class ScramError(Exception):
    """Authentication failed; the message is for the log and the Kafka error message."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name).digest()


def credential_from_salted(mechanism: str, salt: bytes, salted_password: bytes, iterations: int) -> ScramCredential:
    """What the cluster stores for AlterUserScramCredentials' upsertion (never the salted password)."""
    h = MECHANISMS[mechanism]
    client_key = _hmac(h, salted_password, b"Client Key")
    return ScramCredential(salt, hashlib.new(h, client_key).digest(), _hmac(h, salted_password, b"Server Key"),
                           iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode("utf-8"), salt, iterations)


def make_credential(mechanism: str, password: str, salt: bytes | None = None,
                    iterations: int = MIN_ITERATIONS) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(24)
    return credential_from_salted(mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations)


def unescape_name(saslname: str) -> str:
    out = saslname.replace("=2C", ",").replace("=3D", "=")
    if "=" in saslname.replace("=2C", "").replace("=3D", ""):
        raise ScramError("Invalid username: a '=' must be escaped as =2C or =3D")
    return out


def _server_nonce() -> str:
    n, digits, out = secrets.randbits(130), "0123456789abcdefghijklmnopqrstuvwxyz", ""
    while n:
        n, d = divmod(n, 36)
        out = digits[d] + out
    return out or "0"


def _attributes(text: str) -> list[tuple[str, str]]:
    out = []
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key:
            raise ScramError(f"Invalid SCRAM message: {part!r}")
        out.append((key, value))
    return out


class ScramServer:
    """One exchange: ``first(client_first) -> server_first``, ``final(client_final) -> server_final``;
    then ``user`` is the authenticated user."""

    def __init__(self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None]) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"unknown SCRAM mechanism {mechanism}")
        self.mechanism = mechanism
        self._hash = MECHANISMS[mechanism]
        self._lookup = lookup
        self.user: str | None = None  # set once the proof checked out
        self._user = ""
        self.token_auth = False  # the client asked for delegation-token authentication
        self._cred: ScramCredential | None = None
        self._client_first_bare = self._server_first = self._nonce = ""

    def first(self, message: bytes) -> bytes:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ScramError("Invalid SCRAM client first message: not UTF-8") from e
        flag, sep, rest = text.partition(",")
        if not sep or flag != "n":
            raise ScramError("Invalid SCRAM client first message: channel binding is not supported")
        authz, sep, bare = rest.partition(",")
        if not sep or (authz and not authz.startswith("a=")):
            raise ScramError("Invalid SCRAM client first message")
        attrs = _attributes(bare)
        if attrs and attrs[0][0] == "m":
            attrs = attrs[1:]
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise ScramError("Invalid SCRAM client first message")
        user, client_nonce = unescape_name(attrs[0][1]), attrs[1][1]
        if any(c == "," or not 0x21 <= ord(c) <= 0x7E for c in client_nonce):
            raise ScramError("Invalid SCRAM client nonce")
        extensions = dict(attrs[2:])
        self.token_auth = extensions.get("tokenauth", "false").lower() == "true"
        cred = self._lookup(user, self.mechanism)
        if cred is None:
            raise ScramError("Authentication failed: Invalid user credentials")
        if authz and unescape_name(authz[2:]) != user:
            raise ScramError("Authentication failed: Client requested an authorization id that is different "
                             "from username")
        if cred.iterations < MIN_ITERATIONS:
            raise ScramError(f"Iterations {cred.iterations} is less than the minimum {MIN_ITERATIONS} for "
                             f"{self.mechanism}")
        self._user, self._cred = user, cred
        self._client_first_bare = bare
        self._nonce = client_nonce + _server_nonce()
        salt = base64.b64encode(cred.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={cred.iterations}"
        return self._server_first.encode()

    def final(self, message: bytes) -> bytes:
        if self._cred is None:
            raise ScramError("Invalid SCRAM exchange: no client first message")
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ScramError("Invalid SCRAM client final message: not UTF-8") from e
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise ScramError("Invalid SCRAM client final message: no proof")
        attrs = _attributes(without_proof)
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise ScramError("Invalid SCRAM client final message")
        if not attrs[1][1].endswith(self._nonce):
            raise ScramError("Invalid SCRAM client final message: the nonces do not match")
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError as e:
            raise ScramError("Invalid SCRAM client proof") from e
        auth = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self._hash, self._cred.stored_key, auth)
        if len(proof) != len(signature):
            raise ScramError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(signature, proof, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), self._cred.stored_key):
            raise ScramError("Invalid client credentials")
        server_signature = _hmac(self._hash, self._cred.server_key, auth)
        self.user = self._user
        return b"v=" + base64.b64encode(server_signature)
