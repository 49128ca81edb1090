"""The SCRAM credentials a node authenticates with, and the rules of changing them
(AlterUserScramCredentials / DescribeUserScramCredentials, Kafka's ScramControlManager).

Two sources: the cluster's replicated credentials (``metadata.scram``, changed through the API) and
the bootstrap users of the configuration (``sasl_users``, derived at start with a random salt, as
``kafka-storage.sh format --add-scram`` seeds a new cluster). A replicated row for a user and
mechanism wins; a deleted one (iterations 0) hides the bootstrap credential too, so a password
changed or removed through the API stays changed when nodes restart with the old configuration.
Only salts and keys are kept: a salted password is turned into keys and dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from cluster.metadata import ScramRow
from cluster.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_CODES,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted,
)

MECHANISM_IDS = {name: code for code, name in MECHANISM_CODES.items()}
RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM = 91, 92, 93, 33


class ScramUsers:
    def __init__(self, bootstrap: dict[tuple[str, str], ScramCredential], stored: Callable[[], frozenset[ScramRow]]) -> None:
        self._bootstrap = bootstrap
        self._stored = stored
        self._seen: frozenset[ScramRow] | None = None
        self._rows: dict[tuple[str, int], ScramRow] = {}

    def _index(self) -> dict[tuple[str, int], ScramRow]:
        current = self._stored()
        if current is not self._seen:
            self._rows, self._seen = {(r[0], r[1]): r for r in current}, current
        return self._rows

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        """The credential ``user`` authenticates with over ``mechanism`` (None: none)."""
        row = self._index().get((user, MECHANISM_IDS.get(mechanism, 0)))
        if row is None:
            return self._bootstrap.get((user, mechanism))
        _, _, salt, stored, server, iterations = row
        return ScramCredential(bytes.fromhex(salt), bytes.fromhex(stored), bytes.fromhex(server), iterations) \
            if iterations else None

    def held(self) -> dict[str, dict[int, int]]:
        """Every user with a credential: mechanism code -> iterations."""
        out: dict[str, dict[int, int]] = {}
        for user, mechanism in self._bootstrap:
            code = MECHANISM_IDS[mechanism]
            if (user, code) not in self._index():
                out.setdefault(user, {})[code] = self._bootstrap[(user, mechanism)].iterations
        for (user, code), row in self._index().items():
            if row[5]:
                out.setdefault(user, {})[code] = row[5]
        return out


@dataclass(frozen=True, slots=True)
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


def plan(deletions: Iterable[tuple[str, int]], upsertions: Iterable[Upsertion],
         held: dict[str, dict[int, int]]) -> tuple[dict[str, tuple[int, str | None]], list[ScramRow]]:
    """Kafka's ScramControlManager.alterCredentials for one request: each user's result (error
    code, message) and the rows to apply. Deletions, then upsertions, in order; a user's first
    error stands and its later alterations are skipped; a user altered a second time after an
    accepted alteration is refused whole (92)."""
    errors: dict[str, tuple[int, str | None]] = {}
    deleting: dict[str, int] = {}
    upserting: dict[str, Upsertion] = {}
    twice = (DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")

    def refuse(name: str, mechanism: int) -> tuple[int, str] | None:
        if not name:
            return UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
        if mechanism not in MECHANISM_CODES:
            return UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
        return None

    for name, mechanism in deletions:
        if name in errors:
            continue
        if deleting.pop(name, None) is not None:
            errors[name] = twice
            continue
        why = refuse(name, mechanism)
        if why is None and mechanism not in held.get(name, {}):
            why = RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        if why is not None:
            errors[name] = why
        else:
            deleting[name] = mechanism
    for u in upsertions:
        if u.name in errors:
            continue
        if deleting.pop(u.name, None) is not None or upserting.pop(u.name, None) is not None:
            errors[u.name] = twice
            continue
        why = refuse(u.name, u.mechanism)
        if why is None and u.iterations < MIN_ITERATIONS:
            why = UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        if why is None and u.iterations > MAX_ITERATIONS:
            why = UNACCEPTABLE_CREDENTIAL, "Too many iterations"
        if why is not None:
            errors[u.name] = why
        else:
            upserting[u.name] = u
    change: list[ScramRow] = [(name, mechanism, "", "", "", 0) for name, mechanism in deleting.items()]
    for u in upserting.values():
        cred = credential_from_salted(MECHANISM_CODES[u.mechanism], u.salt, u.salted_password, u.iterations)
        change.append((u.name, u.mechanism, cred.salt.hex(), cred.stored_key.hex(), cred.server_key.hex(),
                       u.iterations))
    results = {**{name: (0, None) for name in (*deleting, *upserting)}, **errors}
    return results, change
