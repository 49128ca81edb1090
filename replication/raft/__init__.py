"""The ReplicatedLog seam over pysyncobj: one Raft group per partition.

What kcoord adds to the library, by module:

- ``pysyncobj_adapter``: the only module that imports pysyncobj. **Crash-safe compaction**
  (pysyncobj 0.3.17 loses acknowledged entries when it restarts after compacting, see
  shared/reference/pysyncobj-notes.md §4.3: ``SafeJournal`` rewrites atomically by rename, a
  corrected dump loader keeps every journal entry after the snapshot, snapshots are written by
  our own serializer); the group class with its overrides; the transport over the node's hub.
- ``log``: ``RaftLog``. **Epoch fencing**: when a node wins leadership at Raft term T it first
  replicates an ``announce(T)``; only once that is applied does it publish
  ``LeadershipChange(True, T)``. Every append carries the epoch its caller believes in and is
  applied only if it equals the latest announced epoch, so a deposed leader's late append never
  takes effect. Also the leader lease, the likely leader of a cut-off node, and **leadership
  balancing** (each group has a preferred node; a leader hands leadership back to it once it
  is connected and caught up, pausing new appends so the target can match its log).
- ``balance``: when balancing happens: in rounds, every check interval, only for a node past
  the imbalance threshold, never for a group its owner says is busy (Kafka's settings).
- ``host``: ``RaftHost``, **one driver** ticking every group of the process (``autoTick=False``),
  on the asyncio event loop by default. A **cluster secret** is mandatory.
- ``election``: election hastening and guards; ``entry_store``: the offsets and metadata state
  machines; ``settings``: timings and shared constants.
"""

from replication.raft.entry_store import EntryStore, StateMachine
from replication.raft.host import RaftHost, RaftPortInUse
from replication.raft.log import RaftLog
from replication.raft.pysyncobj_adapter import replicated_method_names
from replication.raft.settings import APPLY_FAILED, EPOCH_STRIDE, FENCED, RaftTimings

__all__ = ["APPLY_FAILED", "EPOCH_STRIDE", "FENCED", "EntryStore", "RaftHost", "RaftLog", "RaftPortInUse",
           "RaftTimings", "StateMachine", "replicated_method_names"]
