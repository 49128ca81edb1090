"""The features a node supports and the cluster has finalized, as ApiVersions v3+ reports them
(KIP-584). Clients switch behaviour on a finalized level: a Java producer runs transaction
version 2 only when ``transaction.version`` is finalized at 2 or more, so a level is finalized
here only once every API version it implies is served (``Feature.apis``), which a unit test holds.

The levels are this build's: the finalized epoch rises whenever a level changes, so a client that
caches features by epoch re-reads them (it only ever trusts the highest epoch it has seen).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    supported: tuple[int, int]  # (lowest, highest) level this node can run
    finalized: int  # the level the cluster runs (0: off, not reported)
    # level -> {api key: the lowest highest-version that level needs served}
    apis: dict[int, dict[int, int]]


FEATURES = (
    # 1: KIP-848's consumer protocol (ConsumerGroupHeartbeat/Describe)
    Feature("group.version", (0, 1), 1, {1: {68: 1, 69: 1}}),
    # 1: flexible transaction log records; 2 (KIP-890 part 2: Produce v12, EndTxn v5,
    # TxnOffsetCommit v5, AddPartitionsToTxn v5) is not served yet
    Feature("transaction.version", (0, 1), 1, {1: {}, 2: {0: 12, 26: 5, 28: 5, 24: 5}}),
)
FINALIZED_EPOCH = 1  # rises with any change of a finalized level


def supported(version: int) -> list[tuple[str, int, int]]:
    """``(name, lowest, highest)``; before ApiVersions v4 a feature whose lowest level is 0 is
    left out (Kafka's rule: older clients cannot read it)."""
    return [(f.name, *f.supported) for f in FEATURES if version >= 4 or f.supported[0] > 0]


def finalized() -> list[tuple[str, int]]:
    return [(f.name, f.finalized) for f in FEATURES if f.finalized > 0]


def unserved(served: dict[int, int]) -> list[str]:
    """Finalized levels whose APIs are not all served at the versions they need (``served``: api
    key -> highest version): empty, or what a client would trip over."""
    return [f"{f.name}={f.finalized} needs api {key} v{need}, served v{served.get(key, -1)}"
            for f in FEATURES for level, needs in f.apis.items() if level <= f.finalized
            for key, need in needs.items() if served.get(key, -1) < need]
