"""A data partition's replicated state machine: Raft applies each produced batch to the
partition's ``DataLog`` (segments, producer state) and snapshots it whole.

``apply`` returns the batch's base offset, or -2 for a batch it refuses (another batch already
holds that offset, or a gap): its producer then gets an error, never an acknowledgement for
data that was not written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgpack

from replication.data_log import DataLog
from replication.record_batch import parse_header

log = logging.getLogger("kcoord.cluster")


class DataStateMachine:
    """A data partition's replicated state: its DataLog (batches, producer state)."""

    def __init__(self, data: DataLog, on_applied: Callable[[], None]) -> None:
        self.data = data
        self._on_applied = on_applied

    def apply(self, epoch: int, payload: bytes) -> int:
        base = parse_header(payload).base_offset
        if base < self.data.log_start_offset:
            # Replaying the journal over a log that retention has since cut: this batch was
            # applied before and deleted; reading it back is impossible and not needed.
            return base
        if base < self.data.log_end_offset:
            # A restarted node replays its Raft journal over the segments it kept (the DataLog
            # is durable state of its own): the very same batch is already there. Anything else
            # at that offset is a different batch that was given a taken offset: refuse it, so
            # its producer gets an error instead of an acknowledgement for data never written.
            stored = self.data.read(base, len(payload), min_one=True)
            if stored[: len(payload)] == payload:
                return base
            log.error("event=data_apply_refused dir=%s error='offset %d already holds another batch'",
                      self.data.directory, base)
            return -2
        try:
            hdr = self.data.append(payload)
        except ValueError as e:  # a gap: refuse, never crash the Raft driver
            log.error("event=data_apply_refused dir=%s error=%r", self.data.directory, str(e))
            return -2
        self._on_applied()
        return hdr.base_offset

    def snapshot(self) -> bytes:
        start, batches, producers, txns = self.data.snapshot()
        return bytes(msgpack.packb({"start": start, "batches": batches, "producers": producers, "txns": txns},
                                   use_bin_type=True))

    def restore(self, blob: bytes) -> None:
        state = msgpack.unpackb(blob, raw=False, strict_map_key=False)
        self.data.reset_to(int(state["start"]), state["batches"], state["producers"], state.get("txns"))
        self._on_applied()
