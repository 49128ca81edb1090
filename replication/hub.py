"""One authenticated TCP connection per pair of nodes, shared by every Raft group of a node.

pysyncobj's own transport gives each group its own port and connections and frames each
message on its own (pickle, zlib, Fernet). With dozens of groups per node that is dozens of
sockets, heartbeats, syscalls and wake-ups per peer for every round. The hub carries every
group's messages to a peer on one connection, and what the groups send during one pass of
the ticker leaves as one frame: one syscall and one wake-up on the other side.

Security: the cluster secret authenticates both ends in a challenge-response handshake in which
the dialer proves it first (so anyone may connect and learn nothing that would let them test
guesses of the secret offline), then the acceptor. Unauthenticated connections are bounded: a few per
source address, MAX_PENDING in all from addresses that are not a peer's (the oldest makes room;
a peer's is never evicted, see ``_accept``), each given HANDSHAKE_TIMEOUT and at most
HANDSHAKE_MAX bytes buffered; a flood of slow handshakes cannot hold the port, the ticker or a
peer's handshake (with TLS, its handshake comes first and buffers what OpenSSL holds of one
handshake message at most). Every frame after it carries an HMAC-SHA256 over a per-direction sequence number and the
payload, keyed by a session key derived from both ends' nonces, and a replayed or reordered
frame fails its MAC. Payloads are msgpack (data only: no pickle, so even a peer that knows the
secret cannot make a node run code), decoded only once their MAC verified; the log commands
they carry are data too (``replication/raft/commands.py``). Without TLS frames are authenticated,
not encrypted, and Raft traffic carries what the logs hold (the metadata log: SCRAM credentials'
stored and server keys, ACLs): with ``tls`` (``RaftTLS``) every connection is TLS with the
certificates checked both ways, and the handshake above runs inside it.

Threading: everything runs where the Raft driver runs (the event loop by default) except ``detach``, which only queues.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import ipaddress
import logging
import os
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import msgpack

from replication.link_faults import LinkFaults

log = logging.getLogger("kcoord.raft.hub")

# 6: votes are counted by replica (directory ids), which a node of 5 would not check;
# 5: metadata records of kinds a node of 4 would stop on (topic configs, partition increases);
# 4: log commands are msgpack, which a node of 3 would fail to apply (3: the dialer proves first;
# 2: the acceptor did; 1 pickled the payloads)
MAGIC = b"KCRH6"
NONCE_BYTES = 16
MAC_BYTES = 32
HANDSHAKE_MAX = 512  # before authentication a connection may not make us buffer more than this
FRAME_MAX = 256 * 1024 * 1024
FRAME_SPLIT = 16 * 1024 * 1024  # a pass's messages to a peer leave in frames of about this at most
PEER_BUFFER_MAX = 64 * 1024 * 1024  # unsent bytes per peer; past it messages are dropped (Raft resends)
KEEPALIVE_EVERY = 0.5  # an empty frame when nothing else was sent for this long
# Nothing received (not even a keepalive) for this long: close, and dial afresh. After a network
# partition heals, a connection that kept its unacknowledged data resumes only at TCP's next
# retransmission, which backs off to as late as the partition's length after the heal (measured:
# 7 s cut, 7.4 s until every node named the leaders again); a new connection resumes at once.
SILENT_PEER_TIMEOUT = 2.5
CONNECT_TIMEOUT = 1.0  # a dial whose SYNs get no answer (a partition): give up, dial again
# The larger address dials the smaller, so that a pair has one connection. The smaller dials too
# once it has had no connection to a peer for this long: the larger may not know the pair yet
# (a group member it has not heard of, say a node added while it was cut off).
SMALLER_DIALS_AFTER = 3.0
HANDSHAKE_TIMEOUT = 5.0
MAX_PENDING = 32  # accepted from strangers, not yet authenticated; past it the oldest one is closed
MAX_PENDING_PER_HOST = 8  # from one address; past it a new one is closed at once
_LEN = struct.Struct(">I")
_SEQ = struct.Struct(">Q")
_RECV = 256 * 1024


@dataclass(frozen=True)
class RaftTLS:
    """TLS of the Raft port: ``server`` must require the dialer's certificate (CERT_REQUIRED),
    ``client`` checks the acceptor's certificate and host name and shows this node's own."""

    server: ssl.SSLContext
    client: ssl.SSLContext


class Endpoint(Protocol):
    """One Raft group's side of the hub (peers are named by their hub address)."""

    def on_connected(self, peer: str) -> None: ...

    def on_disconnected(self, peer: str) -> None: ...

    def on_message(self, peer: str, message: Any) -> None: ...


