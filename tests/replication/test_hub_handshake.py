"""The Raft port's handshake (issue 17): the dialer proves the secret first, so a stranger who
connects gets a bare challenge and nothing to test guesses against; unauthenticated connections
are bounded in number (a slow-handshake flood), in bytes and in time, and the nodes keep talking
through it. Pickles and forged frames: tests/replication/test_hub.py."""

from __future__ import annotations

import os
import socket
import struct
import time
from typing import Any

from replication.hub import HANDSHAKE_MAX, MAGIC, MAX_PENDING, MAX_PENDING_PER_HOST, NONCE_BYTES, RaftHub
from tests.replication.test_hub import Recorder, addr, pump


def _frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def _read_frame(s: socket.socket, hub: RaftHub, timeout: float = 3) -> bytes | None:
    """One frame the hub writes (None: it closed the connection first)."""
    s.settimeout(0.01)
    buf = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        hub.process()
        hub.flush()
        try:
            got = s.recv(4096)
            if not got:
                return None
            buf += got
        except (TimeoutError, BlockingIOError):
            pass
        except ConnectionResetError:  # closed with our bytes unread
            return None
        if len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">I", buf)[0]:
            return buf[4:4 + struct.unpack_from(">I", buf)[0]]
    raise AssertionError("no frame and no close")


def test_a_stranger_gets_a_bare_challenge_and_a_wrong_proof_closes() -> None:
    hub = RaftHub(addr(), "s3cret", retry=0.05)
    host, port = hub.listen.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2) as s:
            s.sendall(_frame(MAGIC + os.urandom(NONCE_BYTES) + b"127.0.0.1:1"))
            challenge = _read_frame(s, hub)
            assert challenge is not None and challenge.startswith(MAGIC)
            assert len(challenge) == len(MAGIC) + NONCE_BYTES  # a nonce only: no proof to guess against
            s.sendall(_frame(os.urandom(32)))  # a guess
            assert _read_frame(s, hub) is None  # closed, nothing more said
        assert not hub.connected()
    finally:
        hub.close()


def _silent(host: str, port: int, source: str) -> socket.socket:
    """A connection that sends half a hello and then nothing (a slow-handshake flood)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.setblocking(False)
    s.connect_ex((host, port))
    return s


def test_a_slow_handshake_flood_is_bounded_and_the_nodes_keep_talking() -> None:
    """Silent connections from many addresses, renewed all the time (as an attacker would, to
    outlast the handshake timeout): at most a few per address and MAX_PENDING in all are held,
    the oldest making room, and a peer still gets through at once."""
    a, b = RaftHub(addr(), "s3cret", retry=0.05), RaftHub(addr(), "s3cret", retry=0.05)
    host, port = a.listen.rsplit(":", 1)
    flood: list[socket.socket] = []
    sources = [f"127.0.0.{i}" for i in range(2, 22)]  # b dials from 127.0.0.1
    try:
        ra, rb = Recorder(), Recorder()
        a.attach("g", ra, [b.listen])
        b.attach("g", rb, [a.listen])
        for i in range(MAX_PENDING * 3):
            flood.append(_silent(host, int(port), sources[i % len(sources)]))
            a.process()
        pending = [c for c in a._conns.values() if not c.dialer and c.state != "open"]
        assert len(pending) <= MAX_PENDING
        assert max(sum(1 for c in pending if c.source == src) for src in sources) <= MAX_PENDING_PER_HOST
        deadline = time.monotonic() + 10
        n = 0
        while not (a.connected() == {b.listen} and b.connected() == {a.listen}):
            assert time.monotonic() < deadline, "the flood kept the peers apart"
            flood.append(_silent(host, int(port), sources[n % len(sources)]))  # the flood goes on
            n += 1
            for h in (a, b):
                h.maintain(time.monotonic())
                h.process()
                h.flush()
            time.sleep(0.002)
        assert b.send(a.listen, "g", "through")
        pump([a, b], lambda: ("msg", b.listen, "through") in ra.events)
        assert len([c for c in a._conns.values() if not c.dialer and c.state != "open"]) <= MAX_PENDING
    finally:
        for s in flood:
            s.close()
        a.close()
        b.close()


class _ProbedHub(RaftHub):
    """Records how many bytes a connection held in its read buffer when it was closed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.held_at_close: list[int] = []

    def _close(self, conn: Any, why: str) -> None:
        if conn.fd in self._conns:
            self.held_at_close.append(len(conn.rbuf))
        super()._close(conn, why)


def test_a_stranger_sending_past_the_handshake_limit_is_closed_holding_no_more_than_it() -> None:
    hub = _ProbedHub(addr(), "s3cret", retry=0.05)
    host, port = hub.listen.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2) as s:
            # a hello as long as the limit allows, then far more than the limit in one go
            s.sendall(struct.pack(">I", HANDSHAKE_MAX - 4) + MAGIC + os.urandom(20_000))
            challenge = _read_frame(s, hub)  # (a hello may earn a challenge first)
            assert challenge is None or _read_frame(s, hub) is None  # closed
        assert hub.held_at_close and max(hub.held_at_close) <= HANDSHAKE_MAX, hub.held_at_close
        assert not hub._conns
    finally:
        hub.close()


def test_a_flood_from_many_addresses_does_not_evict_a_peers_pending_handshake() -> None:
    """The peer's connection is accepted first and its handshake left pending (its hub does not
    run meanwhile); then strangers from 24 addresses open three times MAX_PENDING connections.
    The strangers evict each other, never the peer's, whose handshake then completes on the
    connection it made."""
    a, b = sorted((RaftHub(addr(), "s3cret", retry=0.05), RaftHub(addr(), "s3cret", retry=0.05)),
                  key=lambda h: h.listen)  # b, the larger address, dials a
    host, port = a.listen.rsplit(":", 1)
    flood: list[socket.socket] = []
    sources = [f"127.0.0.{i}" for i in range(2, 26)]
    try:
        a.attach("g", Recorder(), [b.listen])
        b.attach("g", Recorder(), [a.listen])
        b.maintain(time.monotonic())
        dialed = b._dialing[a.listen]
        deadline = time.monotonic() + 3
        while not [c for c in a._conns.values() if not c.dialer]:
            assert time.monotonic() < deadline, "the peer's connection was not accepted"
            a.process()
        (peers,) = [c for c in a._conns.values() if not c.dialer]
        for i in range(MAX_PENDING * 3):
            flood.append(_silent(host, int(port), sources[i % len(sources)]))
            a.process()
        pending = [c for c in a._conns.values() if not c.dialer and c.state != "open"]
        assert peers in pending, "the peer's pending handshake was evicted"
        assert len(pending) <= MAX_PENDING + 1
        pump([a, b], lambda: a.connected() == {b.listen} and b.connected() == {a.listen})
        assert b._open[a.listen] is dialed and a._open[b.listen] is peers  # no redial was needed
    finally:
        for s in flood:
            s.close()
        a.close()
        b.close()
