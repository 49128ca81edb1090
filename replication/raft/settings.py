"""Raft timings and the constants shared by the Raft modules (epochs, apply results)."""

from __future__ import annotations

from dataclasses import dataclass

FENCED = -1  # result of an append whose epoch is not the announced one
APPLY_FAILED = -3  # result of an entry the state machine could not apply (skipped on every replica)
# Epochs are term * EPOCH_STRIDE + n: a leader may re-fence (n + 1) without a new election.
EPOCH_STRIDE = 1 << 20


RANKED_MARGIN_S = 0.1  # see RaftGroup._SyncObj__generateRaftTimeout
GUESS_PERIOD_S = 3.0  # see RaftLog.likely_leader

# A node this many committed entries short of applying everything may still take leadership
# over by transfer: it applies them before its announce entry, in a tick or two.
READY_APPLY_LAG = 256


@dataclass(frozen=True, slots=True)
class RaftTimings:
    """Raft timings for the network the cluster runs on (defaults: one host or a LAN)."""

    raft_min_timeout: float = 0.30
    raft_max_timeout: float = 0.60
    append_entries_period: float = 0.05
    tick_period: float = 0.01
    connection_retry: float = 0.5
    compaction_min_entries: int = 20_000
    compaction_min_time: float = 600.0
    compaction_bytes: int = 16 * 1024 * 1024  # a journal this large is compacted now, whatever the above
    compaction_split: bool = True  # nodes compact in turns, never all at once
    transfer_settle: float = 5.0  # a preferred node must be connected this long before it is handed leadership
    # Check-quorum: a leader that has heard from no majority of its group for this long steps
    # down (0 = the longest election timeout). pysyncobj's default of 30 s let a leader cut off
    # from its followers but not from its clients answer them from stale state for 30 s.
    check_quorum: float = 0.0

