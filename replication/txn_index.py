"""The transactions of one data partition: which are open, which were aborted, and the last
stable offset (LSO) that read_committed consumers read up to (after Kafka's ProducerStateManager
and TransactionIndex).

Fed with every batch the partition applies, in offset order: a transactional data batch opens
its producer's transaction at its base offset (if none is open); a control batch (a COMMIT or
ABORT marker) closes it, and an aborted one is remembered with the span of offsets it covered,
so that a read_committed Fetch can name the aborted transactions its data overlaps. Applied
batches are committed ones here (the partition applies what Raft committed), so the high
watermark is the log end and the LSO is the first offset of the oldest open transaction, or
the log end when none is open.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass
from typing import Any

from replication.record_batch import BatchHeader, InvalidBatchError, decode_records

ABORT, COMMIT = 0, 1
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int  # the LSO when the marker was written (ends a Fetch's search early)


def read_marker(batch: bytes | memoryview) -> tuple[int, int] | None:
    """(COMMIT or ABORT, coordinator epoch) of a control batch's marker record (None: not a
    marker we know)."""
    try:
        records = decode_records(batch)
    except InvalidBatchError:
        return None
    if not records or records[0].key is None or len(records[0].key) < _CONTROL_KEY.size:
        return None
    _version, kind = _CONTROL_KEY.unpack_from(records[0].key)
    value = records[0].value or b""
    epoch = _MARKER_VALUE.unpack_from(value)[1] if len(value) >= _MARKER_VALUE.size else -1
    return (kind, epoch) if kind in (ABORT, COMMIT) else None


def control_type(batch: bytes | memoryview) -> int | None:
    """COMMIT or ABORT for a control batch's marker record (None: not a marker we know)."""
    found = read_marker(batch)
    return found[0] if found is not None else None


def marker_record(commit: bool, coordinator_epoch: int) -> tuple[bytes, bytes]:
    """The (key, value) of an end-of-transaction marker record."""
    return _CONTROL_KEY.pack(0, COMMIT if commit else ABORT), _MARKER_VALUE.pack(0, coordinator_epoch)


class PartitionTxns:
    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.aborted: list[AbortedTxn] = []  # by marker offset
        self._ends: list[int] = []  # the aborted markers' offsets, for bisect
        # the newest coordinator epoch that wrote a marker for each producer: a marker from an
        # older (deposed) coordinator is refused (Kafka's TRANSACTION_COORDINATOR_FENCED)
        self.coordinator_epochs: dict[int, int] = {}

    def update(self, hdr: BatchHeader, kind: int | None, coordinator_epoch: int = -1) -> None:
        """Apply one appended batch (``kind``: its marker type, for a control batch)."""
        if not hdr.is_transactional or hdr.producer_id < 0:
            return
        pid = hdr.producer_id
        if not hdr.is_control:
            self.ongoing.setdefault(pid, hdr.base_offset)
            return
        if coordinator_epoch > self.coordinator_epochs.get(pid, -1):
            self.coordinator_epochs[pid] = coordinator_epoch
        first = self.ongoing.pop(pid, None)
        if first is None or kind != ABORT:
            return  # a marker with nothing open ("empty transaction"), or a commit
        others = min(self.ongoing.values(), default=hdr.base_offset + 1)
        self.aborted.append(AbortedTxn(pid, first, hdr.base_offset, others))
        self._ends.append(hdr.base_offset)

    def is_open(self, producer_id: int) -> bool:
        return producer_id in self.ongoing

    def fenced_coordinator(self, producer_id: int, coordinator_epoch: int) -> bool:
        return coordinator_epoch < self.coordinator_epochs.get(producer_id, -1)

    def last_stable_offset(self, high_watermark: int, log_start: int) -> int:
        first = min(self.ongoing.values(), default=None)
        if first is None or first >= high_watermark:
            return high_watermark
        return max(first, log_start)

    def aborted_between(self, fetch_offset: int, upper: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of every aborted transaction with data in
        ``[fetch_offset, upper)``: the consumer drops those producers' batches from there up to
        their ABORT markers."""
        out = []
        for e in self.aborted[bisect.bisect_left(self._ends, fetch_offset):]:
            if e.first_offset < upper:
                out.append((e.producer_id, e.first_offset))
            if e.last_stable_offset >= upper:
                break  # no later marker can concern an offset below upper
        return out

    def forget_before(self, log_start: int) -> None:
        """Retention removed everything below ``log_start``: aborted spans ending there go."""
        cut = bisect.bisect_left(self._ends, log_start)
        if cut:
            del self.aborted[:cut]
            del self._ends[:cut]

    def forget_markers(self, offsets: set[int]) -> None:
        """Compaction removed these ABORT markers (their transactions' records went before them):
        a read_committed reader must not be told of those aborts any more (it would skip the
        producer's later committed batches, waiting for a marker that is gone)."""
        kept = [e for e in self.aborted if e.last_offset not in offsets]
        if len(kept) != len(self.aborted):
            self.aborted = kept
            self._ends = [e.last_offset for e in kept]

    def to_obj(self) -> dict[str, Any]:
        return {"ongoing": dict(self.ongoing),
                "aborted": [[e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset] for e in self.aborted],
                "coordinator_epochs": dict(self.coordinator_epochs)}

    @classmethod
    def from_obj(cls, obj: Any) -> PartitionTxns:
        t = cls()
        if obj:
            t.ongoing = {int(k): int(v) for k, v in dict(obj.get("ongoing") or {}).items()}
            t.aborted = [AbortedTxn(int(a), int(b), int(c), int(d)) for a, b, c, d in obj.get("aborted") or []]
            t._ends = [e.last_offset for e in t.aborted]
            t.coordinator_epochs = {int(k): int(v) for k, v in dict(obj.get("coordinator_epochs") or {}).items()}
        return t
