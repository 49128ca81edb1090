"""Transactional offsets not yet committed or aborted (Kafka's pending transactional offsets).

TxnOffsetCommit writes offset records stamped with the producer id; they wait here, invisible
to OffsetFetch, until the transaction's marker: COMMIT installs them, ABORT drops them. A plain
OffsetCommit (or a tombstone) of the same partition made after a pending one wins over it, as
Kafka's "the record with the greater offset wins" rule decides at the marker.
"""

from __future__ import annotations

from .records import OffsetCommitKey, OffsetCommitValue

Partition = tuple[str, int]


class PendingOffsets:
    __slots__ = ("by_producer", "by_group", "epochs", "coordinator_epochs")

    def __init__(self) -> None:
        # producer id -> group -> partition -> (value, superseded by a later plain commit)
        self.by_producer: dict[int, dict[str, dict[Partition, tuple[OffsetCommitValue, bool]]]] = {}
        self.by_group: dict[str, set[int]] = {}  # the producers with offsets pending in each group
        # the newest epoch each producer wrote or ended a transaction with here: an older one is a
        # zombie (Kafka: the producer state of the __consumer_offsets partition)
        self.epochs: dict[int, int] = {}
        self.coordinator_epochs: dict[int, int] = {}  # of each producer's last marker here

    def saw_epoch(self, producer_id: int, epoch: int) -> None:
        if epoch > self.epochs.get(producer_id, -1):
            self.epochs[producer_id] = epoch

    def fenced(self, producer_id: int, epoch: int) -> bool:
        return epoch < self.epochs.get(producer_id, -1)

    def add(self, producer_id: int, key: OffsetCommitKey, value: OffsetCommitValue, epoch: int = -1) -> None:
        self.saw_epoch(producer_id, epoch)
        self.by_producer.setdefault(producer_id, {}).setdefault(key.group, {})[(key.topic, key.partition)] = (
            value, False)
        self.by_group.setdefault(key.group, set()).add(producer_id)

    def plain_commit(self, key: OffsetCommitKey) -> None:
        """A later non-transactional commit of the partition: pending ones must not overwrite it."""
        for pid in self.by_group.get(key.group, ()):
            pending = self.by_producer[pid].get(key.group, {})
            tp = (key.topic, key.partition)
            if tp in pending:
                pending[tp] = (pending[tp][0], True)

    def tombstone(self, key: OffsetCommitKey) -> None:
        for pid in list(self.by_group.get(key.group, ())):
            self.by_producer[pid].get(key.group, {}).pop((key.topic, key.partition), None)

    def end(self, producer_id: int, commit: bool, epoch: int = -1,
            coordinator_epoch: int = -1) -> list[tuple[OffsetCommitKey, OffsetCommitValue]]:
        """The transaction of ``producer_id`` ended: the offsets to install (none on abort)."""
        self.saw_epoch(producer_id, epoch)
        if coordinator_epoch > self.coordinator_epochs.get(producer_id, -1):
            self.coordinator_epochs[producer_id] = coordinator_epoch
        groups = self.by_producer.pop(producer_id, {})
        out = []
        for group, pending in groups.items():
            pids = self.by_group.get(group)
            if pids is not None:
                pids.discard(producer_id)
                if not pids:
                    del self.by_group[group]
            if commit:
                out += [(OffsetCommitKey(group, t, p), v) for (t, p), (v, superseded) in pending.items()
                        if not superseded]
        return out

    def has_open(self, group: str) -> bool:
        return bool(self.by_group.get(group))

    def partitions(self, group: str) -> set[Partition]:
        """The partitions of ``group`` with an offset pending in some transaction."""
        return {tp for pid in self.by_group.get(group, ()) for tp in self.by_producer[pid].get(group, {})}

    def items(self) -> list[tuple[int, int, OffsetCommitKey, OffsetCommitValue]]:
        """(producer id, its epoch, key, value) of every pending offset not superseded (what a
        compacted log must still carry)."""
        return [(pid, self.epochs.get(pid, -1), OffsetCommitKey(g, t, p), v) for pid, groups in self.by_producer.items()
                for g, pending in groups.items() for (t, p), (v, superseded) in pending.items() if not superseded]