def derive_key(secret: str) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", secret.encode(), b"kcoord raft hub v1", 50_000)


def _encode(batch: list[tuple[str, Any]]) -> bytes:
    """A batch of ``(group, message)``: pysyncobj's messages are dicts of str, int, float,
    bool, bytes, None and sequences of them, which msgpack carries as they are (a sequence
    comes back as a tuple)."""
    return bytes(msgpack.packb(batch, use_bin_type=True))


def _decode(payload: bytes) -> Any:
    return msgpack.unpackb(payload, raw=False, use_list=False, strict_map_key=False)


_EMPTY_BATCH = _encode([])  # the keepalive


def _frames(batch: list[tuple[str, Any]]) -> list[bytes]:
    """One pass's messages to a peer as frames of about FRAME_SPLIT bytes at most (a
    follower's whole backlog as one frame went over the receiver's FRAME_MAX, and the link
    was closed and redialled for ever). Halved until each part fits; one message stays whole."""
    payload = _encode(batch)
    if len(payload) <= FRAME_SPLIT or len(batch) == 1:
        return [payload]
    mid = len(batch) // 2
    return _frames(batch[:mid]) + _frames(batch[mid:])


def _mac(key: bytes, *parts: bytes) -> bytes:
    return hmac.digest(key, b"".join(parts), "sha256")


class _Conn:
    """A connection and its handshake state. Dialer: connecting -> hello (sent its nonce and name)
    -> proved (sent its proof of the acceptor's challenge) -> open (checked the acceptor's proof).
    Acceptor: accept -> challenged (sent its nonce) -> open (checked the dialer's proof, sent its own)."""

    __slots__ = ("sock", "fd", "peer", "source", "dialer", "state", "rbuf", "wbuf", "nonce", "peer_nonce",
                 "key", "send_seq", "recv_seq", "out_tag", "in_tag", "born", "writing", "last_recv", "last_sent",
                 "tls", "tls_in", "tls_out", "tls_pending")

    def __init__(self, sock: socket.socket, peer: str, dialer: bool, state: str) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.peer = peer  # hub address of the other end ("" until an acceptor hears it)
        self.source = ""  # an accepted connection's source address
        self.dialer = dialer
        self.state = state
        self.rbuf = bytearray()
        self.wbuf = bytearray()
        self.nonce = os.urandom(NONCE_BYTES)
        self.peer_nonce = b""
        self.key = b""
        self.send_seq = 0
        self.recv_seq = 0
        self.out_tag = b"d" if dialer else b"a"
        self.in_tag = b"a" if dialer else b"d"
        self.born = time.monotonic()
        self.writing = False
        self.last_recv = self.born  # when the peer last sent anything (silent-peer check)
        self.last_sent = self.born
        # TLS (RaftHub's ``tls``): the socket's bytes go through memory BIOs, so the epoll loop
        # stays as it is; ``wbuf`` then holds what TLS made of the frames
        self.tls: ssl.SSLObject | None = None
        self.tls_in = ssl.MemoryBIO()
        self.tls_out = ssl.MemoryBIO()
        self.tls_pending = False  # the TLS handshake is not done yet


