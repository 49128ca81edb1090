"""``RaftHost``: every Raft group of a node, ticked by one driver (the asyncio loop by default)."""

from __future__ import annotations

import asyncio
import logging
import select
import threading
import time
from collections.abc import Callable
from typing import Any

from replication.api import (
    ReplicationError,
)
from replication.durable import remove_dir
from replication.failstop import fail_stop, guarded
from replication.hub import RaftHub, RaftTLS
from replication.journal import sync_due
from replication.raft.entry_store import StateMachine
from replication.raft.log import RaftLog
from replication.raft.membership import Members
from replication.raft.settings import RaftTimings
from replication.raft.voters import VoterSet

log = logging.getLogger("kcoord.raft")


class RaftPortInUse(ReplicationError):
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



class RaftHost:
    """All Raft groups of one node process, ticked on the node's asyncio event loop: no Raft
    thread, no hand-off between threads on the commit path."""

    def __init__(self, secret: str, timings: RaftTimings | None = None, balance_every: float = 2.0,
                 listen: str | None = None, tls: RaftTLS | None = None) -> None:
        if not secret:
            raise ValueError("a cluster secret is required: it authenticates the Raft port's connections")
        self.secret = secret
        self.tls = tls  # TLS on the Raft port (replication/hub.py)
        self.timings = timings or RaftTimings()
        self._listen = listen
        self._hub: RaftHub | None = None
        self._ticker_ident = -1  # the event loop's thread
        self._calls: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        self._leader_listeners: list[Callable[[], None]] = []
        self._leader_note_pending = False
        self._logs_version = 0
        self._logs: list[RaftLog] = []
        self._removed: list[tuple[RaftLog, str | None]] = []  # out of _logs, to be closed by the ticker
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._ticker: _Ticker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._balance_every = balance_every
        self._last_balance = 0.0
        self.balance = True
        self.voters = VoterSet()  # which replica of each node votes (set by the cluster before any group)

    @property
    def hub(self) -> RaftHub:
        """The node's one Raft port: every group's messages to a peer share one connection."""
        if self._hub is None:
            assert self._listen is not None
            try:
                self._hub = RaftHub(self._listen, self.secret, self.timings.connection_retry, self.tls)
            except OSError as e:
                raise RaftPortInUse(f"Raft port {self._listen} is not available: {e}") from None
        return self._hub

    def add(self, name: str, self_addr: str, peers: list[str], preferred: str, data_dir: str,
            sm: StateMachine, hubs: dict[str, str] | None = None, members: Members | None = None) -> RaftLog:
        """A group named ``name`` (unique on the node). Members are named by logical addresses;
        ``hubs`` maps each peer's to its node's hub address (default: the same address, and the
        host listens on its first group's address)."""
        if self._listen is None:
            self._listen = self_addr
        _ = self.hub  # bind before the group exists: a busy port fails here
        lg = RaftLog(self, name, self_addr, peers, preferred, data_dir, sm, hubs or {}, members)
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
        self._ticker_ident = threading.get_ident()  # start() runs on the loop
        self._ticker.attach(loop)

    def stop(self) -> None:
        """Stop ticking and close every group (from the loop or any other thread)."""
        self._stop.set()
        self._wake.set()
        if self._ticker is not None and self._loop is not None:
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
        if self._ticker is not None and self._loop is not None:
            self._ticker.soon(self._loop)

    def on_leader_seen(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` on the event loop whenever a group here learns or forgets who leads
        it (this node or another), once per pass however many did."""
        self._leader_listeners.append(listener)

    def leader_seen_changed(self) -> None:
        """The Raft pass: some group's leader changed (``RaftLog.check_leadership``)."""
        if self._leader_listeners and not self._leader_note_pending:
            self._leader_note_pending = True
            self.call_in_loop(self._tell_leader_listeners)

    def _tell_leader_listeners(self) -> None:
        self._leader_note_pending = False
        for listener in list(self._leader_listeners):
            listener()

    def tick_by(self, when: float) -> None:
        """The Raft pass: make the next round no later than ``when`` (time.monotonic), e.g. for an
        election deadline moved earlier than the round would notice."""
        if self._ticker is not None and when < self._ticker.next_round:
            self._ticker.next_round = when

    def call_in_loop(self, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` on the event loop: from the loop, with the other calls of the pass
        at its end; from another thread (a background compaction or install), soon."""
        if threading.get_ident() == self._ticker_ident:
            self._calls.append((fn, args))
        elif self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(fn, *args)

    def _hand_over_calls(self) -> None:
        if not self._calls:
            return
        calls, self._calls = self._calls, []
        _run_calls(calls)


class _Ticker:
    """Passes over a host's groups. Every ``tick_period`` a round ticks every group (elections,
    heartbeats, compaction, leadership balance); in between, a group is ticked as soon as the hub
    delivers its messages or pysyncobj's submit pipe has a proposal for it, so replication never
    waits for a round, and a leader's tick right after the acknowledgements that make a majority
    commits, applies and answers. What the groups sent during a pass leaves in one frame per
    peer at its end.

    It registers the one epoll (the hub's and every group's pipe) as a reader of the event loop
    and arms a timer for the next round."""

    def __init__(self, host: RaftHost) -> None:
        self.host = host
        self.master = select.epoll()
        self.master.register(host.hub.fileno(), select.EPOLLIN)
        self.watched: dict[int, RaftLog] = {}
        self.seen_version = -1
        self.next_round = 0.0
        self.last_pass = time.monotonic()
        self._timer: asyncio.Handle | None = None
        self._timer_at = 0.0  # loop time the timer fires at (uvloop's call_later(0) returns a plain Handle)
        self._soon: asyncio.Handle | None = None
        self._attached = False

    # ---------------------------------------------------------------- on the loop

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
        at = loop.time() + delay
        if self._timer is None or self._timer_at > at + 0.001:
            if self._timer is not None:
                self._timer.cancel()
            self._timer, self._timer_at = loop.call_later(delay, self._on_round), at

    def _on_round(self) -> None:
        self._timer = None
        self._on_loop()

    # ---------------------------------------------------------------- one pass

    def close(self) -> None:
        self.master.close()

    def run_pass(self) -> None:
        """Tick what is due: every group at a round, else those with messages or proposals."""
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
            for fd, _ in self.master.poll(0.0):
                if fd in self.watched:
                    due.append(self.watched[fd])
                else:
                    hub_ready = True
            if host._wake.is_set():
                host._wake.clear()
                due = logs
        if hub_ready:
            touched = hub.process()
            lost = hub.take_lost()  # a peer's connection dropped: its groups' leader may be gone
            if (touched or lost) and due is not logs:
                seen = set(map(id, due))
                due = due + [lg for lg in logs if id(lg) not in seen and (
                    lg.name in lost or lg.name in touched and lg.tick_after_messages())]
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


