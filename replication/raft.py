"""The ReplicatedLog seam over pysyncobj: one Raft group per partition.

This is the only module that imports pysyncobj. What it adds to the library:

- **Epoch fencing.** When a node wins leadership at Raft term T it first replicates an
  ``announce(T)``; only once that is applied does it publish ``LeadershipChange(True, T)``.
  Every append carries the epoch its caller believes in and is applied only if it equals
  the latest announced epoch, so a deposed leader's late append never takes effect.
- **Crash-safe compaction.** pysyncobj 0.3.17 loses acknowledged entries when it restarts
  after compacting (see shared/reference/pysyncobj-notes.md §4.3): its journal is
  shortened in place, and ``__loadDumpFile`` throws away the journal tail whenever the
  journal does not start at the snapshot. We plug in ``SafeJournal`` (atomic rewrite by
  rename) and a corrected dump loader that keeps every journal entry after the snapshot.
  Snapshots are written by our own serializer: the state machine's bytes plus the Raft
  position, replaced atomically.
- **One driver** ticks every group of the process (``autoTick=False``), on the asyncio
  event loop by default (see ``RaftHost``).
- **A cluster secret** (pysyncobj's ``password``) is mandatory: without it the Raft port
  would unpickle whatever any TCP client sends.
- **Leadership balancing**: each group has a preferred node; a leader hands leadership
  back to the preferred node once it is connected and caught up, pausing new appends
  for a moment so the target can match its log (quiesce, then transfer).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import select
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import msgpack
import pysyncobj.syncobj as _pso
from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated
from pysyncobj.monotonic import monotonic as _pso_monotonic
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.transport import Transport

from replication.api import (
    MAX_ENTRY_BYTES,
    CoordinatorLog,
    LeadershipChange,
    LeadershipListener,
    LogEntry,
    NotLeaderError,
    PeerLog,
    ReplicationError,
    StaleEpochError,
)
from replication.durable import remove_dir
from replication.election import ElectionGuard
from replication.failstop import fail_stop, guarded
from replication.hub import RaftHub
from replication.journal import SafeJournal, sync_due

log = logging.getLogger("kcoord.raft")

_original_create_journal = _pso.createJournal


def _create_journal(journal_file: str | None = None) -> Any:
    if journal_file is not None and journal_file.endswith(".kcj"):
        return SafeJournal(journal_file)
    return _original_create_journal(journal_file)


_pso.createJournal = _create_journal


class _EpollPoller:
    """pysyncobj's poller interface on an epoll object, so one ticker can wait on all groups."""

    def __init__(self) -> None:
        self.epoll = select.epoll()
        self._callbacks: dict[int, Callable[[int, int], None]] = {}

    def fileno(self) -> int:
        return self.epoll.fileno()

    def subscribe(self, descr: int, callback: Callable[[int, int], None], event_mask: int) -> None:
        mask = 0
        if event_mask & POLL_EVENT_TYPE.READ:
            mask |= select.EPOLLIN
        if event_mask & POLL_EVENT_TYPE.WRITE:
            mask |= select.EPOLLOUT
        if event_mask & POLL_EVENT_TYPE.ERROR:
            mask |= select.EPOLLERR
        fd = descr if isinstance(descr, int) else descr.fileno()
        if fd in self._callbacks:
            self.epoll.modify(fd, mask)
        else:
            self.epoll.register(fd, mask)
        self._callbacks[fd] = callback

    def unsubscribe(self, descr: int) -> None:
        fd = descr if isinstance(descr, int) else descr.fileno()
        if self._callbacks.pop(fd, None) is not None:
            try:
                self.epoll.unregister(fd)
            except (OSError, ValueError):
                pass

    def poll(self, timeout: float) -> None:
        for fd, event in self.epoll.poll(timeout):
            mask = 0
            if event & select.EPOLLIN:
                mask |= POLL_EVENT_TYPE.READ
            if event & select.EPOLLOUT:
                mask |= POLL_EVENT_TYPE.WRITE
            if event & (select.EPOLLERR | select.EPOLLHUP):
                mask |= POLL_EVENT_TYPE.ERROR
            callback = self._callbacks.get(fd)
            if callback is not None:
                callback(fd, mask)


_pso.createPoller = lambda poller_type: _EpollPoller()


class _QuirkFilter(logging.Filter):
    """pysyncobj logs CRITICAL when a leader re-sends entries a follower already holds
    (pysyncobj-notes §1e); the entries are identical, so the line is noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "truncating already-applied log entries" not in record.getMessage()


logging.getLogger("pysyncobj.syncobj").addFilter(_QuirkFilter())

_FOLLOWER = _pso._RAFT_STATE.FOLLOWER
FENCED = -1  # result of an append whose epoch is not the announced one
APPLY_FAILED = -3  # result of an entry the state machine could not apply (skipped on every replica)
# Epochs are term * EPOCH_STRIDE + n: a leader may re-fence (n + 1) without a new election.
EPOCH_STRIDE = 1 << 20


class StateMachine(Protocol):
    """What a partition's replicated state looks like to this module (bytes in, int out)."""

    def apply(self, epoch: int, payload: bytes) -> int: ...

    def snapshot(self) -> bytes: ...

    def restore(self, data: bytes) -> None: ...