class RaftHub:
    def __init__(self, listen: str, secret: str, retry: float = 0.5, tls: RaftTLS | None = None) -> None:
        self.listen = listen
        self._key = derive_key(secret)
        self._tls = tls
        self._retry = retry
        self.epoll = select.epoll()
        host, port = listen.rsplit(":", 1)
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._server.bind((host, int(port)))
        except OSError:
            self._server.close()
            self.epoll.close()
            raise
        self._server.listen(64)
        self._server.setblocking(False)
        self.epoll.register(self._server.fileno(), select.EPOLLIN)
        self._conns: dict[int, _Conn] = {}
        self._open: dict[str, _Conn] = {}  # peer -> its authenticated connection
        self._dialing: dict[str, _Conn] = {}
        self._next_dial: dict[str, float] = {}
        self._unlinked_since: dict[str, float] = {}  # peer -> since when it has had no connection
        self._peer_hosts: set[str] = set()  # the peers' IP addresses (see _accept)
        self._dial_warned: dict[str, str] = {}  # peer -> the dial error last logged (logged once until it changes)
        self._groups: dict[str, tuple[Endpoint, tuple[str, ...]]] = {}
        self._lost: set[str] = set()  # groups that lost a peer's connection (take_lost)
        self._outbox: dict[str, list[tuple[str, Any]]] = {}
        self._queued: dict[str, int] = {}  # large bytes in the outbox, per peer (``backlog``)
        self._lock = threading.Lock()
        self._detached: list[tuple[str, Endpoint]] = []
        self._recv_buf = bytearray(_RECV)
        self._recv_view = memoryview(self._recv_buf)
        # Fault injection (tests, the chaos tool): Raft messages to and from these peers are
        # dropped both ways, as a network partition would, while the connections stay up.
        # Replaced whole from any thread (a frozenset), read by the ticker.
        self.cut: frozenset[str] = frozenset()
        self.mute: frozenset[str] = frozenset()  # one way: what we send these peers is lost
        self.faults: LinkFaults | None = None  # delay, duplication, reordering (link_faults.py)
        # peer -> when a frame from it last got through (read from any thread: a dict assignment)
        self.heard: dict[str, float] = {}
        self._flood_logged = 0.0
        self._last_read = time.monotonic()  # when ``process`` last read the sockets (see maintain)

    def fileno(self) -> int:
        return self.epoll.fileno()

    def peers_heard_within(self, seconds: float) -> int:
        """How many peers got a frame through to us in the last ``seconds`` (any thread)."""
        since = time.monotonic() - seconds
        return sum(1 for t in list(self.heard.values()) if t >= since)

    # ---------------------------------------------------------------- groups

    def attach(self, gid: str, endpoint: Endpoint, peers: Iterable[str]) -> None:
        """The Raft pass: start delivering ``gid``'s messages (after the group's first tick,
        which loads its snapshot: it must not see a message before that)."""
        peers = tuple(peers)
        self._groups[gid] = (endpoint, peers)
        for peer in peers:
            if peer not in self._next_dial:
                self._learn_peer_host(peer)
            self._next_dial.setdefault(peer, 0.0)
            if peer in self._open:
                endpoint.on_connected(peer)

    def dial_first(self, peer: str) -> None:
        """Dial ``peer`` at once whichever address is larger: a node that does not know this one
        never dials it (a node asking to be told the cluster, cluster/bootstrap.py)."""
        self._unlinked_since[peer] = float("-inf")

    def reattach(self, gid: str, endpoint: Endpoint, peers: Iterable[str]) -> bool:
        """``gid``'s members changed: its messages go to and come from ``peers`` from now on.
        False if the group is not attached (yet): ``attach`` takes the peers then."""
        group = self._groups.get(gid)
        if group is None or group[0] is not endpoint:
            return False
        self.attach(gid, endpoint, peers)
        return True

    def _learn_peer_host(self, peer: str) -> None:
        """Note a peer's IP addresses: its hub address's host, resolved once if it is a name (as
        ``_dial`` does on every dial). One that does not resolve yet is noted when it
        authenticates (``_opened``)."""
        host = peer.rsplit(":", 1)[0].strip("[]")
        try:
            self._peer_hosts.add(str(ipaddress.ip_address(host)))
            return
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
        except OSError:
            return
        self._peer_hosts.update(str(info[4][0]) for info in infos)

    def detach(self, gid: str, endpoint: Endpoint) -> None:
        """Any thread: stop delivering ``gid``'s messages to ``endpoint`` from the next pass on
        (a group of the same name attached since, e.g. a re-created topic's, stays)."""
        with self._lock:
            self._detached.append((gid, endpoint))

    def apply_detached(self) -> None:
        if not self._detached:
            return
        with self._lock:
            gone, self._detached = self._detached, []
        for gid, endpoint in gone:
            group = self._groups.get(gid)
            if group is not None and group[0] is endpoint:
                del self._groups[gid]

    def connected(self) -> set[str]:
        return set(self._open)

    def hung_up(self, peer: str) -> bool:
        """Any thread: ``peer`` has no open connection, or its connection has ended (the other end
        closed it or it failed) though the ticker has not read that yet. A peer that just died is
        known here before the ticker's next pass: a question read at that moment (FindCoordinator)
        must not be answered with the dead node."""
        conn = self._open.get(peer)
        if conn is None:
            return True
        fd = conn.sock.fileno()  # -1 once the ticker closed it
        if fd < 0:
            return True
        probe = select.poll()
        probe.register(fd, select.POLLRDHUP)
        return any(ev & (select.POLLRDHUP | select.POLLHUP | select.POLLERR) for _, ev in probe.poll(0))

    # ---------------------------------------------------------------- sending

    def send(self, peer: str, gid: str, message: Any) -> bool:
        """Queue a message; it leaves with the next ``flush`` (end of the ticker's pass). A peer
        that does not read what it is sent gets nothing more once PEER_BUFFER_MAX bytes wait for
        it: Raft treats the message as lost and sends again later."""
        conn = self._open.get(peer)
        if conn is None or len(conn.wbuf) > PEER_BUFFER_MAX:
            return False
        box = self._outbox.get(peer)
        if box is None:
            self._outbox[peer] = [(gid, message)]
        else:
            box.append((gid, message))
        return True

    def backlog(self, peer: str) -> int:
        """Bytes for ``peer`` that its socket has not taken yet: written, or queued this pass (as far
        as ``note_queued`` was told)."""
        conn = self._open.get(peer)
        return (len(conn.wbuf) if conn is not None else 0) + self._queued.get(peer, 0)

    def note_queued(self, peer: str, n: int) -> None:
        """A large message (a snapshot's piece) was queued for ``peer`` this pass."""
        self._queued[peer] = self._queued.get(peer, 0) + n

    def flush(self) -> None:
        faults = self.faults
        if faults is not None:
            now = time.monotonic()
            for peer in self._open:  # held-back messages leave even when nothing new does
                if peer not in self._outbox and faults.pending():
                    self._outbox[peer] = []
            self._outbox = {peer: faults.shape(peer, batch, now) for peer, batch in self._outbox.items()}
            self._outbox = {peer: batch for peer, batch in self._outbox.items() if batch}
        self._queued.clear()
        if not self._outbox:
            return
        boxes, self._outbox = self._outbox, {}
        for peer, batch in boxes.items():
            conn = self._open.get(peer)
            if conn is not None and peer not in self.cut and peer not in self.mute:
                for payload in _frames(batch):
                    self._write_frame(conn, payload)

    def _write_frame(self, conn: _Conn, payload: bytes, raw: bool = False) -> None:
        if raw:
            frame = _LEN.pack(len(payload)) + payload
        else:
            mac = _mac(conn.key, conn.out_tag, _SEQ.pack(conn.send_seq), payload)
            conn.send_seq += 1
            conn.last_sent = time.monotonic()
            frame = _LEN.pack(MAC_BYTES + len(payload)) + mac + payload
        if conn.tls is not None:  # frames are written only once its handshake is done
            try:
                conn.tls.write(frame)
            except ssl.SSLError as e:
                self._close(conn, f"TLS: {e}")
                return
            conn.wbuf += conn.tls_out.read()
        else:
            conn.wbuf += frame
        self._try_write(conn)

    def _try_write(self, conn: _Conn) -> None:
        while conn.wbuf:
            try:
                n = conn.sock.send(conn.wbuf)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self._close(conn, "write failed")
                return
            del conn.wbuf[:n]
        want = bool(conn.wbuf)
        if want != conn.writing:
            conn.writing = want
            self.epoll.modify(conn.fd, select.EPOLLIN | (select.EPOLLOUT if want else 0))

    # ---------------------------------------------------------------- connections

    def maintain(self, now: float) -> None:
        """Dial the peers this node dials (the larger address dials the smaller, so a pair has
        one connection) and drop handshakes that stalled."""
        # A node that has not read its sockets for a while (its process stopped, starved of CPU or
        # busy) cannot tell a silent peer from frames waiting unread: it judges silence again once
        # it has read them. Judging at once had every node that stalled for a few seconds close
        # all its links, and its leaders step down, for a silence of its own making.
        judge = now - self._last_read < SILENT_PEER_TIMEOUT / 2
        for conn in list(self._conns.values()):
            if conn.state == "connecting":
                if now - conn.born > CONNECT_TIMEOUT:
                    self._close(conn, "connect timed out")
            elif conn.state != "open":
                if now - conn.born > HANDSHAKE_TIMEOUT:
                    self._close(conn, "handshake timed out")
            elif judge and now - conn.last_recv > SILENT_PEER_TIMEOUT and conn.peer not in self.cut:
                # a peer that accepts the connection but never answers (hung, cut off, or a
                # half-open link). An injected cut (self.cut) keeps the link up and silent on
                # purpose: a new connection would not get through it either.
                self._close(conn, f"silent for {now - conn.last_recv:.1f}s")
            elif (now - conn.last_sent > KEEPALIVE_EVERY and not conn.wbuf and conn.peer not in self.cut
                  and conn.peer not in self.mute):
                self._write_frame(conn, _EMPTY_BATCH)
        for peer, when in list(self._next_dial.items()):
            if peer in self._open or peer in self._dialing or now < when:
                continue
            if self.listen <= peer and now - self._unlinked_since.setdefault(peer, now) < SMALLER_DIALS_AFTER:
                continue
            self._next_dial[peer] = now + self._retry
            self._dial(peer)

    def _dial(self, peer: str) -> None:
        host, port = peer.rsplit(":", 1)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            err = sock.connect_ex((host, int(port)))
        except OSError as e:  # a name that does not resolve (a removed container): dial again later
            sock.close()
            if self._dial_warned.get(peer) != str(e):
                self._dial_warned[peer] = str(e)
                log.warning("event=raft_dial_failed peer=%s error=%r action=retry", peer, str(e))
            return
        self._dial_warned.pop(peer, None)
        if err not in (0, errno.EINPROGRESS):
            sock.close()
            return
        conn = _Conn(sock, peer, dialer=True, state="connecting")
        self._conns[conn.fd] = conn
        self._dialing[peer] = conn
        conn.writing = True
        self.epoll.register(conn.fd, select.EPOLLIN | select.EPOLLOUT)

    def _accept(self) -> None:
        while True:
            try:
                sock, source = self._server.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                log.warning("event=raft_accept_failed error=%r", str(e))
                return
            # A handshake flood: one address gets a few pending handshakes at most. Past MAX_PENDING
            # from strangers the oldest stranger's makes room, and a pending handshake from a peer's
            # address is never evicted: a flood from any number of other addresses (which cannot
            # send from a peer's: TCP's handshake proves the source) cannot keep a peer from
            # completing its own. Peers' addresses hold MAX_PENDING_PER_HOST each at most.
            pending = [c for c in self._conns.values() if not c.dialer and c.state != "open"]
            host = str(source[0])
            if sum(1 for c in pending if c.source == host) >= MAX_PENDING_PER_HOST:
                sock.close()
                self._flood_warning(len(pending), host)
                continue
            strangers = [c for c in pending if c.source not in self._peer_hosts]
            if host not in self._peer_hosts and len(strangers) >= MAX_PENDING:
                self._close(min(strangers, key=lambda c: c.born), "evicted by a newer unauthenticated connection")
                self._flood_warning(len(pending), host)
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(sock, "", dialer=False, state="accept")
            conn.source = host
            self._conns[conn.fd] = conn
            self.epoll.register(conn.fd, select.EPOLLIN)
            if self._tls is not None:
                self._start_tls(conn)

    def _flood_warning(self, pending: int, host: str) -> None:
        now = time.monotonic()
        if now - self._flood_logged > 10:  # once in a while, not once a connection
            self._flood_logged = now
            log.warning("event=raft_handshake_flood pending=%d from=%s action=refuse_or_evict", pending, host)

    def _close(self, conn: _Conn, why: str) -> None:
        if self._conns.pop(conn.fd, None) is None:
            return
        try:
            self.epoll.unregister(conn.fd)
        except (OSError, ValueError):
            pass
        conn.sock.close()
        if self._dialing.get(conn.peer) is conn:
            del self._dialing[conn.peer]
        if self._open.get(conn.peer) is conn:
            del self._open[conn.peer]
            self._unlinked_since[conn.peer] = time.monotonic()
            self._outbox.pop(conn.peer, None)
            log.info("event=raft_peer_disconnected peer=%s reason=%s", conn.peer, why)
            for gid, (endpoint, peers) in list(self._groups.items()):
                if conn.peer in peers:
                    endpoint.on_disconnected(conn.peer)
                    self._lost.add(gid)
        elif conn.state != "accept":
            log.debug("event=raft_connection_closed peer=%s state=%s reason=%s", conn.peer, conn.state, why)

    def _opened(self, conn: _Conn) -> None:
        conn.state = "open"
        conn.key = _mac(self._key, b"S", *((conn.nonce, conn.peer_nonce) if conn.dialer
                                           else (conn.peer_nonce, conn.nonce)))
        self._dialing.pop(conn.peer, None)
        if conn.source:
            self._peer_hosts.add(conn.source)  # a peer's address, proven by the handshake
        old = self._open.get(conn.peer)
        if old is not None and self._by_larger(old) and not self._by_larger(conn):
            # Both ends dialed at once (the smaller dials too after SMALLER_DIALS_AFTER): both
            # keep the connection the larger address dialed, whichever opened first at each end.
            self._close(conn, "the larger address's connection is kept")
            return
        if old is not None:
            self._close(old, "replaced by a new connection")  # the peer restarted
        self._open[conn.peer] = conn
        self._next_dial.setdefault(conn.peer, 0.0)
        log.info("event=raft_peer_connected peer=%s", conn.peer)
        for endpoint, peers in list(self._groups.values()):
            if conn.peer in peers:
                endpoint.on_connected(conn.peer)

    def _by_larger(self, conn: _Conn) -> bool:
        """Whether the larger address of the pair dialed ``conn``."""
        return conn.dialer == (self.listen > conn.peer)

    # ---------------------------------------------------------------- receiving

    def take_lost(self) -> set[str]:
        """The groups that lost a peer's connection since the last call (their leader may be
        gone: the ticker steps them at once rather than at the next round)."""
        lost, self._lost = self._lost, set()
        return lost

    def process(self) -> set[str]:
        """Handle what the sockets have now; returns the groups that got messages."""
        touched: set[str] = set()
        self._last_read = time.monotonic()
        for fd, ev in self.epoll.poll(0):
            if fd == self._server.fileno():
                self._accept()
                continue
            conn = self._conns.get(fd)
            if conn is None:
                continue
            if ev & select.EPOLLOUT:
                if conn.state == "connecting":
                    if conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        self._close(conn, "connect failed")
                        continue
                    conn.state = "hello"
                    if self._tls is None:
                        self._write_frame(conn, MAGIC + conn.nonce + self.listen.encode(), raw=True)
                    else:  # the hello follows once TLS is up (_tls_handshake)
                        self._start_tls(conn)
                else:
                    self._try_write(conn)
            if ev & (select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR) and fd in self._conns:
                self._read(conn, touched)
        return touched

    def _start_tls(self, conn: _Conn) -> None:
        assert self._tls is not None
        if conn.dialer:
            host = conn.peer.rsplit(":", 1)[0].strip("[]")
            conn.tls = self._tls.client.wrap_bio(conn.tls_in, conn.tls_out, server_side=False, server_hostname=host)
        else:
            conn.tls = self._tls.server.wrap_bio(conn.tls_in, conn.tls_out, server_side=True)
        conn.tls_pending = True
        self._tls_handshake(conn)

    def _tls_handshake(self, conn: _Conn) -> bool:
        """Take the TLS handshake a step on; False if that closed the connection. Once it is done
        the dialer sends its hello, and the hub's own handshake runs inside TLS."""
        assert conn.tls is not None
        try:
            conn.tls.do_handshake()
        except ssl.SSLWantReadError:
            conn.wbuf += conn.tls_out.read()
            self._try_write(conn)
            return conn.fd in self._conns
        except (ssl.SSLError, ValueError) as e:  # a certificate refused, not TLS at all, ...
            log.warning("event=raft_tls_refused peer=%s error=%r", conn.peer or conn.source, str(e))
            self._close(conn, "TLS handshake failed")
            return False
        conn.tls_pending = False
        conn.wbuf += conn.tls_out.read()
        if conn.dialer:
            self._write_frame(conn, MAGIC + conn.nonce + self.listen.encode(), raw=True)
        else:
            self._try_write(conn)
        return conn.fd in self._conns

    def _read_tls(self, conn: _Conn, touched: set[str]) -> None:
        """``_read`` for a TLS connection: what TLS yields goes to ``rbuf`` (a connection not yet
        authenticated is closed once more than HANDSHAKE_MAX bytes of it wait there)."""
        assert conn.tls is not None
        while True:
            n = self._recv(conn, _RECV)
            if n is None:
                return
            conn.tls_in.write(self._recv_view[:n])
            if conn.tls_pending and not self._tls_handshake(conn):
                return
            if not conn.tls_pending:
                try:
                    while chunk := conn.tls.read(_RECV):
                        conn.rbuf += chunk
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLError as e:  # SSLZeroReturnError included: the peer closed TLS
                    self._close(conn, f"TLS: {e}")
                    return
                out = conn.tls_out.read()  # e.g. a TLS 1.3 key update's answer
                if out:
                    conn.wbuf += out
                    self._try_write(conn)
                    if conn.fd not in self._conns:
                        return
                if not self._parse(conn, touched):
                    return
                if conn.state != "open" and len(conn.rbuf) > HANDSHAKE_MAX:
                    self._close(conn, "handshake over the limit")
                    return
            if n < _RECV:
                return

    def _read(self, conn: _Conn, touched: set[str]) -> None:
        if conn.tls is not None:
            self._read_tls(conn, touched)
            return
        while True:
            # Before authentication no more is read than completes a frame within HANDSHAKE_MAX
            # bytes buffered, and that frame is handled before reading on: a stranger's bytes
            # close the connection as soon as they cannot be a handshake.
            want = _RECV if conn.state == "open" else HANDSHAKE_MAX - len(conn.rbuf)
            if want <= 0:
                self._close(conn, "handshake over the limit")
                return
            n = self._recv(conn, want)
            if n is None:
                return
            conn.rbuf += self._recv_view[:n]
            if not self._parse(conn, touched) or n < want:
                return

    def _recv(self, conn: _Conn, want: int) -> int | None:
        """Up to ``want`` bytes from the socket into the shared receive buffer (recv(n) would
        allocate n bytes every call); None when nothing more is to be read now (or it closed)."""
        try:
            n = conn.sock.recv_into(self._recv_buf, want)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            self._close(conn, "read failed")
            return None
        if not n:
            self._close(conn, "closed by peer")
            return None
        conn.last_recv = time.monotonic()
        return n

    def _parse(self, conn: _Conn, touched: set[str]) -> bool:
        """Handle the complete frames in ``conn.rbuf``; False if that closed the connection."""
        buf = conn.rbuf
        pos = 0
        while len(buf) - pos >= 4:
            (size,) = _LEN.unpack_from(buf, pos)
            limit = FRAME_MAX if conn.state == "open" else HANDSHAKE_MAX - _LEN.size
            if size > limit:
                self._close(conn, f"frame of {size} bytes over the limit")
                return False
            if len(buf) - pos - 4 < size:
                break
            frame = bytes(buf[pos + 4:pos + 4 + size])
            pos += 4 + size
            if not self._frame(conn, frame, touched):
                return False
        del buf[:pos]
        return True

    def _frame(self, conn: _Conn, frame: bytes, touched: set[str]) -> bool:
        if conn.state == "open":
            mac, payload = frame[:MAC_BYTES], frame[MAC_BYTES:]
            if not hmac.compare_digest(mac, _mac(conn.key, conn.in_tag, _SEQ.pack(conn.recv_seq), payload)):
                self._close(conn, "bad frame MAC")
                return False
            conn.recv_seq += 1
            if conn.peer in self.cut:
                return True  # an injected partition: lost on the way
            self.heard[conn.peer] = time.monotonic()
            try:
                batch = _decode(payload)  # authenticated above
            except Exception as e:  # noqa: BLE001 - a peer of another version, or a bug: drop the link
                self._close(conn, f"undecodable frame: {type(e).__name__}: {e}")
                return False
            for gid, message in batch:
                group = self._groups.get(gid)
                if group is None:
                    continue  # not open here (yet): Raft resends
                try:
                    group[0].on_message(conn.peer, message)
                except Exception:  # noqa: BLE001 - one group's failure must not stop the others
                    log.exception("event=raft_message_failed partition=%s", gid)
                touched.add(gid)
            return True
        return self._handshake(conn, frame)

    def _handshake(self, conn: _Conn, frame: bytes) -> bool:
        n = NONCE_BYTES
        if conn.state == "accept" and frame.startswith(MAGIC) and len(frame) > len(MAGIC) + n:
            conn.peer_nonce = frame[len(MAGIC):len(MAGIC) + n]  # the dialer's hello: its nonce and name
            conn.peer = frame[len(MAGIC) + n:].decode(errors="replace")
            conn.state = "challenged"
            self._write_frame(conn, MAGIC + conn.nonce, raw=True)  # a challenge, no proof of ours yet
            return conn.fd in self._conns
        if conn.state == "hello" and frame.startswith(MAGIC) and len(frame) == len(MAGIC) + n:
            conn.peer_nonce = frame[len(MAGIC):]
            conn.state = "proved"
            self._write_frame(conn, self._proof(b"D", conn), raw=True)
            return conn.fd in self._conns
        if conn.state == "challenged" and len(frame) == MAC_BYTES and hmac.compare_digest(frame, self._proof(b"D", conn)):
            self._write_frame(conn, self._proof(b"A", conn), raw=True)
            if conn.fd in self._conns:
                self._opened(conn)
            return conn.fd in self._conns
        if conn.state == "proved" and len(frame) == MAC_BYTES and hmac.compare_digest(frame, self._proof(b"A", conn)):
            self._opened(conn)
            return True
        if conn.state in ("accept", "hello") and frame[:4] == MAGIC[:4] and not frame.startswith(MAGIC):
            # Another version of this handshake: a node of another release, not a wrong secret.
            log.warning("event=raft_handshake_refused peer=%s state=%s reason=handshake_version theirs=%r ours=%r",
                        conn.peer or "?", conn.state, frame[:len(MAGIC)].decode(errors="replace"), MAGIC.decode())
        else:
            log.warning("event=raft_handshake_refused peer=%s state=%s", conn.peer or "?", conn.state)
        self._close(conn, "handshake refused")
        return False

    def _proof(self, side: bytes, conn: _Conn) -> bytes:
        """``side``'s proof (b"D" the dialer's, b"A" the acceptor's) over both nonces and both
        names, the same bytes computed at either end."""
        dialer_nonce, acceptor_nonce = (conn.nonce, conn.peer_nonce) if conn.dialer else (conn.peer_nonce, conn.nonce)
        dialer, acceptor = (self.listen, conn.peer) if conn.dialer else (conn.peer, self.listen)
        return _mac(self._key, side, dialer_nonce, acceptor_nonce, dialer.encode(), acceptor.encode())

    def close(self) -> None:
        for conn in list(self._conns.values()):
            self._close(conn, "shutting down")
        try:
            self.epoll.unregister(self._server.fileno())
        except (OSError, ValueError):
            pass
        self._server.close()
        self.epoll.close()
