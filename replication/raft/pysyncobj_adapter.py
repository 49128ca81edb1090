"""The pysyncobj adapter: the only module that imports pysyncobj.

Everything kcoord changes in the library is here, each with a test: the crash-safe journal
(``SafeJournal`` plugged in through ``createJournal``) and dump loader, an epoll poller so that
one driver waits on every group, the follower-side append without needless truncation, ranked
election timeouts and election guards, fenced appends and announces, snapshots written by our
own serializer, the transport that carries a group's messages over the node's hub, and log
commands encoded as data (``commands``): pysyncobj's pickled calls are neither written nor
unpickled.
Private pysyncobj names (``_SyncObj__...``) are touched only here and in ``log`` through the
accessors this module gives ``RaftLog``.
"""

from __future__ import annotations

import logging
import random
import select
from collections.abc import Callable
from typing import Any

import msgpack
import pysyncobj.journal as _pso_journal
import pysyncobj.pickle as _pso_pickle
import pysyncobj.syncobj as _pso
from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf
from pysyncobj.monotonic import monotonic
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.transport import Transport

from replication.durable import renamed, sync
from replication.failstop import EXIT_CORRUPT, fail_stop
from replication.hub import RaftHub
from replication.journal import SafeJournal
from replication.raft import commands, membership
from replication.raft.election import ElectionGuard
from replication.raft.entry_store import StateMachine
from replication.raft.membership import History, Members, MembersError, NewerMembersError
from replication.raft.settings import APPLY_FAILED, FENCED, RANKED_MARGIN_S, READY_APPLY_LAG, SNAPSHOT_VERSION
from replication.raft.snapshot_transfer import StreamingSerializer, newer_snapshot
from replication.raft.voters import VoterSet

log = logging.getLogger("kcoord.raft")

# What ``log`` uses of pysyncobj, named here so that it imports no pysyncobj itself.
__all__ = ["FAIL_REASON", "FOLLOWER", "HubTransport", "RaftGroup", "SyncObjConf", "make_serializer", "monotonic"]


def _never_unpickle(*_args: Any, **_kwargs: Any) -> Any:
    raise ValueError("kcoord unpickles nothing (see replication/raft/commands.py)")


# Every path by which pysyncobj unpickles is overridden or refused below (applied commands,
# membership and version commands, chunked transmissions); should one be missed, or a new
# version add one, it fails here instead of running a peer's pickle.
_pso_pickle.load = _pso_pickle.loads = _never_unpickle
_pso_journal.loads = _never_unpickle

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


FOLLOWER = _pso._RAFT_STATE.FOLLOWER
_REGULAR = _pso._COMMAND_TYPE.REGULAR
_NO_OP = _pso._COMMAND_TYPE.NO_OP
_MEMBERSHIP = _pso._COMMAND_TYPE.MEMBERSHIP