class EntryStore:
    """A partition whose state is its entries, compacted by an injected function.

    ``compact(payloads) -> payloads`` must keep the meaning of replaying them in order
    (the coordinator keeps the latest record per key). Offsets keep counting across
    compactions; the compacted prefix is served with offset -1.
    """

    def __init__(self, compact: Callable[[list[bytes]], list[bytes]] | None = None,
                 compact_every: int = 20_000, compact_bytes: int = 16 * 1024 * 1024) -> None:
        self._compact = compact
        self._compact_every = compact_every
        self._compact_bytes = compact_bytes
        self._tail_bytes = 0
        self.lock = threading.Lock()
        self.base: list[bytes] = []
        self.tail: list[tuple[int, int, bytes]] = []
        self.next_offset = 0

    def apply(self, epoch: int, payload: bytes) -> int:
        with self.lock:
            offset = self.next_offset
            self.tail.append((offset, epoch, payload))
            self.next_offset += 1
            self._tail_bytes += len(payload)
            if self._compact is not None and (len(self.tail) >= self._compact_every
                                              or self._tail_bytes >= self._compact_bytes):
                self.base = self._compact(self.base + [p for _, _, p in self.tail])
                self.tail = []
                self._tail_bytes = 0
            return offset

    def entries(self, start: int = 0) -> list[LogEntry]:
        with self.lock:
            return self._listed(start)

    def _listed(self, start: int) -> list[LogEntry]:
        """Under the lock: the base (from 0 only, offset -1) and the tail entries from ``start``."""
        out = [LogEntry(-1, 0, p) for p in self.base] if start <= 0 else []
        out.extend(LogEntry(o, e, p) for o, e, p in self.tail if o >= start)
        return out

    def entries_since(self, start: int) -> tuple[list[LogEntry], int] | None:
        """``(entries at offsets >= start, next offset)``; from 0 that includes the compacted
        base. None when entries past ``start`` now live only in the base (a compaction or a
        snapshot install moved past it): then read again from 0."""
        with self.lock:
            first = self.tail[0][0] if self.tail else self.next_offset
            if start > 0 and not first <= start <= self.next_offset:
                return None
            return self._listed(start), self.next_offset

    def snapshot(self) -> bytes:
        with self.lock:
            base = self._compact(self.base + [p for _, _, p in self.tail]) if self._compact else (
                self.base + [p for _, _, p in self.tail])
            return bytes(msgpack.packb({"base": base, "next": self.next_offset}, use_bin_type=True))

    def restore(self, data: bytes) -> None:
        state = msgpack.unpackb(data, raw=False)
        with self.lock:
            self.base = list(state["base"])
            self.tail = []
            self._tail_bytes = 0
            self.next_offset = int(state["next"])


RANKED_MARGIN_S = 0.1  # see _Group._SyncObj__generateRaftTimeout
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


