"""``RaftLog``: the ReplicatedLog seam over one pysyncobj group (fencing, leadership events,
leader lease, likely leader, leadership transfer)."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from replication.api import (
    MAX_ENTRY_BYTES,
    CoordinatorLog,
    EntryTooLargeError,
    LeadershipChange,
    LeadershipListener,
    LogEntry,
    NotLeaderError,
    PeerLog,
    ReplicationError,
    StaleEpochError,
)
from replication.hub import RaftHub
from replication.journal import SafeJournal
from replication.raft.balance import rounds_of
from replication.raft.entry_store import StateMachine
from replication.raft.membership import Members
from replication.raft.pysyncobj_adapter import (
    FAIL_REASON,
    FOLLOWER,
    HubTransport,
    RaftGroup,
    SyncObjConf,
    make_serializer,
    monotonic,
)
from replication.raft.settings import (
    APPLY_FAILED,
    EPOCH_STRIDE,
    FENCED,
    GUESS_PERIOD_S,
    RANKED_MARGIN_S,
    RaftTimings,
)
from replication.raft.voters import VoterSet

log = logging.getLogger("kcoord.raft")


class MembershipRefused(ReplicationError):
    """A configuration change the group's leader may not make now (``membership.check_change``)."""


class LogHost(Protocol):
    """What a RaftLog needs of the host that drives it (``host.RaftHost``)."""

    @property
    def timings(self) -> RaftTimings: ...

    @property
    def hub(self) -> RaftHub: ...

    @property
    def voters(self) -> VoterSet: ...

    def call_in_loop(self, fn: Callable[..., None], *args: Any) -> None: ...

    def leader_seen_changed(self) -> None: ...

    def tick_by(self, when: float) -> None: ...

    def wake(self) -> None: ...


