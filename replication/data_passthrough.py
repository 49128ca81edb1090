"""The ReplicatedLog of a data partition on a single node: a pass-through to its DataLog.

Why not LocalLog + DataLog: on one node the replicated log and the partition storage
would hold the same bytes, so every produced batch would be written twice and the
replicated log would grow without retention. Here the DataLog *is* the durable store:
``append`` writes the (already offset-assigned) batch into the segments and commits it
at once. A Raft implementation replaces this class with a log whose committed entries
are applied to the DataLog by the same ``apply`` path.

Entry offsets of this log are the Kafka base offsets of the batches (increasing but not
dense), and ``committed_offset`` is the partition's log end offset.
"""

from __future__ import annotations

from collections.abc import Iterable

from replication.api import LeadershipChange, LeadershipListener, LogEntry, StaleEpochError
from replication.data_log import DataLog
from replication.journal import flush_policy
from replication.record_batch import iter_batches


class DataPassThroughLog:
    def __init__(self, name: str, data_log: DataLog, *, epoch: int = 1) -> None:
        self._name = name
        self._data = data_log
        self._epoch = epoch
        self._listeners: list[LeadershipListener] = []

    @property
    def name(self) -> str:
        return self._name

    def is_leader(self) -> bool:
        return True

    def lease_valid(self) -> bool:
        return self.is_leader()  # no peers: nobody else can lead

    def leader_epoch(self) -> int:
        return self._epoch

    def committed_offset(self) -> int:
        return self._data.log_end_offset

    async def append(self, payload: bytes, epoch: int) -> int:
        if epoch != self._epoch:
            raise StaleEpochError(f"{self._name}: epoch {epoch} != {self._epoch}")
        base = self._data.append(payload).base_offset
        if flush_policy().before_send:  # durability = "fsync": on disk before it is acknowledged
            self._data.sync()
        return base

    def read_committed(self, start: int = 0) -> Iterable[LogEntry]:
        off = max(start, self._data.log_start_offset)
        while off < self._data.log_end_offset:
            chunk = self._data.read(off, 1 << 20)
            if not chunk:
                return
            for pos, hdr in iter_batches(chunk, verify_crc=False):
                yield LogEntry(hdr.base_offset, hdr.partition_leader_epoch, chunk[pos : pos + hdr.size])
                off = hdr.next_offset

    def subscribe(self, listener: LeadershipListener) -> None:
        self._listeners.append(listener)
        listener(LeadershipChange(self._name, True, self._epoch))
