"""A data partition's replicated state machine: Raft applies each produced batch to the
partition's ``DataLog`` (segments, producer state); its snapshot names the segments, which a
lagging follower is sent from disk (``replication.data_install``).

``apply`` returns the batch's base offset, or -2 for a batch it refuses (another batch already
holds that offset, or a gap): its producer then gets an error, never an acknowledgement for
data that was not written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgpack

from replication.data_install import ReadAhead, SnapshotInstall, decode
from replication.data_log import MANIFEST_VERSION, DataLog
from replication.failstop import EXIT_CORRUPT, fail_stop
from replication.leader_epochs import restamp, term_of
from replication.raft.snapshot_transfer import InstallError, StreamCursor
from replication.record_batch import HEADER_SIZE, PARTITION_LEADER_EPOCH_OFFSET, parse_header

log = logging.getLogger("kcoord.cluster")


# A DeleteRecords entry: this prefix (a negative base offset, which no batch has), then the new
# log start offset as 8 bytes.
DELETE_RECORDS = b"\xff\xffKCDR"


def delete_records_entry(offset: int) -> bytes:
    return DELETE_RECORDS + offset.to_bytes(8, "big", signed=True)


def _same_batch(stored: bytes, payload: bytes) -> bool:
    """Whether the log holds ``payload`` from its offset on, its leader epoch aside (a batch
    stamped with a fence epoch is stored with its term)."""
    at, end = PARTITION_LEADER_EPOCH_OFFSET, PARTITION_LEADER_EPOCH_OFFSET + 4
    return len(stored) >= len(payload) and stored[:at] == payload[:at] and stored[end:len(payload)] == payload[end:]


class DataStateMachine:
    """A data partition's replicated state: its DataLog (batches, producer state)."""

    def __init__(self, data: DataLog, on_applied: Callable[[], None]) -> None:
        self.data = data
        self._on_applied = on_applied
        self._install: SnapshotInstall | None = None  # a leader's snapshot being received
        self._ends: tuple[bytes, int] | None = None  # the last snapshot streamed, and the offset it ends at

    def apply(self, epoch: int, payload: bytes) -> int:
        if payload.startswith(DELETE_RECORDS):  # not a batch: a batch begins with its base offset, >= 0
            start = self.data.delete_records(int.from_bytes(payload[len(DELETE_RECORDS):], "big", signed=True))
            self._on_applied()
            return start
        if payload[:2] == DELETE_RECORDS[:2]:  # an entry kind of ours this build does not know
            fail_stop("data_apply", f"{self.data.directory}: a data entry of kind {payload[:6]!r}: written by a newer "
                      "release; upgrade this node", EXIT_CORRUPT)
        batch = parse_header(payload)
        base = batch.base_offset
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
            if _same_batch(stored, payload) or self._compacted_from(payload, stored):
                return base
            log.error("event=data_apply_refused dir=%s error='offset %d already holds another batch'",
                      self.data.directory, base)
            return -2
        if term_of(batch.partition_leader_epoch) != batch.partition_leader_epoch:
            stamped = bytearray(payload)  # from a leader of an earlier release: its fence epoch, as the term
            restamp(stamped, [batch])
            payload = bytes(stamped)
        try:
            hdr = self.data.append(payload)
        except ValueError as e:  # a gap: refuse, never crash the Raft driver
            log.error("event=data_apply_refused dir=%s error=%r", self.data.directory, str(e))
            return -2
        self._on_applied()
        return hdr.base_offset

    def _compacted_from(self, payload: bytes, stored: bytes) -> bool:
        """``stored`` (what the log holds from the replayed batch's offset on) is what compaction
        leaves of ``payload``: the batch rewritten over the same offsets, or removed (the next
        batch kept begins after it)."""
        if "compact" not in self.data.cleanup_policy and self.data.cleaned_to() == 0 or len(stored) < HEADER_SIZE:
            return False
        mine, kept = parse_header(payload), parse_header(stored)
        return kept.base_offset > mine.last_offset or (
            kept.base_offset == mine.base_offset and kept.last_offset == mine.last_offset)

    # -- snapshots: the segments as they are on disk (replication.data_install) ------------------

    def snapshot(self) -> bytes:
        """The partition's manifest: the journal entries it replaces are in the segments, fsync'd."""
        return bytes(msgpack.packb(self.data.manifest(), use_bin_type=True))

    def restore(self, blob: bytes) -> None:
        """Load a snapshot at start, or after an install. The segments are the state: they must
        hold everything the snapshot names (an installed copy does; a restarted node's own log
        does, fsync'd before the snapshot was written), or acknowledged data is gone from disk."""
        state = msgpack.unpackb(blob, raw=False, strict_map_key=False)
        if int(state.get("v", 0)) > MANIFEST_VERSION:
            fail_stop("data_log", f"{self.data.directory}: a Raft snapshot of version {state['v']}; this build reads "
                      f"versions up to {MANIFEST_VERSION}: upgrade this node", EXIT_CORRUPT)
        if "batches" in state:  # a snapshot written before snapshots named segments
            self.data.reset_to(int(state["start"]), state["batches"], state["producers"], state.get("txns"))
        elif self.data.log_end_offset < int(state["end"]):
            fail_stop("data_log", f"{self.data.directory}: the log ends at offset {self.data.log_end_offset} but "
                      f"its Raft snapshot covers offsets up to {state['end']}: acknowledged data is missing "
                      "from the disk; refusing to start", EXIT_CORRUPT)
        else:
            self.data.delete_records(int(state.get("start", 0)))  # a DeleteRecords the snapshot holds
        self._on_applied()

    def stream_next(self, snapshot: bytes, cursor: StreamCursor) -> bytes | None:
        """The leader's next message of a follower's install, up to the offset ``snapshot`` ends
        at; NOT_READY while it is read from disk (on the reader thread), None when all is sent
        (InstallError: start again)."""
        if self._ends is None or self._ends[0] != snapshot:
            state = msgpack.unpackb(snapshot, raw=False, strict_map_key=False)
            if "end" not in state:
                raise InstallError("a snapshot from before snapshots named segments (the next one will)")
            self._ends = (snapshot, int(state["end"]))
        if cursor.ahead is None:
            cursor.ahead = ReadAhead(self.data, cursor)
        ahead: ReadAhead = cursor.ahead
        return ahead.next(self._ends[1])

    def install(self, message: bytes) -> None:
        """A follower's part of an install: ``begin`` starts a staging copy, ``seg`` adds to it."""
        kind, *fields = decode(message)
        if kind == "begin" and len(fields) == 2:
            self.install_abort()
            self._install = SnapshotInstall(self.data, int(fields[0]), int(fields[1]))
        elif kind == "seg" and len(fields) == 3 and isinstance(fields[2], bytes) and self._install is not None:
            self._install.feed(int(fields[0]), int(fields[1]), fields[2])
        elif kind == "seg":
            raise InstallError("a chunk without its stream's beginning")
        else:
            raise InstallError(f"unknown snapshot stream message {kind!r}")

    def install_end(self, snapshot: bytes) -> None:
        """The stream's end, with the leader's snapshot: the copy replaces the log if it matches."""
        if self._install is None:
            raise InstallError("the end of a stream this node did not follow")
        install, self._install = self._install, None
        try:
            manifest = msgpack.unpackb(snapshot, raw=False, strict_map_key=False)
            if int(manifest.get("v", 0)) > MANIFEST_VERSION:  # refused before it replaces the log
                raise InstallError(f"a snapshot of version {manifest['v']}; this build reads versions up to "
                                   f"{MANIFEST_VERSION}")
            install.finish(manifest)
        except BaseException:
            install.abort()
            raise

    def close(self) -> None:
        """The partition's Raft group is closed (node stop, topic deleted): an install ends with it."""
        self.install_abort()

    def install_abort(self) -> None:
        if self._install is not None:
            install, self._install = self._install, None
            install.abort()