class _Group(ElectionGuard, SyncObj):  # type: ignore[misc]
    """One partition's Raft group. Its replicated state is ``sm`` plus the fence epoch."""

    def __init__(self, self_addr: str, peers: list[str], conf: SyncObjConf, sm: StateMachine,
                 transport: Callable[..., Any] | None = None) -> None:
        self.sm = sm
        self.fence = 0
        self.name = self_addr
        self.order = sorted([self_addr, *peers])  # see successor()
        self.addr = self_addr
        self.ready_to_lead: Callable[[], bool] = lambda: True
        self._keep_tail = False  # see _append_entries_without_needless_truncation
        self._election_init(_pso_monotonic, conf.raftMinTimeout)
        if transport is None:
            super().__init__(self_addr, peers, conf)
        else:
            super().__init__(self_addr, peers, conf, transportClass=transport)

    def _SyncObj__generateRaftTimeout(self) -> float:  # noqa: N802
        """A follower's election timeout, ranked instead of random: counting from its leader
        along ``order``, the next node's timer runs out first, the one after it a third of the
        range later (and so on), each with a little jitter. Whoever survives a leader's failure
        or isolation stands in a known order, so votes do not split and a node cut off from the
        others can tell clients who most likely took over (``successor``). Without a known
        leader the timeout is random, as in pysyncobj."""
        conf = self.__dict__["_SyncObj__conf"]
        lo, hi = float(conf.raftMinTimeout), float(conf.raftMaxTimeout)
        leader = self.__dict__.get("_SyncObj__raftLeader")
        lid = getattr(leader, "id", None)
        if lid not in self.order or lid == self.addr:
            return lo + (hi - lo) * random.random()
        n = len(self.order)
        rank = (self.order.index(self.addr) - self.order.index(lid) - 1) % n
        # The first stands a little after the minimum: a voter refuses a (pre-)vote while it has
        # heard the leader within the minimum timeout, and the leader's last heartbeat reached
        # the voters a few ms apart.
        margin = min(RANKED_MARGIN_S, (hi - lo) / 4)
        step = (hi - lo - margin) / max(1, n - 1)
        return lo + margin + rank * step + random.uniform(0.0, min(0.03, step / 4))

    def successor(self, addr: str) -> str:
        """The node that stands first when ``addr``, as leader, fails or is cut off."""
        return self.order[(self.order.index(addr) + 1) % len(self.order)]

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:  # noqa: N802
        # A leadership transfer (TimeoutNow) is a courtesy, not a need: decline it until this
        # node could serve at once (e.g. its coordinator state is caught up), so balancing never
        # hands a partition to a node that would then spend seconds loading it. Elections after
        # a leader fails are not affected.
        if isinstance(message, dict) and message.get("type") == "timeout_now" and not self._ready():
            return
        if isinstance(message, dict) and message.get("type") == "append_entries" and "prevLogIdx" in message \
                and "transmission" not in message:
            self._append_entries_without_needless_truncation(node, message)
            return
        super()._SyncObj__onMessageReceived(node, message)

    def _append_entries_without_needless_truncation(self, node: Any, message: dict[str, Any]) -> None:
        """Raft's rule, where pysyncobj 0.3.17 truncates everything after ``prevLogIdx`` whatever
        the message holds: entries this node already has (same index, same term) are kept, and
        only a real conflict truncates. A delayed or duplicated AppendEntries (a resend after a
        reconnect, the burst at the end of a partition) used to cut entries this follower had
        acknowledged, which the leader may already count in a majority.

        The entries already held are dropped from the message; when nothing is left to append,
        the message is handled as a heartbeat at its last entry that truncates nothing (see
        ``_SyncObj__getEntries``), and the commit index is not moved past what it covered."""
        journal = self.__dict__["_SyncObj__raftLog"]
        entries = message.get("entries") or []
        if not isinstance(journal, SafeJournal) or not len(journal) or message["term"] < self.raftCurrentTerm:
            super()._SyncObj__onMessageReceived(node, message)
            return
        first, held = journal.index_at(0), len(journal)
        matched = 0
        for _command, idx, term in entries:
            pos = idx - first
            if not (0 <= pos < held and journal.term_at(pos) == term):
                break
            matched += 1
        if matched < len(entries):
            if matched:  # append from the first entry not held (deleting from there: a conflict)
                _c, idx, term = entries[matched - 1]
                message = dict(message, prevLogIdx=idx, prevLogTerm=term, entries=entries[matched:])
            super()._SyncObj__onMessageReceived(node, message)
            return
        if matched:
            _c, idx, term = entries[-1]
            message = dict(message, prevLogIdx=idx, prevLogTerm=term, entries=[])
        covered = message["prevLogIdx"]
        commit_before = self.__dict__.get("_SyncObj__raftCommitIndex", 0)
        self._keep_tail = True
        try:
            super()._SyncObj__onMessageReceived(node, message)
        finally:
            self._keep_tail = False
        commit = self.__dict__.get("_SyncObj__raftCommitIndex", 0)
        bound = max(commit_before, min(message["commit_index"], covered))
        if commit > bound:  # entries past ``covered`` are not known to match the leader's
            self._SyncObj__raftCommitIndex = bound
            journal.setRaftCommitIndex(bound)

    def _SyncObj__getEntries(self, fromIDx: Any, count: Any = None, maxSizeBytes: Any = None) -> Any:  # noqa: N802,N803
        # pysyncobj slices the journal to its end and then trims the slice to the batch size: a
        # journal that reads old entries from disk bounds the range before reading instead.
        journal = self.__dict__["_SyncObj__raftLog"]
        if not isinstance(journal, SafeJournal):
            return super()._SyncObj__getEntries(fromIDx, count, maxSizeBytes)
        if fromIDx is None or not len(journal):
            return []
        first = journal.index_at(0)
        if fromIDx < first:
            return []
        start = fromIDx - first
        if self._keep_tail and count is None and maxSizeBytes is None:
            count = 1  # AppendEntries handling: the entries after prevLogIdx are not to be deleted
        return journal.entries(start, None if count is None else start + count, maxSizeBytes)

    def _ready(self) -> bool:
        """Committed entries applied here but for the last few (a restarted node applies its
        journal over many ticks), and the owner of the state says it is ready too. A follower
        applies what the latest AppendEntries committed only at its next tick, so under steady
        appends it is nearly always a few entries short: asking for all of them declined every
        transfer of a busy partition."""
        d = self.__dict__
        commit = max(d.get("_SyncObj__raftCommitIndex", 0), d.get("_SyncObj__leaderCommitIndex") or 0)
        return bool(d.get("_SyncObj__raftLastApplied", 0) + READY_APPLY_LAG >= commit and self.ready_to_lead())

    @replicated  # type: ignore[untyped-decorator]
    def announce(self, epoch: int) -> int:
        if epoch > self.fence:
            self.fence = epoch
        return self.fence

    @replicated  # type: ignore[untyped-decorator]
    def append(self, epoch: int, payload: bytes) -> int:
        if epoch != self.fence:
            return FENCED
        return self._apply(epoch, payload)

    @replicated  # type: ignore[untyped-decorator]
    def submit(self, payload: bytes) -> int:
        """Unfenced: any node may submit (pysyncobj forwards it to the leader)."""
        return self._apply(self.fence, payload)

    def _apply(self, epoch: int, payload: bytes) -> int:
        """Applying is total: pysyncobj retries an entry whose apply raised on every tick, after
        dropping its callbacks, so one bad entry would freeze the partition for good. An entry the
        state machine refuses is skipped (every replica refuses it alike) and its caller told; a
        fault of the environment (ENOSPC, EMFILE, EIO) stops the node instead."""
        try:
            return self.sm.apply(epoch, payload)
        except OSError as e:
            fail_stop("raft_apply", f"{self.name}: applying an entry failed: {type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - see above: never let an apply raise into pysyncobj
            log.error("event=apply_failed group=%s bytes=%d error=%r action=skipped", self.name, len(payload),
                      f"{type(e).__name__}: {e}")
            return APPLY_FAILED

    # pysyncobj 0.3.17 clears the journal when it does not start exactly at the snapshot,
    # dropping acknowledged entries that follow it. Keep the journal if it holds the
    # snapshot's last entry; replace it only when it cannot continue from the snapshot.
    def _SyncObj__loadDumpFile(self, clearJournal: bool) -> None:  # noqa: N802,N803
        try:
            data = self._SyncObj__serializer.deserialize()
            last, prev = data[1], data[2]
            journal = self._SyncObj__raftLog
            keep = False
            if not clearJournal and len(journal) > 0:
                pos = last[1] - journal[0][1]
                if 0 <= pos < len(journal) and journal[pos][1] == last[1] and journal[pos][2] == last[2]:
                    keep = True
            if not keep:
                journal.clear()
                journal.add(*prev)
                journal.add(*last)
            self._SyncObj__raftLastApplied = last[1]
            end = journal[len(journal) - 1][1]
            commit: int = self.__dict__["_SyncObj__raftCommitIndex"]
            if commit > end:
                self._SyncObj__raftCommitIndex = end
                journal.setRaftCommitIndex(end)
            self._SyncObj__onSetCodeVersion(0)
        except Exception:
            log.exception("event=snapshot_load_failed")


def _make_serializer(group: Callable[[], _Group | None]) -> tuple[Callable[..., None], Callable[[str], Any]]:
    def serialize(path: str, raft_data: Any) -> None:
        g = group()
        assert g is not None
        last, prev, cluster = raft_data
        blob = {"last": list(last), "prev": list(prev), "cluster": sorted(n.id for n in cluster),
                "fence": g.fence, "state": g.sm.snapshot()}
        try:
            with open(path, "wb") as f:  # pysyncobj renames it over the last snapshot
                f.write(msgpack.packb(blob, use_bin_type=True))
                f.flush()
                os.fsync(f.fileno())  # the journal's rewrite, next, fsyncs the directory
        except OSError as e:
            fail_stop("snapshot", f"{path}: write failed: {type(e).__name__}: {e}")

    def deserialize(path: str) -> Any:
        g = group()
        assert g is not None
        with open(path, "rb") as f:
            blob = msgpack.unpackb(f.read(), raw=False)
        g.fence = max(g.fence, int(blob["fence"]))
        g.sm.restore(blob["state"])
        return (tuple(blob["last"]), tuple(blob["prev"]), set())

    return serialize, deserialize


class RaftPortInUse(ReplicationError):
    pass


class _MuxTransport(Transport):  # type: ignore[misc]
    """pysyncobj's transport interface over the node's ``RaftHub``: a group's peers are named
    by per-group (logical) addresses; the hub carries the messages to the peer's node."""

    def __init__(self, sync_obj: Any, self_node: Any, other_nodes: Any, hub: RaftHub, gid: str,
                 hubs: dict[str, str]) -> None:
        super().__init__(sync_obj, self_node, other_nodes)
        self._sync_obj = sync_obj
        self._hub = hub
        self._gid = gid
        self._hub_of = {n.id: hubs.get(n.id, n.id) for n in other_nodes}
        self._node_of = {self._hub_of[n.id]: n for n in other_nodes}

    @property
    def ready(self) -> bool:
        return True

    def tryGetReady(self) -> None:  # noqa: N802 - pysyncobj's interface
        pass

    def waitReady(self) -> None:  # noqa: N802
        pass

    def addNode(self, node: Any) -> None:  # noqa: N802 - membership is static here
        pass

    def dropNode(self, node: Any) -> None:  # noqa: N802
        pass

    def send(self, node: Any, message: Any) -> bool:
        kind = message.get("type")
        g = self._sync_obj
        if kind == "append_entries":
            message = dict(message, lts=_pso_monotonic())  # the lease's anchor (replication/election.py)
        elif kind == "next_node_idx":
            message = dict(message, lts=g.lts_from.get(node.id))  # echo the leader's last send time
        elif kind == "request_vote" and g.campaign_is_transfer:
            message = dict(message, transfer=True)  # voters let a leadership transfer through
        elif kind == "timeout_now":
            g.drop_lease()
        peer = self._hub_of.get(node.id)
        return peer is not None and self._hub.send(peer, self._gid, message)

    def destroy(self) -> None:
        self._hub.detach(self._gid, self)

    # the hub's side (ticker thread)
    def hub_peers(self) -> list[str]:
        return list(self._node_of)

    def on_connected(self, peer: str) -> None:
        node = self._node_of.get(peer)
        if node is not None:
            self._onNodeConnected(node)

    def on_disconnected(self, peer: str) -> None:
        node = self._node_of.get(peer)
        if node is not None:
            self._onNodeDisconnected(node)

    def on_message(self, peer: str, message: Any) -> None:
        node = self._node_of.get(peer)
        if node is not None:
            self._onMessageReceived(node, message)


class RaftLog:
    """A ReplicatedLog over one Raft group; created and driven by a ``RaftHost``."""

    def __init__(self, host: RaftHost, name: str, self_addr: str, peers: list[str], preferred: str,
                 data_dir: str, sm: StateMachine, hubs: dict[str, str]) -> None:
        self.host = host
        self._name = name
        self.self_addr = self_addr
        self.preferred = preferred
        self.sm = sm
        self._preferred_since: float | None = None
        os.makedirs(data_dir, exist_ok=True)
        holder: dict[str, _Group] = {}
        ser, deser = _make_serializer(lambda: holder.get("g"))
        t = host.timings
        conf = SyncObjConf(
            autoTick=False,  # the secret authenticates the hub's connections (replication/hub.py)
            journalFile=os.path.join(data_dir, "raft.kcj"),
            fullDumpFile=os.path.join(data_dir, "raft.snapshot"),
            serializer=ser,
            deserializer=deser,
            appendEntriesUseBatch=False,
            # pysyncobj 0.3.17 splits an entry larger than this into chunks and ends the chunking
            # early (it compares chunk positions with the command's length, not the pickled
            # entry's), so the follower unpickles a truncated entry and stops replicating. Keep
            # every entry below the limit: callers cap payloads at MAX_ENTRY_BYTES.
            appendEntriesBatchSizeBytes=4 * MAX_ENTRY_BYTES,
            appendEntriesPeriod=t.append_entries_period,
            raftMinTimeout=t.raft_min_timeout,
            raftMaxTimeout=t.raft_max_timeout,
            connectionTimeout=max(1000.0, t.raft_max_timeout),  # unused by the hub; pysyncobj validates it
            logCompactionMinEntries=t.compaction_min_entries,
            logCompactionMinTime=t.compaction_min_time,
            logCompactionSplit=t.compaction_split,
            leaderFallbackTimeout=t.check_quorum or t.raft_max_timeout,
            useFork=False,
            commandsWaitLeader=False,
        )
        self.transport: _MuxTransport | None = None
        self._conf = conf
        self._compaction_bytes = t.compaction_bytes
        self._compaction_split = t.compaction_split

        def transport(sync_obj: Any, self_node: Any, other_nodes: Any) -> _MuxTransport:
            self.transport = _MuxTransport(sync_obj, self_node, other_nodes, host.hub, name, hubs)
            return self.transport

        self.attached = False  # to the hub: after the group's first tick (which loads its snapshot)
        self.group = _Group(self_addr, peers, conf, sm, transport)
        self.group.name = name
        holder["g"] = self.group
        listen_first = _pso_monotonic() + t.connection_retry + 2 * t.raft_max_timeout
        if len(self.group.__dict__["_SyncObj__raftLog"]) > 1:
            # A restarted member first listens for the current leader instead of starting an
            # election on its first timeout (it would win a higher term and unseat a healthy
            # leader: pysyncobj has no pre-vote). Reconnecting takes up to connection_retry.
            self.group.__dict__["_SyncObj__raftElectionDeadline"] = listen_first
        else:
            # A new group (a new topic's partition, or a new cluster): its preferred node stands
            # first, so it starts balanced instead of being moved by a transfer seconds later,
            # while clients are already using it. The others stand only if it does not win.
            # (Followers of the metadata log create the group up to a heartbeat later.)
            self.group.__dict__["_SyncObj__raftElectionDeadline"] = (
                _pso_monotonic() + t.append_entries_period + random.uniform(0.0, 0.05)
                if self_addr == preferred else listen_first)
        self._listeners: list[LeadershipListener] = []
        self._announced = -1  # epoch announced and applied while leader (-1: none)
        self._announcing = -1
        self._paused_until = 0.0
        self._transfer_sent = False
        self._leader_seen_connected: str | None = None
        self.peer_addrs = list(peers)
        self._lost_at = 0.0  # when this node last lost its leadership (monotonic), for likely_leader
        self._match_at_loss: dict[str, int] = {}  # each follower's acknowledged index then, ditto
        # Event loop: appends proposed under the current leadership and not yet resolved. A leader
        # that steps down (a lost quorum) fails them at once: pysyncobj would resolve them only
        # when it learns the new leader's commit index, i.e. after the cut heals.
        self._in_flight: set[asyncio.Future[int]] = set()

    # ---------------------------------------------------------------- ReplicatedLog

    @property
    def name(self) -> str:
        return self._name

    def is_leader(self) -> bool:
        return self._announced >= 0

    def leader_epoch(self) -> int:
        return self._announced

    def committed_offset(self) -> int:
        return int(getattr(self.sm, "next_offset", 0))

    def current_term(self) -> int:
        return int(self.group.raftCurrentTerm)

    def leader_heard_lately(self) -> bool:
        """A follower got its leader's AppendEntries within the longest election timeout."""
        return bool(self.group.leader_heard_within(self.host.timings.raft_max_timeout))

    def lease_valid(self) -> bool:
        """This node leads and no other can have been elected meanwhile (a leader lease, see
        replication/election.py): answers read from its state are current."""
        return bool(self.group.lease_valid())

    def likely_leader(self) -> str:
        """Who leads, or most likely leads now on the other side of a partition: the leader
        last known if it is another node (it keeps leading wherever it kept a majority), else
        the follower that had acknowledged the most of this node's log when it lost its
        leadership (Raft elects only a node whose log is at least as long as its voters', so the
        longest one wins), and among equals this node's successor (it stands first there when
        this node is cut off). Should that election have gone another way, the guess moves on
        to the next node every ``GUESS_PERIOD_S`` after this node lost its leadership (the same
        answer meanwhile, so a client settles on it)."""
        leader = self.leader_address()
        if leader is not None and leader != self.self_addr:
            return leader
        order = self.group.order
        others = [order[(order.index(self.self_addr) + i) % len(order)] for i in range(1, len(order))]
        match = self._match_at_loss
        others.sort(key=lambda a: -match.get(a, 0))  # stable: successors first among equals
        lost = self._lost_at if self._announced < 0 else 0.0  # still leading by its own account: first guess
        turn = int(max(0.0, time.monotonic() - lost) / GUESS_PERIOD_S) if lost else 0
        return others[turn % len(others)]

    def leader_address(self) -> str | None:
        leader = self.group._getLeader()
        return leader.id if leader is not None else None

    async def append(self, payload: bytes, epoch: int) -> int:
        if len(payload) > MAX_ENTRY_BYTES:
            raise ReplicationError(f"{self._name}: entry of {len(payload)} bytes exceeds {MAX_ENTRY_BYTES}")
        if self._announced < 0:
            raise NotLeaderError(f"{self._name}: not the leader")
        if epoch != self._announced:
            raise StaleEpochError(f"{self._name}: epoch {epoch} is not the current {self._announced}")
        while time.monotonic() < self._paused_until:
            await asyncio.sleep(0.005)  # quiesced for a leadership transfer
            if self._announced != epoch:
                raise NotLeaderError(f"{self._name}: leadership moved")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()

        def done(result: Any, error: int) -> None:
            self.host.call_in_loop(_resolve, fut, result, error)

        self.group.append(epoch, payload, callback=done)
        self._in_flight.add(fut)
        try:
            result = await fut
        finally:
            self._in_flight.discard(fut)
        if result == FENCED:
            raise StaleEpochError(f"{self._name}: append at epoch {epoch} was fenced")
        if result == APPLY_FAILED:
            raise ReplicationError(f"{self._name}: the entry could not be applied (skipped)")
        return int(result)

    async def submit(self, payload: bytes) -> int:
        """Append from any node, without fencing (for idempotent metadata operations)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()

        def done(result: Any, error: int) -> None:
            self.host.call_in_loop(_resolve, fut, result, error)

        self.group.submit(payload, callback=done)
        return int(await fut)

    def connected_peers(self) -> set[str]:
        """Raft addresses of the peers this group is connected to (best effort, any thread)."""
        try:
            return {n.id for n in list(self.group._SyncObj__connectedNodes)}
        except RuntimeError:  # the set changed while we copied it
            return set()

    def read_committed(self, start: int = 0) -> Iterable[LogEntry]:
        entries = getattr(self.sm, "entries", None)
        return entries(start) if entries is not None else []

    def read_since(self, start: int) -> tuple[list[LogEntry], int] | None:
        """``(committed entries from start, next offset)`` (see ``EntryStore.entries_since``);
        None when that range is gone or the state machine keeps no entries."""
        since = getattr(self.sm, "entries_since", None)
        return since(start) if since is not None else None

    def subscribe(self, listener: LeadershipListener) -> None:
        self._listeners.append(listener)
        if self._announced >= 0:
            listener(LeadershipChange(self._name, True, self._announced))

    # ---------------------------------------------------------------- ticker side

    def _publish(self, change: LeadershipChange) -> None:
        for listener in list(self._listeners):
            self.host.call_in_loop(listener, change)

    def compact_if_large(self) -> None:
        """Compact a journal past ``compaction_bytes`` now (the entry and time triggers let a
        journal of large entries grow for ten minutes, and its file and the snapshot to come with it). Not in this
        node's turn of the split schedule either: a journal that size cannot wait for it."""
        journal = self.group.__dict__.get("_SyncObj__raftLog")
        if not isinstance(journal, SafeJournal):
            return
        large = journal.size_bytes > self._compaction_bytes
        self._conf.logCompactionSplit = self._compaction_split and not large
        if large and not self.group.__dict__.get("_SyncObj__forceLogCompaction", False):
            self.group.forceLogCompaction()

    def check_leadership(self) -> None:
        """Ticker thread: notice leadership changes and fence them with an announce."""
        g = self.group
        leader = g._isLeader()
        term = g.raftCurrentTerm
        if not leader:
            self._hasten_election_if_leader_gone()
        if leader and self._announcing != term and self._announced // EPOCH_STRIDE != term:
            self._announcing = term
            self._announce(term * EPOCH_STRIDE, term)
        if not leader and (self._announced >= 0 or self._announcing >= 0):
            self._announcing = -1
            self._match_at_loss = {n.id: int(i) for n, i in list(g.__dict__["_SyncObj__raftMatchIndex"].items())}
            self.host.call_in_loop(self._lost_leadership, term)

    def tick_after_messages(self) -> bool:
        """Ticker thread: whether messages just handled call for a tick now. A follower with a
        leader has already answered them (pysyncobj replies as it receives); applying what
        they committed can wait for the periodic round. That saves each follower a tick per
        replicated entry. A leader (acknowledgements commit) and a candidate (votes) tick, and
        so does a follower whose election is due (a transfer's TimeoutNow)."""
        d = self.group.__dict__
        return bool(d["_SyncObj__raftState"] != _FOLLOWER or d["_SyncObj__raftLeader"] is None
                    or d["_SyncObj__raftElectionDeadline"] <= _pso_monotonic())

    def postpone_election(self) -> None:
        """Ticker thread: a follower's next election no sooner than one election timeout away."""
        if self.group._isLeader():
            return
        d = self.group.__dict__
        later = _pso_monotonic() + self.group._SyncObj__generateRaftTimeout()  # ranked, as ever
        if d["_SyncObj__raftElectionDeadline"] < later:
            d["_SyncObj__raftElectionDeadline"] = later

    def _hasten_election_if_leader_gone(self) -> None:
        """The leader's connection dropped (its process died or closed): elect soon instead of
        waiting out the full election timeout. Elections are always safe in Raft; this only
        moves the first one earlier, once per lost leader."""
        leader = self.group._getLeader()
        addr = leader.id if leader is not None else None
        if addr is None or addr == self.self_addr:
            return
        if addr in self.connected_peers():
            self._leader_seen_connected = addr
            return
        if self._leader_seen_connected != addr:
            return  # never connected to it (e.g. still starting): keep the normal timeout
        self._leader_seen_connected = None
        # Survivors go in a fixed order (the leader's successors, as for a timeout) so they do
        # not split the vote; the first one normally wins before the next starts.
        order = self.group.order
        rank = (order.index(self.self_addr) - order.index(addr) - 1) % len(order)
        soon = _pso_monotonic() + 0.05 + 0.25 * rank + random.uniform(0.0, 0.03)
        d = self.group.__dict__
        if d["_SyncObj__raftElectionDeadline"] > soon:
            d["_SyncObj__raftElectionDeadline"] = soon

    def _announce(self, epoch: int, term: int) -> None:
        g = self.group

        def announced(result: Any, error: int) -> None:
            if error == FAIL_REASON.SUCCESS and g._isLeader() and g.raftCurrentTerm == term:
                self.host.call_in_loop(self._became_leader, epoch)

        g.announce(epoch, callback=announced)

    def refence(self) -> bool:
        """Event loop: start a new epoch under the same leadership, so that appends still in
        flight from the old one can never apply (used after a failed or timed-out append).
        The new epoch is published like a new leadership; returns False if not leader."""
        if self._announced < 0:
            return False
        self._announce(self._announced + 1, self._announced // EPOCH_STRIDE)
        return True

    def _became_leader(self, epoch: int) -> None:
        if epoch <= self._announced:
            return
        self._announced = epoch
        log.info("event=leader_elected partition=%s epoch=%d term=%d", self._name, epoch, epoch // EPOCH_STRIDE)
        self._publish(LeadershipChange(self._name, True, epoch))

    def _lost_leadership(self, term: int) -> None:
        if self._announced < 0:
            return
        self._announced = -1
        self._lost_at = time.monotonic()
        log.info("event=leadership_lost partition=%s term=%d", self._name, term)
        for fut in self._in_flight:
            if not fut.done():  # outcome unknown: the entry may still commit under the next leader
                fut.set_exception(NotLeaderError(f"{self._name}: leadership lost before the entry committed"))
        self._in_flight.clear()
        self._publish(LeadershipChange(self._name, False, term))

    def set_ready_to_lead(self, check: Callable[[], bool]) -> None:
        """``check()`` (called on the ticker thread) says whether this node would accept
        leadership handed over by a transfer now."""
        self.group.ready_to_lead = check

    def wants_transfer(self) -> bool:
        """Ticker thread: leader here, preferred node elsewhere and connected for a while
        (a node that just came back first catches up, then takes its partitions back)."""
        g = self.group
        if not g._isLeader() or self.preferred == self.self_addr:
            self._preferred_since = None
            return False
        status = g.getStatus()
        if status.get("partner_node_status_server_" + self.preferred) != 2:
            self._preferred_since = None
            return False
        now = time.monotonic()
        if self._preferred_since is None:
            self._preferred_since = now
        return now - self._preferred_since >= self.host.timings.transfer_settle

    def start_transfer(self, now: float) -> None:
        """Quiesce new appends for a moment so the preferred node can match our log."""
        if self._paused_until == 0.0:
            self._paused_until = now + 0.5
            self._transfer_sent = False

    def step_transfer(self, now: float) -> None:
        """Ticker thread while quiesced: ask for the transfer once the target matches our log.

        pysyncobj denies (REQUEST_DENIED) until the target's match index equals our last
        index; once it accepts, the target starts an election and we wait for the outcome.
        """
        if self._paused_until == 0.0:
            return
        g = self.group
        if not g._isLeader() or now > self._paused_until:
            self._paused_until = 0.0  # done, or give up until the next balancing round
            return
        if self._transfer_sent:
            return

        def transferred(result: Any, error: int) -> None:
            if error == FAIL_REASON.SUCCESS:
                self._transfer_sent = True
                log.debug("event=leadership_transfer partition=%s to=%s", self._name, self.preferred)

        g.transferLeadership(self.preferred, callback=transferred)

    def destroy(self) -> None:
        try:
            self.group.destroy()
            self.group._destroy()
        except Exception:  # noqa: BLE001 - shutting down anyway
            pass


def _run_calls(calls: list[tuple[Callable[..., None], tuple[Any, ...]]]) -> None:
    for fn, args in calls:
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - the others must still run
            log.exception("event=loop_call_failed")


def _close_and_delete(lg: RaftLog, directory: str | None) -> None:
    lg.destroy()
    if directory is not None:
        remove_dir(directory)


def _resolve(fut: asyncio.Future[int], result: Any, error: int) -> None:
    if fut.done():
        return
    if error == FAIL_REASON.SUCCESS:
        fut.set_result(result)
    elif error in (FAIL_REASON.NOT_LEADER, FAIL_REASON.MISSING_LEADER, FAIL_REASON.LEADER_CHANGED,
                   FAIL_REASON.DISCARDED):
        fut.set_exception(NotLeaderError(f"raft append failed: {error}"))
    else:
        fut.set_exception(ReplicationError(f"raft append failed: {error}"))


class RaftHost:
    """All Raft groups of one node process, ticked by one driver: on the asyncio event loop
    (``driver="loop"``, the default: no Raft thread, no hand-off between threads on the commit
    path) or on a thread of its own (``driver="thread"``, the former design, kept for comparison
    in benchmarks: ``KCOORD_RAFT_DRIVER=thread``)."""

    def __init__(self, secret: str, timings: RaftTimings | None = None, balance_every: float = 2.0,
                 listen: str | None = None, driver: str | None = None) -> None:
        if not secret:
            raise ValueError("a cluster secret is required: the Raft port would run anyone's pickles")
        self.driver = driver or os.environ.get("KCOORD_RAFT_DRIVER", "loop")
        if self.driver not in ("loop", "thread"):
            raise ValueError(f"unknown Raft driver {self.driver!r} (loop or thread)")
        self.secret = secret
        self.timings = timings or RaftTimings()
        self._listen = listen
        self._hub: RaftHub | None = None
        self._ticker_ident = -1
        self._calls: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        self._logs_version = 0
        self._logs: list[RaftLog] = []
        self._removed: list[tuple[RaftLog, str | None]] = []  # out of _logs, to be closed by the ticker
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ticker: _Ticker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._balance_every = balance_every
        self._last_balance = 0.0
        self.balance = True

    @property
    def hub(self) -> RaftHub:
        """The node's one Raft port: every group's messages to a peer share one connection."""
        if self._hub is None:
            assert self._listen is not None
            try:
                self._hub = RaftHub(self._listen, self.secret, self.timings.connection_retry)
            except OSError as e:
                raise RaftPortInUse(f"Raft port {self._listen} is not available: {e}") from None
        return self._hub

    def add(self, name: str, self_addr: str, peers: list[str], preferred: str, data_dir: str,
            sm: StateMachine, hubs: dict[str, str] | None = None) -> RaftLog:
        """A group named ``name`` (unique on the node). Members are named by logical addresses;
        ``hubs`` maps each peer's to its node's hub address (default: the same address, and the
        host listens on its first group's address)."""
        if self._listen is None:
            self._listen = self_addr
        _ = self.hub  # bind before the group exists: a busy port fails here
        lg = RaftLog(self, name, self_addr, peers, preferred, data_dir, sm, hubs or {})
        with self._lock:
            self._logs.append(lg)
            self._logs_version += 1
        self.wake()
        return lg

    def remove(self, lg: RaftLog, *, delete_dir: str | None = None) -> None:
        """Stop ticking ``lg``, close it and (``delete_dir``) delete its directory. The ticker may
        be in the middle of a pass over it (writing its journal, its commit index): it is closed,
        and its directory deleted, by the ticker itself at the start of its next pass (done here
        at once, that pass's writes failed and stopped the node). Until then
        ``removal_pending(delete_dir)`` is true: a new group must not open that directory."""
        with self._lock:
            if lg in self._logs:
                self._logs.remove(lg)
                self._logs_version += 1
            running = self._ticker is not None and not self._stop.is_set()
            if running:
                self._removed.append((lg, delete_dir))
        if running:
            self.wake()
        else:
            _close_and_delete(lg, delete_dir)

    def removal_pending(self, directory: str) -> bool:
        with self._lock:
            return any(d == directory for _, d in self._removed)

    def logs(self) -> list[RaftLog]:
        with self._lock:
            return list(self._logs)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._ticker = _Ticker(self)
        if self.driver == "loop":
            self._ticker_ident = threading.get_ident()  # start() runs on the loop
            self._ticker.attach(loop)
            return
        # A ticker that died would leave the node serving without Raft: stop the node instead.
        self._thread = threading.Thread(target=guarded("raft_ticker", self._run), name="raft-ticker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop ticking and close every group (from the loop or any other thread)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)
        elif self._ticker is not None and self._loop is not None:
            self._ticker.detach(self._loop)
        with self._lock:
            removed, self._removed = self._removed, []
        for lg in self.logs():
            lg.destroy()
        for lg, directory in removed:
            _close_and_delete(lg, directory)
        if self._hub is not None:
            self._hub.close()

    def wake(self) -> None:
        """Tick every group soon (a group was added or removed, or its state changed)."""
        self._wake.set()
        if self._ticker is not None and self.driver == "loop" and self._loop is not None:
            self._ticker.soon(self._loop)

    def call_in_loop(self, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` on the event loop. From the ticker the calls of one pass run
        together at its end (on the loop: directly; from the thread: one wake-up of the loop,
        not one per answered append)."""
        if threading.get_ident() == self._ticker_ident:
            self._calls.append((fn, args))
        elif self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(fn, *args)

    def _hand_over_calls(self) -> None:
        if not self._calls:
            return
        calls, self._calls = self._calls, []
        if self.driver == "loop":
            _run_calls(calls)
        elif self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(_run_calls, calls)

    def _run(self) -> None:
        """The thread driver: wait for messages or the next round, then make a pass."""
        assert self._ticker is not None
        self._ticker_ident = threading.get_ident()
        try:
            while not self._stop.is_set():
                self._ticker.run_pass(wait=True)
        finally:
            self._ticker.close()


class _Ticker:
    """Passes over a host's groups. Every ``tick_period`` a round ticks every group (elections,
    heartbeats, compaction, leadership balance); in between, a group is ticked as soon as the hub
    delivers its messages or pysyncobj's submit pipe has a proposal for it, so replication never
    waits for a round, and a leader's tick right after the acknowledgements that make a majority
    commits, applies and answers. What the groups sent during a pass leaves in one frame per
    peer at its end.

    The loop driver registers the one epoll (the hub's and every group's pipe) as a reader and
    arms a timer for the next round; the thread driver blocks in it."""

    def __init__(self, host: RaftHost) -> None:
        self.host = host
        self.master = select.epoll()
        self.master.register(host.hub.fileno(), select.EPOLLIN)
        self.watched: dict[int, RaftLog] = {}
        self.seen_version = -1
        self.next_round = 0.0
        self.last_pass = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None
        self._soon: asyncio.Handle | None = None
        self._attached = False

    # ---------------------------------------------------------------- loop driver

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.add_reader(self.master.fileno(), self._on_loop)
        self._attached = True
        self.soon(loop)

    def detach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Stop the loop driver: on the loop at once, from another thread through the loop."""
        if not self._attached or loop.is_closed():
            return
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._detach_now(loop)
            return
        done = threading.Event()

        def detach_and_signal() -> None:
            self._detach_now(loop)
            done.set()

        try:
            loop.call_soon_threadsafe(detach_and_signal)
        except RuntimeError:  # the loop closed meanwhile
            return
        done.wait(5)

    def _detach_now(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._attached:
            return
        self._attached = False
        loop.remove_reader(self.master.fileno())
        for handle in (self._timer, self._soon):
            if handle is not None:
                handle.cancel()
        self.close()

    def soon(self, loop: asyncio.AbstractEventLoop) -> None:
        """A pass at the next turn of the loop (once, however many ask)."""
        if self._soon is None and self._attached and threading.get_ident() == self.host._ticker_ident:
            self._soon = loop.call_soon(self._on_loop)
        elif self._attached and threading.get_ident() != self.host._ticker_ident:
            loop.call_soon_threadsafe(self._on_loop)

    def _on_loop(self) -> None:
        self._soon = None
        if not self._attached or self.host._stop.is_set():
            return
        guarded("raft_ticker", self.run_pass)()
        loop = self.host._loop
        if loop is None or not self._attached:
            return
        delay = max(0.0, self.next_round - time.monotonic())
        if self._timer is None or self._timer.when() > loop.time() + delay + 0.001:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_later(delay, self._on_round)

    def _on_round(self) -> None:
        self._timer = None
        self._on_loop()

    # ---------------------------------------------------------------- one pass

    def close(self) -> None:
        self.master.close()

    def run_pass(self, wait: bool = False) -> None:
        """Tick what is due: every group at a round, else those with messages or proposals
        (``wait``: block until one has, or the round comes; the thread driver)."""
        host = self.host
        hub = host.hub
        with host._lock:
            logs, version = list(host._logs), host._logs_version
            removed = list(host._removed)
        for gone, directory in removed:  # no longer in ``logs``: nothing ticks them after this
            _close_and_delete(gone, directory)
        if removed:
            with host._lock:
                host._removed = host._removed[len(removed):]
        if time.monotonic() - self.last_pass > host.timings.raft_min_timeout / 2:
            # No pass for a while (the process was stopped, or starved of CPU). pysyncobj checks
            # election deadlines before it reads its messages, so every follower would start an
            # election before seeing the leader's heartbeats waiting in the socket, and unseat a
            # healthy leader (it has no pre-vote). Give them one timeout to hear first.
            for lg in logs:
                lg.postpone_election()
        self.last_pass = time.monotonic()
        hub.apply_detached()
        if self.seen_version != version:
            self.seen_version = version
            current = {lg.group._poller.fileno(): lg for lg in logs}
            for fd in set(self.watched) - set(current):
                try:
                    self.master.unregister(fd)
                except OSError:
                    pass
            for fd in set(current) - set(self.watched):
                self.master.register(fd, select.EPOLLIN)
            self.watched = current
        now = time.monotonic()
        hub_ready = False
        if now >= self.next_round:
            due = logs
            hub_ready = True
            self.next_round = now + host.timings.tick_period
            hub.maintain(now)
            for lg in logs:
                lg.compact_if_large()
            if host._last_balance == 0.0:
                host._last_balance = now + 3.0  # let the cluster settle before balancing
            if host.balance and now - host._last_balance >= host._balance_every:
                host._last_balance = now
                for lg in logs:
                    if lg.wants_transfer():
                        lg.start_transfer(now)
        else:
            due = []
            for fd, _ in self.master.poll(max(0.0, self.next_round - now) if wait else 0.0):
                if fd in self.watched:
                    due.append(self.watched[fd])
                else:
                    hub_ready = True
            if host._wake.is_set():
                host._wake.clear()
                due = logs
        if hub_ready:
            touched = hub.process()
            if touched and due is not logs:
                seen = set(map(id, due))
                due = due + [lg for lg in logs if lg.name in touched and id(lg) not in seen
                             and lg.tick_after_messages()]
        for lg in due:
            try:
                # Acknowledgements the hub handled above are counted by this tick, which
                # also applies what they committed and answers the callers.
                lg.group.doTick(0.0)
                if not lg.attached and lg.transport is not None:
                    lg.attached = True
                    hub.attach(lg.name, lg.transport, lg.transport.hub_peers())
                lg.check_leadership()
                lg.step_transfer(now)
            except OSError as e:  # a journal or snapshot write failed: nothing may be acknowledged now
                fail_stop("raft_tick", f"{lg.name}: {type(e).__name__}: {e}")
            except Exception:  # noqa: BLE001 - one group's failure must not stop the others
                log.exception("event=raft_tick_failed partition=%s", lg.name)
        sync_due(before_send=True)  # durability = "fsync": journals on disk before messages leave
        hub.flush()
        host._hand_over_calls()


if TYPE_CHECKING:  # mypy checks RaftLog against the seam it implements
    _is_coordinator_log: type[CoordinatorLog] = RaftLog
    _is_peer_log: type[PeerLog] = RaftLog
