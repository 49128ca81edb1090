"""The features a node supports and the cluster has finalized, as ApiVersions v3+ reports them
(KIP-584). Clients switch behaviour on a finalized level: a Java producer runs transaction
version 2 only when ``transaction.version`` is finalized at 2 or more, and then stops sending
AddPartitionsToTxn to every node. So a level is finalized only once every node of the cluster
serves what it implies: the level follows the newest metadata version all of them read
(``Topology.lowest_metadata_version``), and each level's API versions are checked against the
registry (``unserved``, held by a test).

The finalized epoch is that metadata version: it rises when the last node of a rolling upgrade
registers, so a client that caches features by epoch (trusting only the highest it has seen)
re-reads them then.
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster.metadata_log import TRANSACTION_V2


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    supported: tuple[int, int]  # (lowest, highest) level this node can run
    # level -> the metadata version every node must read for it to be finalized
    from_version: dict[int, int]
    # level -> {api key: the highest version that level needs served}
    apis: dict[int, dict[int, int]]

    def finalized(self, lowest_metadata_version: int) -> int:
        return max((level for level, version in self.from_version.items() if lowest_metadata_version >= version),
                   default=0)


FEATURES = (
    # 1: KIP-848's consumer protocol (ConsumerGroupHeartbeat/Describe)
    Feature("group.version", (0, 1), {1: 0}, {1: {68: 1, 69: 1}}),
    # 1: flexible transaction log records; 2 (KIP-890 part 2): an epoch bump at every end,
    # partitions added by their leaders (Produce v12, EndTxn v5, TxnOffsetCommit v5)
    Feature("transaction.version", (0, 2), {1: 0, 2: TRANSACTION_V2}, {1: {}, 2: {0: 12, 26: 5, 28: 5, 24: 5}}),
)


def supported(version: int) -> list[tuple[str, int, int]]:
    """``(name, lowest, highest)``; before ApiVersions v4 a feature whose lowest level is 0 is
    left out (Kafka's rule: older clients cannot read it)."""
    return [(f.name, *f.supported) for f in FEATURES if version >= 4 or f.supported[0] > 0]


def finalized(lowest_metadata_version: int) -> list[tuple[str, int]]:
    levels = ((f.name, f.finalized(lowest_metadata_version)) for f in FEATURES)
    return [(name, level) for name, level in levels if level > 0]


def unserved(served: dict[int, int], lowest_metadata_version: int) -> list[str]:
    """Finalized levels whose APIs are not all served at the versions they need (``served``: api
    key -> highest version): empty, or what a client would trip over."""
    return [f"{f.name}={f.finalized(lowest_metadata_version)} needs api {key} v{need}, served v{served.get(key, -1)}"
            for f in FEATURES for level, needs in f.apis.items() if level <= f.finalized(lowest_metadata_version)
            for key, need in needs.items() if served.get(key, -1) < need]
