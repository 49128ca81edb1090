"""A data partition's leader epochs, as Kafka's leader-epoch cache keeps them: each epoch with the
first offset written in it, from the ``partitionLeaderEpoch`` the leader stamps on every batch.

A partition's leader epoch is the Raft term of its leader (one leader per term, and Raft never
truncates a committed entry, so epochs only grow along the log). Releases before this one stamped
the leader's fence epoch instead (``term * EPOCH_STRIDE + n``): read as its term.

``end_offset_for`` answers OffsetForLeaderEpoch as ``LeaderEpochFileCache.endOffsetFor`` does: the
largest epoch at most the one asked for, and where it ended (the start of the next epoch, or the
log end for the current one). Compaction leaves the cache as it is (an epoch's start may then
name an offset whose batch is gone, as in Kafka); retention and DeleteRecords trim it from the
start.
"""

from __future__ import annotations

import bisect
import struct
from typing import Any

from replication.raft.settings import EPOCH_STRIDE
from replication.record_batch import PARTITION_LEADER_EPOCH_OFFSET, BatchHeader

UNDEFINED = -1


def term_of(stamped: int) -> int:
    """A batch's partitionLeaderEpoch as an epoch (-1: none stamped). A term of EPOCH_STRIDE (2**20
    elections of one partition) or more would read as a fence epoch: far past any real count."""
    return stamped // EPOCH_STRIDE if stamped >= EPOCH_STRIDE else stamped


def restamp(buf: bytearray, headers: list[BatchHeader], at: int = 0) -> None:
    """The whole batches ``headers`` name, laid out in ``buf`` from ``at``, stamped with the terms
    their fence epochs stand for (the field is outside the CRC)."""
    for hdr in headers:
        if term_of(hdr.partition_leader_epoch) != hdr.partition_leader_epoch:
            struct.pack_into(">i", buf, at + PARTITION_LEADER_EPOCH_OFFSET, term_of(hdr.partition_leader_epoch))
        at += hdr.size


class LeaderEpochs:
    def __init__(self) -> None:
        self.epochs: list[int] = []
        self.starts: list[int] = []

    def observe(self, stamped: int, base_offset: int) -> None:
        """A batch appended at ``base_offset``, stamped ``stamped``: a new epoch begins there if
        it is later than the last one."""
        epoch = term_of(stamped)
        if epoch >= 0 and (not self.epochs or epoch > self.epochs[-1]):
            self.epochs.append(epoch)
            self.starts.append(base_offset)

    def trim_before(self, log_start: int) -> None:
        """The log now starts at ``log_start``: epochs that ended before it go, and the one
        holding it starts there (Kafka's truncateFromStart)."""
        i = bisect.bisect_right(self.starts, log_start) - 1
        if i > 0:
            del self.epochs[:i], self.starts[:i]
        if self.starts and self.starts[0] < log_start:
            self.starts[0] = log_start

    def epoch_at(self, offset: int) -> int:
        """The epoch of the batch holding ``offset`` (-1 if none is known)."""
        i = bisect.bisect_right(self.starts, offset) - 1
        return self.epochs[i] if i >= 0 else UNDEFINED

    def end_offset_for(self, requested: int, current: int, log_end: int) -> tuple[int, int]:
        """(epoch, end offset) for a reader whose position is in ``requested``; ``current`` is
        the leader's own epoch (which may have no batch yet: it began at the log end)."""
        epochs, starts = self.epochs, self.starts
        if current >= 0 and (not epochs or current > epochs[-1]):
            epochs, starts = [*epochs, current], [*starts, log_end]
        if requested == UNDEFINED or not epochs:
            return UNDEFINED, UNDEFINED
        if requested == epochs[-1]:
            return requested, log_end
        higher = bisect.bisect_right(epochs, requested)
        if higher == len(epochs):  # later than every epoch: not one this log has seen
            return UNDEFINED, UNDEFINED
        if higher == 0:  # earlier than every epoch kept: its data is gone; the next epoch's start
            return requested, starts[0]
        return epochs[higher - 1], starts[higher]

    def to_obj(self) -> list[list[int]]:
        return [[e, s] for e, s in zip(self.epochs, self.starts, strict=True)]

    @classmethod
    def from_obj(cls, obj: Any) -> LeaderEpochs:
        out = cls()
        for epoch, start in obj or ():
            out.epochs.append(int(epoch))
            out.starts.append(int(start))
        return out
