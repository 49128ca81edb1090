"""The Raft hub: one authenticated connection per pair of nodes, carrying every group's messages.

Two or three hubs in this process on 127.0.0.1, driven by hand (``maintain``/``process``/``flush``
are what the Raft ticker calls every pass).
"""

from __future__ import annotations

import os
import pickle
import socket
import struct
import time
from pathlib import Path
from typing import Any

from replication.hub import MAGIC, NONCE_BYTES, RaftHub
from tests.cluster.harness import free_port
from tests.replication.test_raft import _Evil


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []

    def on_connected(self, peer: str) -> None:
        self.events.append(("up", peer, None))

    def on_disconnected(self, peer: str) -> None:
        self.events.append(("down", peer, None))

    def on_message(self, peer: str, message: Any) -> None:
        self.events.append(("msg", peer, message))


def pump(hubs: list[RaftHub], until: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for h in hubs:
            h.maintain(time.monotonic())
            h.process()
            h.flush()
        if until():
            return
        time.sleep(0.005)
    raise AssertionError("condition not reached")


def addr() -> str:
    return f"127.0.0.1:{free_port()}"


def test_groups_share_one_connection_and_messages_keep_their_order() -> None:
    a, b = RaftHub(addr(), "s3cret", retry=0.05), RaftHub(addr(), "s3cret", retry=0.05)
    try:
        ra, rb1, rb2 = Recorder(), Recorder(), Recorder()
        a.attach("g1", ra, [b.listen])
        b.attach("g1", rb1, [a.listen])
        b.attach("g2", rb2, [a.listen])
        pump([a, b], lambda: a.connected() == {b.listen} and b.connected() == {a.listen})
        assert ("up", a.listen, None) in rb1.events and ("up", a.listen, None) in rb2.events
        for i in range(100):
            assert a.send(b.listen, "g1" if i % 2 else "g2", {"n": i})
        assert a.send(b.listen, "unknown-group", {"n": -1})  # dropped at b: not attached there
        pump([a, b], lambda: len(rb1.events) + len(rb2.events) >= 102)
        assert [m["n"] for k, _, m in rb1.events if k == "msg"] == list(range(1, 100, 2))
        assert [m["n"] for k, _, m in rb2.events if k == "msg"] == list(range(0, 100, 2))
        assert b.send(a.listen, "g1", "back")
        pump([a, b], lambda: ("msg", b.listen, "back") in ra.events)
        assert len(a._conns) == 1 and len(b._conns) == 1  # one connection for the pair, both ways
    finally:
        a.close()
        b.close()


def test_a_closed_peer_is_reported_down_and_a_restarted_one_reconnects() -> None:
    a_addr, b_addr = addr(), addr()
    a, b = RaftHub(a_addr, "k", retry=0.05), RaftHub(b_addr, "k", retry=0.05)
    ra = Recorder()
    a.attach("g", ra, [b_addr])
    b.attach("g", Recorder(), [a_addr])
    try:
        pump([a, b], lambda: a.connected() == {b_addr})
        b.close()
        pump([a], lambda: ("down", b_addr, None) in ra.events)
        assert not a.send(b_addr, "g", "lost")  # not connected: refused, not queued
        b = RaftHub(b_addr, "k", retry=0.05)
        b.attach("g", Recorder(), [a_addr])
        pump([a, b], lambda: ra.events.count(("up", b_addr, None)) == 2)
    finally:
        a.close()
        b.close()


def test_a_hub_with_another_secret_never_connects() -> None:
    a, b = RaftHub(addr(), "one", retry=0.05), RaftHub(addr(), "two", retry=0.05)
    try:
        a.attach("g", Recorder(), [b.listen])
        b.attach("g", Recorder(), [a.listen])
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            for h in (a, b):
                h.maintain(time.monotonic())
                h.process()
            time.sleep(0.01)
        assert not a.connected() and not b.connected()
    finally:
        a.close()
        b.close()


def _frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


def test_nothing_is_unpickled_before_authentication_and_a_forged_frame_closes(tmp_path: Path) -> None:
    hub = RaftHub(addr(), "s3cret", retry=0.05)
    rec = Recorder()
    hub.attach("g", rec, [])
    marker = tmp_path / "pwned"
    evil = pickle.dumps([("g", _Evil(str(marker)))])
    host, port = hub.listen.rsplit(":", 1)
    try:
        # 1. a pickle instead of a handshake; 2. a hello, then a forged proof and a pickle frame
        #    with a made-up MAC; 3. an oversized pre-authentication length prefix
        attempts = [
            _frame(evil),
            _frame(MAGIC + os.urandom(NONCE_BYTES) + b"127.0.0.1:1") + _frame(os.urandom(32))
            + _frame(os.urandom(32) + evil),
            struct.pack(">I", 1 << 30) + b"x" * 64,
        ]
        for data in attempts:
            with socket.create_connection((host, int(port)), timeout=2) as s:
                s.sendall(data)
                closed = False
                deadline = time.monotonic() + 3
                while time.monotonic() < deadline and not closed:
                    hub.process()
                    hub.flush()
                    s.settimeout(0.01)
                    try:
                        while True:
                            got = s.recv(4096)
                            if not got:
                                closed = True
                                break
                    except (TimeoutError, BlockingIOError):
                        pass
                    except ConnectionResetError:
                        closed = True
                assert closed, f"the hub kept a connection that sent {data[:16]!r}..."
        assert not marker.exists(), "the hub unpickled an unauthenticated payload"
        assert not any(k == "msg" for k, _, _ in rec.events)
        assert not hub.connected()
    finally:
        hub.close()


def test_frames_carry_data_only_even_between_peers_that_know_the_secret(tmp_path: Path) -> None:
    """Payloads are msgpack: a pickle sent over an authenticated link (by a peer that learnt the
    secret) is not unpickled; the link is dropped as undecodable and then comes back."""
    a, b = RaftHub(addr(), "s3cret", retry=0.05), RaftHub(addr(), "s3cret", retry=0.05)
    marker = tmp_path / "pwned"
    try:
        ra, rb = Recorder(), Recorder()
        a.attach("g", ra, [b.listen])
        b.attach("g", rb, [a.listen])
        pump([a, b], lambda: a.connected() == {b.listen} and b.connected() == {a.listen})
        assert b.send(a.listen, "g", {"type": "append_entries", "entries": [(b"cmd", 7, 2)], "lts": 1.5})
        pump([a, b], lambda: any(k == "msg" for k, _, _ in ra.events))
        (message,) = [m for k, _, m in ra.events if k == "msg"]
        assert message == {"type": "append_entries", "entries": ((b"cmd", 7, 2),), "lts": 1.5}
        (conn,) = b._conns.values()
        b._write_frame(conn, pickle.dumps([("g", _Evil(str(marker)))]))  # MAC'd like any frame of b's
        pump([a, b], lambda: ("down", b.listen, None) in ra.events)
        assert not marker.exists(), "a peer's frame was unpickled"
        pump([a, b], lambda: ra.events.count(("up", b.listen, None)) == 2)  # redialled
    finally:
        a.close()
        b.close()


def test_mute_loses_one_direction_and_heard_tracks_what_got_through() -> None:
    a, b = RaftHub(addr(), "s3cret", retry=0.05), RaftHub(addr(), "s3cret", retry=0.05)
    try:
        ra, rb = Recorder(), Recorder()
        a.attach("g", ra, [b.listen])
        b.attach("g", rb, [a.listen])
        pump([a, b], lambda: a.connected() == {b.listen} and b.connected() == {a.listen})
        a.send(b.listen, "g", "hello")
        pump([a, b], lambda: ("msg", a.listen, "hello") in rb.events)
        assert b.peers_heard_within(1.0) == 1
        a.mute = frozenset({b.listen})  # a's messages to b are lost; b's to a still arrive
        a.send(b.listen, "g", "lost")
        time.sleep(0.4)
        b.send(a.listen, "g", "arrives")
        pump([a, b], lambda: ("msg", b.listen, "arrives") in ra.events)
        assert ("msg", a.listen, "lost") not in rb.events
        assert a.peers_heard_within(0.3) == 1 and b.peers_heard_within(0.3) == 0
        a.mute = frozenset()
        a.cut = frozenset({b.listen})  # both ways: nothing from b gets through to a either
        b.send(a.listen, "g", "cut")
        for _ in range(2):  # b sends, then a reads
            for h in (b, a):
                h.process()
                h.flush()
            time.sleep(0.15)
        assert ("msg", b.listen, "cut") not in ra.events and a.peers_heard_within(0.2) == 0
    finally:
        a.close()
        b.close()


def test_the_smaller_address_dials_a_peer_that_does_not_know_it_and_both_ends_keep_one_connection() -> None:
    """The larger address of a pair dials; a larger one that does not know the pair (a member
    added while it was cut off) is dialed by the smaller after SMALLER_DIALS_AFTER. Should both
    dial at once, both ends keep the larger's connection."""
    one, two = RaftHub(addr(), "s3cret", retry=0.05), RaftHub(addr(), "s3cret", retry=0.05)
    small, large = sorted([one, two], key=lambda h: h.listen)
    try:
        rs, rl = Recorder(), Recorder()
        small.attach("g", rs, [large.listen])  # the larger knows no group with the smaller
        started = time.monotonic()
        pump([small, large], lambda: small.connected() == {large.listen} and large.connected() == {small.listen},
             timeout=6.0)
        assert time.monotonic() - started >= 2.5  # waited for the larger first
        large.attach("g", rl, [small.listen])
        large._dial(small.listen)  # both ends' dials now: a second connection
        pump([small, large], lambda: not large._dialing, timeout=3.0)
        for _ in range(50):
            pump([small, large], lambda: True)
        assert small.connected() == {large.listen} and large.connected() == {small.listen}
        assert small._open[large.listen].dialer is False and large._open[small.listen].dialer is True
        small.send(large.listen, "g", {"n": 1})
        pump([small, large], lambda: any(e[0] == "msg" for e in rl.events))
    finally:
        small.close()
        large.close()


def test_a_peer_that_hung_up_is_known_before_the_ticker_reads_it() -> None:
    # FindCoordinator asked in the instant a leader died must not name it: the hang-up shows at
    # once, though the ticker (another thread) has not read the end of the stream yet.
    a, b = RaftHub(addr(), "k", retry=0.05), RaftHub(addr(), "k", retry=0.05)
    try:
        ra, rb = Recorder(), Recorder()
        a.attach("g", ra, [b.listen])
        b.attach("g", rb, [a.listen])
        pump([a, b], lambda: a.connected() == {b.listen} and b.connected() == {a.listen})
        assert not a.hung_up(b.listen)
        assert a.hung_up("127.0.0.1:1")  # never linked
        b.close()
        deadline = time.monotonic() + 5
        while not a.hung_up(b.listen):
            assert time.monotonic() < deadline, "the hang-up never showed"
            time.sleep(0.005)
        assert a.connected() == {b.listen}  # a's ticker has not read it: still linked as far as it knows
        assert ("down", b.listen, None) not in ra.events
    finally:
        a.close()
