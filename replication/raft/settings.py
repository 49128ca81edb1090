"""Raft timings and the constants shared by the Raft modules (epochs, apply results)."""

from __future__ import annotations

from dataclasses import dataclass

FENCED = -1  # result of an append whose epoch is not the announced one
APPLY_FAILED = -3  # result of an entry the state machine could not apply (skipped on every replica)
# Epochs are term * EPOCH_STRIDE + n: a leader may re-fence (n + 1) without a new election.
EPOCH_STRIDE = 1 << 20


RANKED_MARGIN_S = 0.1  # see RaftGroup._SyncObj__generateRaftTimeout
GUESS_PERIOD_S = 3.0  # see RaftLog.likely_leader

# The leader lease and sticky voters (replication/raft/election.py) both derive from one setting,
# the minimum election timeout T. A voter refuses to help elect anyone else for T after the last
# message it got from its leader (connected or not), and its own election timer never runs out
# sooner; the leader counts a follower's echo of a message it sent at s as vouching until
# s + lease. Any other leader needs a vote from one of the followers that vouched, given no
# sooner than T after it received that message (at s or later), on its own clock. With every
# clock's rate within MAX_CLOCK_RATE_DRIFT of real time, T on the voter's clock lasts at least
# T / (1 + d) real seconds and the lease on the leader's at most lease / (1 - d), so
#     lease <= T * (1 - d) / (1 + d),
# less LEASE_READ_MARGIN_S, the time a read answered under the lease may still take.
MAX_CLOCK_RATE_DRIFT = 0.05
LEASE_READ_MARGIN_S = 0.05


def lease_for(min_election_timeout: float) -> float:
    """The leader lease that a voter stickiness of ``min_election_timeout`` makes safe (above)."""
    d = MAX_CLOCK_RATE_DRIFT
    return max(min_election_timeout * (1 - d) / (1 + d) - LEASE_READ_MARGIN_S, 0.0)


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
    # Preferred-leader balancing as Kafka's controller does it (auto.leader.rebalance.enable,
    # leader.imbalance.check.interval.seconds, leader.imbalance.per.broker.percentage): a node
    # checks every interval, and hands partitions back only to a node whose share of its
    # preferred partitions led elsewhere exceeds the percentage. Every move reloads a
    # coordinator's groups, so it must be rare (replication/raft/balance.py).
    auto_leader_rebalance: bool = True
    leader_imbalance_check_interval: float = 300.0
    leader_imbalance_per_broker_percentage: float = 10.0
    # Check-quorum: a leader that has heard from no majority of its group for this long steps
    # down (0 = the longest election timeout). pysyncobj's default of 30 s let a leader cut off
    # from its followers but not from its clients answer them from stale state for 30 s.
    check_quorum: float = 0.0

# Of a group's snapshot blob (none: version 0, the same layout). A later version is refused, on
# load (the node stops) and when streamed from a leader (the stream is refused).
SNAPSHOT_VERSION = 1