class RaftGroup(ElectionGuard, SyncObj):  # type: ignore[misc]
    """One partition's Raft group. Its replicated state is ``sm`` plus the fence epoch."""

    def __init__(self, self_addr: str, peers: list[str], conf: SyncObjConf, sm: StateMachine,
                 transport: Callable[..., Any] | None = None, voters: VoterSet | None = None,
                 members: Members | None = None) -> None:
        self.sm = sm
        self.fence = 0
        self.name = self_addr
        self.order = sorted([self_addr, *peers])  # see successor()
        self.addr = self_addr
        self.ready_to_lead: Callable[[], bool] = lambda: True
        self._keep_tail = False  # see _append_entries_without_needless_truncation
        # The group's configuration (replication/raft/membership.py): the one it was created with
        # until its log or snapshot says otherwise. ``peers`` are whoever it may hear from first.
        self.history = History(members or Members(frozenset([self_addr, *peers])))
        self.member_voter = self.history.current.role(self_addr) == "voter"
        self._election_init(monotonic, conf.raftMinTimeout, conf.raftMaxTimeout, voters or VoterSet())
        if transport is None:
            super().__init__(self_addr, peers, conf)
        else:
            super().__init__(self_addr, peers, conf, transportClass=transport)
        journal = self.__dict__["_SyncObj__raftLog"]
        if isinstance(journal, SafeJournal):
            self._read_configurations(journal)
            journal.observer = self
        self._apply_members()
        self._commit_within_journal()
        self._SyncObj__serializer = StreamingSerializer(
            self.__dict__["_SyncObj__serializer"], conf.fullDumpFile, sm, self._snapshot_last, self._link_backlog,
            lambda: self.name, self._needs_snapshot)

    # ---------------------------------------------------------------- membership

    def _read_configurations(self, journal: SafeJournal) -> None:
        """The configuration entries of the journal as it was found at start."""
        for start in range(0, len(journal), 512):
            for command, idx, _term in journal.entries(start, start + 512):
                members = self._configuration(command) if command[:1] == bytes((_MEMBERSHIP,)) else None
                if members is not None:
                    self.history.added(idx, members)

    def _configuration(self, command: bytes) -> Members | None:
        """The configuration an entry holds; None if it holds none (skipped alike on every
        replica, and logged when applied). One of a later format stops the node: the others
        are in it, and this build cannot know what it means."""
        try:
            return membership.decode(command[1:])
        except NewerMembersError as e:
            fail_stop("raft_membership", f"{self.name}: {e}; upgrade this node", EXIT_CORRUPT)
        except MembersError:
            return None

    # the journal's observer (SafeJournal.observer): a configuration is in force once in the log
    def added(self, command: bytes, idx: int) -> None:
        members = self._configuration(command) if command[:1] == bytes((_MEMBERSHIP,)) else None
        if members is not None and self.history.added(idx, members):
            self._apply_members()

    def truncated(self, idx: int) -> None:
        if self.history.truncated(idx):
            self._apply_members()

    def cleared(self) -> None:
        self.history.cleared()
        self._apply_members()

    def _apply_members(self) -> None:
        """Make pysyncobj's member sets the current configuration: voters are its other nodes
        (counted for commits, votes and check-quorum), learners its read-only nodes (sent the log,
        counted for nothing). A member new to the leader starts from the end of its log."""
        m = self.history.current
        d = self.__dict__
        if "_SyncObj__otherNodes" not in d:
            return  # pysyncobj's init has not run yet
        me = self.addr
        voters, learners = m.voters - {me}, m.learners - {me}
        known = {n.id: n for n in d["_SyncObj__otherNodes"] | d["_SyncObj__readonlyNodes"]}
        node_class = d["_SyncObj__nodeClass"]
        nodes = {a: known.get(a) or node_class(a) for a in voters | learners}
        nxt, match, heard = d["_SyncObj__raftNextIndex"], d["_SyncObj__raftMatchIndex"], d["_SyncObj__lastResponseTime"]
        journal = d["_SyncObj__raftLog"]
        end = journal[len(journal) - 1][1] if len(journal) else 0  # empty: a snapshot replacing the log
        now = monotonic()
        for addr, node in nodes.items():
            if addr not in known:
                nxt[node], match[node] = end + 1, 0
            if addr in voters and node not in heard:
                heard[node] = now  # check-quorum gives a new voter a full timeout to answer
        for addr in set(known) - set(nodes):
            node = known[addr]
            nxt.pop(node, None)
            match.pop(node, None)
            heard.pop(node, None)
            d["_SyncObj__connectedNodes"].discard(node)
        d["_SyncObj__otherNodes"] = {nodes[a] for a in voters}
        d["_SyncObj__readonlyNodes"] = {nodes[a] for a in learners}
        self.order = sorted(m.voters | {me})
        self.member_voter = m.role(me) == "voter"
        transport = d.get("_SyncObj__transport")
        if isinstance(transport, HubTransport):
            transport.set_members({a: m.hub(a) for a in nodes}, list(nodes.values()))

    def propose_members(self, op: str, addr: str, hub: str | None,
                        callback: Callable[[Any, Any], None]) -> str | None:
        """Leader, on the Raft driver's thread: append a configuration entry for one change
        (``membership.check_change``), in force at once; ``callback`` when it is applied (committed).
        Returns why not, if not."""
        d = self.__dict__
        if not self._isLeader():
            return "not the leader"
        commit = int(d["_SyncObj__raftCommitIndex"])
        noop = d.get("_SyncObj__noopIDx")
        current = self.history.current
        node = next((n for n in d["_SyncObj__readonlyNodes"] if n.id == addr), None)
        refusal = membership.check_change(
            current, op, addr, hub, leader=self.addr,
            own_term_committed=noop is not None and commit >= noop,
            change_pending=self.history.last_index > commit,
            learner_caught_up=node is not None and d["_SyncObj__raftMatchIndex"].get(node, 0) >= commit)
        if refusal is not None:
            return refusal
        new = membership.changed(current, op, addr, hub)
        assert isinstance(new, Members)
        idx, term = self._SyncObj__getCurrentLogIndex() + 1, int(d["_SyncObj__raftCurrentTerm"])
        d["_SyncObj__raftLog"].add(bytes((_MEMBERSHIP,)) + membership.encode(new), idx, term)  # observed: in force
        d["_SyncObj__commandsWaitingCommit"][idx].append((term, callback))
        log.info("event=membership_change group=%s op=%s member=%s index=%d voters=%s learners=%s", self.name, op,
                 addr, idx, sorted(new.voters), sorted(new.learners))
        self._SyncObj__sendAppendEntries()
        return None

    def _commit_within_journal(self) -> None:
        """The stored commit index is a hint written without fsync, and the journal's tail may not
        have reached the disk either (power loss): a hint past the last entry present would let
        this node, as leader, count entries it appends later as committed with no follower
        holding them, or, as follower, apply a leader's uncommitted tail. It starts at most at the
        journal's end; the leader's messages (or a majority, as leader) move it on from there."""
        journal = self.__dict__["_SyncObj__raftLog"]
        if not len(journal):
            return
        end = journal[len(journal) - 1][1]
        commit = self.__dict__.get("_SyncObj__raftCommitIndex", 0)
        if commit > end:
            log.warning("event=commit_hint_past_journal group=%s commit_hint=%d journal_end=%d action=clamped",
                        self.name, commit, end)
            self._SyncObj__raftCommitIndex = end
            journal.setRaftCommitIndex(end)

    def _SyncObj__deleteEntriesFrom(self, fromIDx: int) -> None:  # noqa: N802,N803
        """Raft never removes an applied (so committed) entry; when a leader asks for it, this
        replica's state has diverged from the group's (an acknowledged entry was lost somewhere):
        stop rather than serve from it. Entries a follower already holds are not deleted at all
        (``_append_entries_without_needless_truncation``), so this is never the benign resend."""
        applied = self.__dict__.get("_SyncObj__raftLastApplied", 0)
        if fromIDx <= applied:
            fail_stop("raft_diverged", f"{self.name}: the leader's log conflicts with applied entry {fromIDx} "
                      f"(last applied {applied}): this replica's state diverged from its group's")
        super()._SyncObj__deleteEntriesFrom(fromIDx)

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

    def _SyncObj__sendAppendEntries(self) -> None:  # noqa: N802
        # A snapshot stream takes a bounded share of each pass (see snapshot_transfer).
        serializer = self.__dict__["_SyncObj__serializer"]
        serializer.pace(self.__dict__["_SyncObj__connectedNodes"])
        try:
            super()._SyncObj__sendAppendEntries()
        finally:
            serializer.resume()

    def _snapshot_last(self) -> tuple[int, int]:
        """(index, term) of the journal's snapshot entry: a follower sent this snapshot goes on from it."""
        journal = self.__dict__["_SyncObj__raftLog"]
        return (int(journal[1][1]), int(journal[1][2])) if len(journal) > 1 else (-1, -1)

    def _needs_snapshot(self, node: Any) -> bool:
        """Whether ``node``'s next entry is gone from the journal (it can only be sent the snapshot)."""
        journal = self.__dict__["_SyncObj__raftLog"]
        nxt = self.__dict__["_SyncObj__raftNextIndex"].get(node)
        return self._isLeader() and nxt is not None and len(journal) > 0 and nxt <= journal[0][1]

    def _link_backlog(self, node: Any) -> int:
        transport = self.__dict__.get("_SyncObj__transport")
        return transport.backlog(node) if isinstance(transport, HubTransport) else 0

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:  # noqa: N802
        # A leadership transfer (TimeoutNow) is a courtesy, not a need: decline it until this
        # node could serve at once (e.g. its coordinator state is caught up), so balancing never
        # hands a partition to a node that would then spend seconds loading it. Elections after
        # a leader fails are not affected.
        if isinstance(message, dict) and message.get("type") == "timeout_now" and not self._ready():
            return
        if isinstance(message, dict) and message.get("type") == "apply_command" and not self._valid_command(
                message.get("command")):
            return  # a follower forwards only commands it encoded: only a hostile peer sends another
        if isinstance(message, dict) and "transmission" in message:
            # pysyncobj's chunked transfer of one large entry, pickled: our leaders never send it
            # (every entry is below appendEntriesBatchSizeBytes), so only a hostile peer would.
            log.warning("event=raft_message_refused group=%s reason=chunked_transmission", self.name)
            return
        if isinstance(message, dict) and message.get("type") == "append_entries" and "prevLogIdx" in message:
            self._append_entries_without_needless_truncation(node, message)
            return
        serializer = self.__dict__["_SyncObj__serializer"]
        if isinstance(message, dict) and message.get("type") == "snapshot_refused":
            if isinstance(message.get("sid"), int):
                serializer.refused(node, message["sid"])
            return
        streamed = isinstance(message, dict) and message.get("type") == "append_entries" and "serialized" in message
        if streamed:
            # A piece says nothing of this node's log matching the leader's: it must not commit
            # (and apply) entries of its own that the leader may not have.
            message = dict(message, commit_index=min(message.get("commit_index", 0),
                                                     self.__dict__["_SyncObj__raftCommitIndex"]))
        super()._SyncObj__onMessageReceived(node, message)
        if not streamed or not isinstance(serializer, StreamingSerializer):
            return
        refused = serializer.take_refusal()
        if refused is not None:  # a piece of a snapshot stream did not fit: its leader starts over
            self.__dict__["_SyncObj__transport"].send(node, {"type": "snapshot_refused", "sid": refused})
        elif serializer.accepted:  # answered, so the leader keeps hearing from a follower that installs
            self._SyncObj__sendNextNodeIdx(node, reset=False, success=False)

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

    # The replicated calls. pysyncobj's ``@replicated`` pickles them, and its apply unpickles
    # whatever an entry holds: they are proposed and applied here instead (``commands``).
    def announce(self, epoch: int, callback: Callable[[Any, Any], None] | None = None) -> None:
        self._propose(callback, commands.ANNOUNCE, epoch)

    def append(self, epoch: int, payload: bytes, callback: Callable[[Any, Any], None] | None = None) -> None:
        self._propose(callback, commands.APPEND, epoch, payload)

    def submit(self, payload: bytes, callback: Callable[[Any, Any], None] | None = None) -> None:
        """Unfenced: any node may submit (pysyncobj forwards it to the leader)."""
        self._propose(callback, commands.SUBMIT, payload)

    def _propose(self, callback: Callable[[Any, Any], None] | None, command: int, *args: Any) -> None:
        self._applyCommand(commands.encode(command, *args), callback, _REGULAR)

    def _valid_command(self, command: Any) -> bool:
        """A command as a follower forwards it (type byte included) that this node would apply."""
        try:
            if not isinstance(command, bytes) or command[:1] != bytes((_REGULAR,)):
                raise commands.CommandError("not a regular command")
            commands.decode(command[1:])
        except commands.CommandError as e:
            log.warning("event=raft_command_refused group=%s bytes=%d reason=%r source=forwarded", self.name,
                        len(command) if isinstance(command, bytes) else -1, str(e))
            return False
        return True

    def _SyncObj__doApplyCommand(self, command: bytes) -> Any:  # noqa: N802
        """Apply one committed entry: a no-op, or one of our commands. Anything else is skipped
        alike on every replica, with one line in the log: pysyncobj would unpickle it, and its
        membership and code-version commands are not used here."""
        kind = command[0] if command else -1
        if kind == _NO_OP or kind == _MEMBERSHIP and self._configuration(command) is not None:
            return None  # a configuration is in force from the moment it is in the log
        try:
            if kind != _REGULAR:
                raise commands.CommandError(f"command type {kind}")
            cmd, args = commands.decode(command[1:])
        except commands.UnknownCommandError as e:
            # Committed, so every replica of a later release applies it: skipping it here would
            # make this replica's state diverge from theirs.
            fail_stop("raft_apply", f"{self.name}: {e}: written by a newer release; upgrade this node", EXIT_CORRUPT)
        except commands.CommandError as e:
            log.warning("event=raft_command_refused group=%s bytes=%d reason=%r source=log action=skipped",
                        self.name, len(command), str(e))
            return APPLY_FAILED
        if cmd == commands.ANNOUNCE:
            if args[0] > self.fence:
                self.fence = args[0]
            return self.fence
        if cmd == commands.APPEND and args[0] != self.fence:
            return FENCED
        return self._apply(self.fence if cmd == commands.SUBMIT else args[0], args[-1])

    def _SyncObj__parseChangeClusterRequest(self, command: bytes) -> None:  # noqa: N802
        return None  # pysyncobj's pickled changes are off: configurations are ours (membership.py)

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
            self._apply_members()  # the snapshot's configuration, and the journal's after it
            end = journal[len(journal) - 1][1]
            commit: int = self.__dict__["_SyncObj__raftCommitIndex"]
            if commit > end:
                self._SyncObj__raftCommitIndex = end
                journal.setRaftCommitIndex(end)
            self._SyncObj__onSetCodeVersion(0)
        except Exception:
            log.exception("event=snapshot_load_failed")


