"""The node's open-file budget: every data partition holds descriptors on every node, so the open-file
limit (RLIMIT_NOFILE) bounds how many partitions a node can hold next to its own files and its
client connections. A creation past it is refused at the request (POLICY_VIOLATION), instead of
being found by a journal's EMFILE on every node at once.

Descriptors, counted in /proc/<pid>/fd of a node before and after creating topics of 10, 40 and 50
partitions (a single node, and each node of a three-node cluster alike):

* a data partition in a cluster: 7 -- its Raft journal (a write and a read descriptor), its group's
  submit pipe (2) and epoll (1), its segment and the segment's index (2);
* a data partition of a single node: 2 -- segment and index;
* an internal partition (the metadata log, ``__consumer_offsets``, ``__transaction_state``): 5 in a
  cluster (journal, pipe, epoll), 1 on a single node (its log);
* the node itself: 16 on a single node, 20 in a three-node cluster (stdio, the data directory's
  lock, the event loop, the listeners, the Raft links).

A partition's further segments hold 2 more each (log and index): the budget counts one segment, and
the periodic check (``FdWatch``) sees what the rest use.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from cluster import metrics
from cluster.config import NodeConfig
from cluster.log_limit import LogLimiter

log = logging.getLogger("kcoord.fd_budget")

DATA_PARTITION_FDS = {True: 7, False: 2}  # in a cluster / on a single node
INTERNAL_PARTITION_FDS = {True: 5, False: 1}
# The node's own 16-20, with room for more peers' links, the metrics server and what is open only
# for a moment (directory fsyncs, snapshot and compaction files, a Fetch's duplicated descriptors).
NODE_FDS = 64
MIN_CONNECTIONS = 64  # a node that cannot keep this many for clients does not start
NEAR_LIMIT = 0.8  # of the limit in use: warn
CHECK_INTERVAL_S = 10.0


class FdBudgetError(ValueError):
    """The open-file limit cannot hold the node's own files and a few connections."""


def raise_open_file_limit() -> int | None:
    """Raise the soft open-file limit to the hard one; the limit now in force (None: unlimited, or
    no such limit on this platform)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as e:  # e.g. an unlimited hard limit some kernels refuse as soft
            log.warning("event=open_file_limit_not_raised soft=%d hard=%d error=%r", soft, hard, str(e))
    return None if soft == resource.RLIM_INFINITY else int(soft)


@dataclass(frozen=True, slots=True)
class FdBudget:
    limit: int | None  # the open-file limit (None: unlimited)
    own: int  # the node's own files and its internal partitions'
    connections: int  # kept for client connections (no limit: as many as asked for, or sys.maxsize)
    per_partition: int  # descriptors a data partition holds on this node
    configured: int  # max_partitions as configured
    max_partitions: int  # as the limit bounds it

    def refusal(self, total: int, adding: int) -> str | None:
        """Why ``adding`` partitions may not join ``total``, when it is the limit that bounds them."""
        if self.max_partitions >= self.configured or total + adding <= self.max_partitions:
            return None
        return (f"The cluster has {total} partitions; {adding} more would pass the {self.max_partitions} that this "
                f"node's open-file limit ({self.limit}) holds, at {self.per_partition} descriptors each on every "
                f"node after {self.own} for its own files and {self.connections} for connections")


def plan(config: NodeConfig, limit: int | None) -> FdBudget:
    """Split ``limit`` between the node's own files, client connections and data partitions.

    An explicit ``max.connections`` is kept (up to what the limit leaves); with -1 the partitions'
    share (``max_partitions``) comes first, but at least a quarter of what is left, up to 1000 (the
    ``max.connections.per.ip`` default), stays for connections. ``max_partitions`` is lowered to what
    the rest holds. ``FdBudgetError`` if the internal partitions and MIN_CONNECTIONS do not fit:
    such a node would fail-stop on EMFILE soon after it started."""
    cluster = bool(config.peers)
    per = DATA_PARTITION_FDS[cluster]
    internal = config.offsets_topic_num_partitions + config.transaction_state_num_partitions
    internal += 1 if cluster else 0  # the metadata log
    own = NODE_FDS + internal * INTERNAL_PARTITION_FDS[cluster]
    explicit = config.max_connections != -1
    if limit is None:
        return FdBudget(None, own, config.max_connections if explicit else sys.maxsize, per, config.max_partitions,
                        config.max_partitions)
    room = limit - own
    if room < MIN_CONNECTIONS:
        raise FdBudgetError(
            f"the open-file limit ({limit}) leaves fewer than {MIN_CONNECTIONS} descriptors for client "
            f"connections after the {own} the node needs for its own files and its {internal} internal "
            "partitions; raise it (ulimit -n)")
    if explicit:
        connections = min(config.max_connections, room)
    else:
        connections = max(min(1000, max(MIN_CONNECTIONS, room // 4)), room - config.max_partitions * per)
    max_partitions = min(config.max_partitions, (room - connections) // per)
    return FdBudget(limit, own, connections, per, config.max_partitions, max_partitions)


def open_fds() -> int | None:
    """Descriptors this process has open (None where /proc/self/fd is not there)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


class FdWatch:
    """Descriptors in use against the limit: a gauge at every check, and a warning (at most one in
    five minutes) while more than NEAR_LIMIT of the limit is in use."""

    def __init__(self, budget: FdBudget, count: Callable[[], int | None] = open_fds) -> None:
        self.budget = budget
        self._count = count
        self._warn = LogLimiter(log, burst=1, window_s=300.0)
        metrics.set_fd_budget(budget.limit, budget.max_partitions)

    def check(self) -> int | None:
        used = self._count()
        limit = self.budget.limit
        if used is None:
            return None
        metrics.set_open_fds(used)
        if limit is not None and used > NEAR_LIMIT * limit:
            self._warn.warning("fd_budget_near_limit", "event=fd_budget_near_limit used=%d limit=%d "
                               "max_partitions=%d detail=%r", used, limit, self.budget.max_partitions,
                               "more than 80% of the open-file limit is in use; at the limit the node stops")
        return used
