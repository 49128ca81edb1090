"""KIP-890's verification guard, kept where transactional writes arrive (a data partition's leader
per producer; the group API per offsets partition and producer): a write is checked with the
transaction coordinator first, and a marker for its producer that is written meanwhile voids the
check, so a write verified before its transaction ended is refused after. Under transaction
version 2 a marker at the verified write's own epoch does not: it ends the producer's previous
transaction, whose end bumped the epoch the write carries (Kafka's isV2NextTransactionStarted)."""

from __future__ import annotations

from typing import Generic, TypeVar

K = TypeVar("K")


class VerificationGuards(Generic[K]):
    def __init__(self) -> None:
        self._guards: dict[K, tuple[int, bool, object]] = {}  # key -> (epoch, version 2, token)

    def begin(self, key: K, epoch: int, version2: bool) -> object:
        """The token of a check of a write at ``epoch`` (the one under way, if any)."""
        entry = self._guards.get(key)
        if entry is None or entry[:2] != (epoch, version2):
            entry = self._guards[key] = (epoch, version2, object())
        return entry[2]

    def holds(self, key: K, token: object) -> bool:
        """No marker voided the check ``token`` since it began."""
        entry = self._guards.get(key)
        return entry is not None and entry[2] is token

    def marker(self, key: K, epoch: int, version: int) -> None:
        """A marker of transaction ``version`` at ``epoch`` is written for the key's producer."""
        entry = self._guards.get(key)
        if entry is not None and not (version >= 2 and entry[1] and entry[0] == epoch):
            del self._guards[key]

    def clear(self) -> None:
        self._guards.clear()
