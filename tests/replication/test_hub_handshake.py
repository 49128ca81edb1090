"""The Raft port's handshake (issue 17): the dialer proves the secret first, so a stranger who
connects gets a bare challenge and nothing to test guesses against; unauthenticated connections
are bounded in number (a slow-handshake flood), in bytes and in time, and the nodes keep talking
through it. Pickles and forged frames: tests/replication/test_hub.py."""

from __future__ import annotations

import os
import socket
import struct
import time

import pytest

from replication import hub as hub_mod
from replication.hub import MAGIC, MAX_PENDING, NONCE_BYTES, RaftHub
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


def test_a_slow_handshake_flood_is_bounded_and_the_nodes_keep_talking(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = RaftHub(addr(), "s3cret", retry=0.05), RaftHub(addr(), "s3cret", retry=0.05)
    host, port = a.listen.rsplit(":", 1)
    flood: list[socket.socket] = []
    try:
        ra, rb = Recorder(), Recorder()
        a.attach("g", ra, [b.listen])
        b.attach("g", rb, [a.listen])
        for _ in range(MAX_PENDING * 3):  # connect and say nothing (or half a hello)
            s = socket.create_connection((host, int(port)), timeout=2)
            s.sendall(struct.pack(">I", 40) + MAGIC)
            flood.append(s)
            a.process()  # accepts (past the bound: closes at once)
        pending = [c for c in a._conns.values() if not c.dialer and c.state != "open"]
        assert len(pending) <= MAX_PENDING
        # b dials a (the larger address dials): the flood's connections time out and b gets in
        monkeypatch.setattr(hub_mod, "HANDSHAKE_TIMEOUT", 0.5)
        pump([a, b], lambda: a.connected() == {b.listen} and b.connected() == {a.listen}, timeout=10)
        assert b.send(a.listen, "g", "through")
        pump([a, b], lambda: ("msg", b.listen, "through") in ra.events)
        assert not [c for c in a._conns.values() if not c.dialer and c.state != "open" and c.born < time.monotonic() - 1]
    finally:
        for s in flood:
            s.close()
        a.close()
        b.close()