def make_serializer(group: Callable[[], RaftGroup | None]) -> tuple[Callable[..., None], Callable[[str], Any]]:
    def serialize(path: str, raft_data: Any) -> None:
        g = group()
        assert g is not None
        last, prev, cluster = raft_data
        blob = {"v": SNAPSHOT_VERSION, "last": list(last), "prev": list(prev), "cluster": sorted(n.id for n in cluster),
                "members": g.history.at(int(last[1])).as_dict(), "fence": g.fence, "state": g.sm.snapshot()}
        try:
            with open(path, "wb") as f:  # pysyncobj renames it over the last snapshot
                f.write(msgpack.packb(blob, use_bin_type=True))
                f.flush()
                sync(f.fileno())  # the journal's rewrite, next, fsyncs the directory
            if path.endswith(".tmp"):
                renamed(path, path[:-4])  # pysyncobj renames it over the last snapshot next
        except OSError as e:
            fail_stop("snapshot", f"{path}: write failed: {type(e).__name__}: {e}")

    def deserialize(path: str) -> Any:
        g = group()
        assert g is not None
        with open(path, "rb") as f:
            blob = msgpack.unpackb(f.read(), raw=False)
        newer = newer_snapshot(blob)
        if newer is not None:
            fail_stop("snapshot", f"{path}: {newer}", EXIT_CORRUPT)
        g.fence = max(g.fence, int(blob["fence"]))
        try:  # a snapshot of a release before configurations: the group's own, unchanged since
            members = Members.from_dict(blob["members"]) if "members" in blob else g.history.base
        except MembersError as e:
            fail_stop("snapshot", f"{path}: {e}", EXIT_CORRUPT)
        g.history.install(int(blob["last"][1]), members)
        g.sm.restore(blob["state"])
        return (tuple(blob["last"]), tuple(blob["prev"]), set())

    return serialize, deserialize