class RaftLog:
    """A ReplicatedLog over one Raft group; created and driven by a ``host.RaftHost``."""

    def __init__(self, host: LogHost, name: str, self_addr: str, peers: list[str], preferred: str,
                 data_dir: str, sm: StateMachine, hubs: dict[str, str], members: Members | None = None) -> None:
        self.host = host
        self._name = name
        self.self_addr = self_addr
        self.preferred = preferred
        self.sm = sm
        self._preferred_since: float | None = None
        self._hubs = hubs  # member address -> its node's hub address: the node, for balancing
        self._node_names: dict[str, str] = {}  # member address -> the node's name in log lines
        self._busy: Callable[[], bool] = lambda: False
        self._tried_round = 0  # the last balancing round that handed this group over (or tried)
        os.makedirs(data_dir, exist_ok=True)
        holder: dict[str, RaftGroup] = {}
        ser, deser = make_serializer(lambda: holder.get("g"))
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
        self.transport: HubTransport | None = None
        self._conf = conf
        self._compaction_bytes = t.compaction_bytes
        self._compaction_split = t.compaction_split

        def transport(sync_obj: Any, self_node: Any, other_nodes: Any) -> HubTransport:
            self.transport = HubTransport(sync_obj, self_node, other_nodes, host.hub, name, hubs)
            return self.transport

        self.attached = False  # to the hub: after the group's first tick (which loads its snapshot)
        # Created with every peer a voter, unless told otherwise (a node joining a running group
        # starts as no member and learns the configuration from the log it is sent).
        members = members or Members(frozenset([self_addr, *peers]),
                                     hubs={self_addr: host.hub.listen, **{a: hubs.get(a, a) for a in peers}})
        self.group = RaftGroup(self_addr, peers, conf, sm, transport, host.voters, members)
        self.group.name = name
        holder["g"] = self.group
        listen_first = monotonic() + t.connection_retry + 2 * t.raft_max_timeout
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
                monotonic() + t.append_entries_period + random.uniform(0.0, 0.05)
                if self_addr == preferred else listen_first)
        self._listeners: list[LeadershipListener] = []
        self._announced = -1  # epoch announced and applied while leader (-1: none)
        self._announcing = -1
        self._paused_until = 0.0
        self._transfer_sent = False
        self._leader_seen_connected: str | None = None
        self._leader_seen: Any = None  # the leader pysyncobj names, as check_leadership last saw it
        self.peer_addrs = list(peers)
        self._lost_at = 0.0  # when this node last lost its leadership (monotonic), for likely_leader
        self._match_at_loss: dict[str, int] = {}  # each follower's acknowledged index then, ditto
        # Event loop: appends proposed under the current leadership and not yet resolved. A leader
        # that steps down (a lost quorum) fails them at once: pysyncobj would resolve them only
        # when it learns the new leader's commit index, i.e. after the cut heals.
        self._in_flight: set[asyncio.Future[int]] = set()
        self._rounds = rounds_of(host)
        self._rounds.join(self)

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

    def catch_up(self) -> tuple[int, int] | None:
        """(the last applied index, the leader's commit index as last heard from it), or None if
        no leader was heard since this member started (a leader: its own commit index)."""
        d = self.group.__dict__
        commit = d["_SyncObj__raftCommitIndex"] if self.group._isLeader() else d.get("_SyncObj__leaderCommitIndex")
        if commit is None:
            return None
        return int(d["_SyncObj__raftLastApplied"]), int(commit)

    def lease_valid(self) -> bool:
        """This node leads and no other can have been elected meanwhile (a leader lease, see
        replication/raft/election.py): answers read from its state are current."""
        return bool(self.group.lease_valid())

    def likely_leader(self) -> str | None:
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
        if not others:  # a group of one: nobody else can lead it
            return None
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
            raise EntryTooLargeError(f"{self._name}: entry of {len(payload)} bytes exceeds {MAX_ENTRY_BYTES}")
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
        if len(payload) > MAX_ENTRY_BYTES:
            raise EntryTooLargeError(f"{self._name}: entry of {len(payload)} bytes exceeds {MAX_ENTRY_BYTES}")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()

        def done(result: Any, error: int) -> None:
            self.host.call_in_loop(_resolve, fut, result, error)

        self.group.submit(payload, callback=done)
        return int(await fut)

    # ---------------------------------------------------------------- membership

    def members(self) -> Members:
        """The group's configuration as this replica's log has it (committed or not)."""
        return self.group.history.current

    def left_members(self) -> set[str]:
        """Members an earlier configuration this replica still holds had and the current one
        has not: taken out (a member is never added back under its address: node ids are not
        taken again)."""
        h = self.group.history
        earlier = set(h.base.all).union(*(m.all for _, m in h.entries))
        return earlier - set(h.current.all)

    def members_committed(self) -> bool:
        """Leader: the configuration in force is committed (another change may be made)."""
        return self.group.history.last_index <= int(self.group.__dict__["_SyncObj__raftCommitIndex"])

    def match_index(self, addr: str) -> int:
        """Leader: the last index member ``addr`` acknowledged (-1: not known)."""
        for node, idx in list(self.group.__dict__["_SyncObj__raftMatchIndex"].items()):
            if node.id == addr:
                return int(idx)
        return -1

    async def change_members(self, op: str, addr: str, hub: str | None = None) -> None:
        """One single-server change of this group's configuration (``membership``), made by its
        leader and returned once committed. ``MembershipRefused`` says why it cannot be made
        now; a leader change meanwhile fails it as any append (its outcome unknown: read
        ``members()`` again)."""
        if not self.group._isLeader():
            raise NotLeaderError(f"{self._name}: not the leader")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()

        def done(result: Any, error: int) -> None:
            self.host.call_in_loop(_resolve, fut, 0 if result is None else result, error)

        refusal = self.group.propose_members(op, addr, hub, done)
        if refusal is not None:
            raise MembershipRefused(f"{self._name}: {op} {addr}: {refusal}")
        self.host.wake()
        self._in_flight.add(fut)
        try:
            await fut
        finally:
            self._in_flight.discard(fut)

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
        """The Raft pass: notice leadership changes and fence them with an announce."""
        g = self.group
        seen = g.__dict__.get("_SyncObj__raftLeader")
        if seen is not self._leader_seen:  # a leader named or forgotten, here or elsewhere
            self._leader_seen = seen
            self.host.leader_seen_changed()
        leader = g._isLeader()
        term = g.raftCurrentTerm
        if not leader:
            self._hasten_election_if_leader_gone()
            self._tick_by_election()
        if leader and self._announcing != term and self._announced // EPOCH_STRIDE != term:
            self._announcing = term
            self._announce(term * EPOCH_STRIDE, term)
        if not leader and (self._announced >= 0 or self._announcing >= 0):
            self._announcing = -1
            self._match_at_loss = {n.id: int(i) for n, i in list(g.__dict__["_SyncObj__raftMatchIndex"].items())}
            self.host.call_in_loop(self._lost_leadership, term)

    def tick_after_messages(self) -> bool:
        """The Raft pass: whether messages just handled call for a tick now. A follower with a
        leader has already answered them (pysyncobj replies as it receives); applying what
        they committed can wait for the periodic round. That saves each follower a tick per
        replicated entry. A leader (acknowledgements commit) and a candidate (votes) tick, and
        so does a follower whose election is due (a transfer's TimeoutNow)."""
        d = self.group.__dict__
        leader = d["_SyncObj__raftLeader"]
        return bool(d["_SyncObj__raftState"] != FOLLOWER or leader is None or leader is not self._leader_seen
                    or d["_SyncObj__raftElectionDeadline"] <= monotonic())

    def postpone_election(self) -> None:
        """The Raft pass: a follower's next election no sooner than one election timeout away."""
        if self.group._isLeader():
            return
        d = self.group.__dict__
        later = monotonic() + self.group._SyncObj__generateRaftTimeout()  # ranked, as ever
        if d["_SyncObj__raftElectionDeadline"] < later:
            d["_SyncObj__raftElectionDeadline"] = later

    def _hasten_election_if_leader_gone(self) -> None:
        """The leader's connection dropped (its process died or closed): elect soon instead of
        waiting out the full election timeout, but not before this node's stickiness ends (the
        drop may be on this side only, and the leader's lease may still count this node's last
        acknowledgements). Elections are always safe in Raft; this only moves the first one
        earlier, once per lost leader."""
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
        # not split the vote; the first one normally wins before the next starts. Each waits out
        # its stickiness and a margin: the others heard the leader's last message a little later
        # and refuse a pre-vote until their own stickiness ends.
        order = self.group.order
        rank = (order.index(self.self_addr) - order.index(addr) - 1) % len(order)
        wait = self.group.sticky_left() + RANKED_MARGIN_S + 0.25 * rank + random.uniform(0.0, 0.03)
        soon = monotonic() + wait
        d = self.group.__dict__
        if d["_SyncObj__raftElectionDeadline"] > soon:
            d["_SyncObj__raftElectionDeadline"] = soon

    def _tick_by_election(self) -> None:
        """The Raft pass, not leading: the round that starts this node's election comes at its
        deadline, not at the next periodic one (asked again every pass: a periodic round sets
        the next one a period later). pysyncobj's clock is not time.monotonic, the rounds' one."""
        due = self.group.__dict__["_SyncObj__raftElectionDeadline"]
        wait = due - monotonic()
        if wait > 0:  # one past is not: it waits for a connection (a round then would spin)
            self.host.tick_by(time.monotonic() + wait + 0.001)

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
        """``check()`` (called by the Raft driver) says whether this node would accept
        leadership handed over by a transfer now."""
        self.group.ready_to_lead = check

    def set_busy(self, busy: Callable[[], bool]) -> None:
        """``busy()`` (called by the Raft driver) says whether the partition's owner needs its
        leadership to stay here now (a rebalance in progress, open transactions): balancing
        then leaves the group where it is until a later round."""
        self._busy = busy

    def set_node_names(self, names: dict[str, str]) -> None:
        """How log lines name the node of each member address (e.g. node ids)."""
        self._node_names = dict(names)

    def name_node(self, addr: str, name: str) -> None:
        self._node_names[addr] = name

    def _node_of(self, addr: str) -> str:
        return self._hubs.get(addr) or self.group.history.current.hub(addr)

    def _named(self, addr: str) -> str:
        return self._node_names.get(addr) or self._node_of(addr)

    def balance_view(self) -> tuple[str, str | None]:
        """The Raft pass: (preferred node, leading node or None) for the balancing rounds."""
        leader = self.leader_address()
        return self._node_of(self.preferred), None if leader is None else self._node_of(leader)

    def wants_transfer(self, now: float | None = None) -> bool:
        """The Raft pass: hand leadership to the preferred node now? Only in a balancing round
        (``replication/raft/balance.py``) that found the preferred node past the imbalance
        threshold, once per round, with the preferred node connected for ``transfer_settle``
        (a node that just came back first catches up) and the owner not busy."""
        now = time.monotonic() if now is None else now
        t = self.host.timings
        current = self._rounds.advance(now, t)
        g = self.group
        if not t.auto_leader_rebalance or not g._isLeader() or self.preferred == self.self_addr \
                or self.preferred in g.learners or self.preferred not in g.history.current.voters:
            # a learner does not lead (replication/raft/voters.py), nor a member that is not a voter
            self._preferred_since = None
            return False
        status = g.getStatus()
        if status.get("partner_node_status_server_" + self.preferred) != 2:
            self._preferred_since = None
            return False
        if self._preferred_since is None:
            self._preferred_since = now
        if current == self._tried_round or self._node_of(self.preferred) not in self._rounds.imbalanced:
            return False
        if now - self._preferred_since < t.transfer_settle or self._busy():
            return False  # asked again at the ticker's next balancing pass of this round
        self._tried_round = current
        return True

    def elect_preferred(self) -> bool:
        """ElectLeaders on the leader: hand leadership to the preferred node now, as a balancing
        round would (quiesce, let it match our log, transfer). False if this node does not lead
        or is the preferred one."""
        g = self.group
        if not g._isLeader() or self.preferred == self.self_addr or self.preferred in g.learners \
                or self.preferred not in g.history.current.voters:
            return False
        self.start_transfer(time.monotonic())
        self.host.wake()
        return True

    def start_transfer(self, now: float) -> None:
        """Quiesce new appends for a moment so the preferred node can match our log."""
        if self._paused_until == 0.0:
            self._paused_until = now + 0.5
            self._transfer_sent = False

    def step_transfer(self, now: float) -> None:
        """The Raft pass while quiesced: ask for the transfer once the target matches our log.

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
                # every move is recorded (the chaos run's fault timeline is read from these lines)
                log.info("event=leadership_transfer partition=%s from=%s to=%s reason=balance", self._name,
                         self._named(self.self_addr), self._named(self.preferred))

        g.transferLeadership(self.preferred, callback=transferred)

    def destroy(self) -> None:
        self._rounds.leave(self)
        try:
            self.group.destroy()
            self.group._destroy()
        except Exception:  # noqa: BLE001 - shutting down anyway
            pass
        close = getattr(self.sm, "close", None)
        if callable(close):  # e.g. a data partition's install in progress: its thread and staging copy go
            close()



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




if TYPE_CHECKING:  # mypy checks RaftLog against the seam it implements
    _is_coordinator_log: type[CoordinatorLog] = RaftLog
    _is_peer_log: type[PeerLog] = RaftLog