# What a replica takes from a member its configuration does not name: the messages it answers as a
# follower or a voter (each says who sent it, ``from``: the hub names only the node).
STRANGER_MESSAGES = frozenset({"append_entries", "request_vote", "pre_vote"})


class HubTransport(Transport):  # type: ignore[misc]
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
        self._strangers: dict[str, Any] = {}  # hub -> a sender this replica's configuration does not name

    @property
    def ready(self) -> bool:
        return True

    def tryGetReady(self) -> None:  # noqa: N802 - pysyncobj's interface
        pass

    def waitReady(self) -> None:  # noqa: N802
        pass

    def addNode(self, node: Any) -> None:  # noqa: N802 - members change through set_members
        pass

    def dropNode(self, node: Any) -> None:  # noqa: N802
        pass

    def set_members(self, hubs: dict[str, str], nodes: list[Any]) -> None:
        """The group's other members now (member address -> its node's hub address): messages
        go to these and are taken only from these; already connected ones count as connected."""
        by_id = {n.id: n for n in nodes}
        self._hub_of = dict(hubs)
        self._node_of = {hubs[a]: by_id[a] for a in hubs}
        self._strangers = {}
        if self._hub.reattach(self._gid, self, self.hub_peers()):
            connected = self._hub.connected()
            for peer, node in self._node_of.items():
                if peer in connected:
                    self._onNodeConnected(node)

    def send(self, node: Any, message: Any) -> bool:
        streamed = isinstance(message, dict) and "serialized" in message
        if streamed and message["serialized"] is None:
            return True  # a snapshot stream's pause: nothing to send
        message = self._sync_obj.outgoing(node.id, message)  # lease and transfer marks (election.py)
        peer = self._hub_of.get(node.id)
        delivered = peer is not None and self._hub.send(peer, self._gid, message)
        if streamed and delivered and peer is not None:
            self._hub.note_queued(peer, len(message["serialized"][0]))
        if streamed:
            serializer = self._sync_obj.__dict__.get("_SyncObj__serializer")
            if isinstance(serializer, StreamingSerializer):
                serializer.sent(node, delivered)
        return delivered

    def backlog(self, node: Any) -> int:
        """Bytes waiting on the link to ``node``'s node (all groups)."""
        peer = self._hub_of.get(node.id)
        return self._hub.backlog(peer) if peer is not None else 0

    def destroy(self) -> None:
        self._hub.detach(self._gid, self)

    # the hub's side (the Raft driver)
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
        node = self._node_of.get(peer) or self._stranger(peer, message)
        if node is not None:
            self._onMessageReceived(node, message)

    def _stranger(self, peer: str, message: Any) -> Any:
        """A leader's or a candidate's message from a member this replica's configuration does
        not name (yet): Raft answers it whatever its own configuration says. A replica that
        missed the entries adding a member would otherwise never hear that member once it leads,
        nor the leader that truncates an uncommitted change. It follows or votes as for any
        sender (its answers go back to the sender's hub); it counts nothing from a stranger, as
        only its configuration's voters count. Anything else from a stranger is dropped."""
        if not isinstance(message, dict) or message.get("type") not in STRANGER_MESSAGES:
            return None
        addr = message.get("from")
        if not isinstance(addr, str) or addr == self._sync_obj.addr:
            return None
        node = self._strangers.get(peer)
        if node is None or node.id != addr:
            node = self._strangers[peer] = self._sync_obj.__dict__["_SyncObj__nodeClass"](addr)
            self._hub_of[addr] = peer
        return node


def replicated_method_names() -> dict[int, str]:
    """The command ids of ``RaftGroup``'s log entries and their names, for tools that read them offline."""
    return dict(commands.NAMES)
