"""The hub under stress: a large backlog leaves in frames under the split size (one frame used
to exceed the receiver's limit and the link looped on reconnects), a peer that stops reading
gets nothing more past the per-peer buffer cap, and a silent peer is closed (keepalives keep a
quiet but healthy link open)."""

from __future__ import annotations

import time

import pytest

from replication import hub as hub_mod
from replication.hub import RaftHub
from tests.replication.test_hub import Recorder, addr, pump


def _pair() -> tuple[RaftHub, RaftHub, Recorder, Recorder]:
    a, b = RaftHub(addr(), "s3cret", retry=0.05), RaftHub(addr(), "s3cret", retry=0.05)
    ra, rb = Recorder(), Recorder()
    a.attach("g1", ra, [b.listen])
    b.attach("g1", rb, [a.listen])
    pump([a, b], lambda: a.connected() == {b.listen} and b.connected() == {a.listen})
    return a, b, ra, rb


def test_a_large_backlog_is_split_into_frames_and_arrives_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub_mod, "FRAME_SPLIT", 1 << 20)
    monkeypatch.setattr(hub_mod, "FRAME_MAX", 4 << 20)  # the receiver's limit: 4 MiB
    a, b, _, rb = _pair()
    try:
        messages = [("m", i, b"x" * 300_000) for i in range(40)]  # 12 MB in one pass
        for m in messages:
            assert a.send(b.listen, "g1", m)
        frames = hub_mod._frames([("g1", m) for m in messages])
        assert len(frames) > 10 and max(len(f) for f in frames) <= 1 << 20
        pump([a, b], lambda: sum(1 for e in rb.events if e[0] == "msg") == 40, timeout=20)
        assert [e[2][1] for e in rb.events if e[0] == "msg"] == list(range(40))
        assert b.connected() == {a.listen}  # never closed for a frame over the limit
    finally:
        a.close()
        b.close()


def test_a_peer_that_stops_reading_gets_nothing_past_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub_mod, "PEER_BUFFER_MAX", 1 << 20)
    a, b, _, _ = _pair()
    try:
        refused = 0
        for i in range(400):  # b is never pumped again: its socket buffers fill, then a's queue
            if not a.send(b.listen, "g1", ("m", i, b"y" * 100_000)):
                refused += 1
            a.flush()
        assert refused > 0
        conn = a._open[b.listen]
        assert len(conn.wbuf) <= (1 << 20) + 200_000  # the cap (plus the frame that crossed it)
    finally:
        a.close()
        b.close()


def test_a_silent_peer_is_closed_and_a_quiet_one_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub_mod, "SILENT_PEER_TIMEOUT", 0.6)
    monkeypatch.setattr(hub_mod, "KEEPALIVE_EVERY", 0.1)
    a, b, _, _ = _pair()
    try:
        deadline = time.monotonic() + 1.5  # both pumped, nothing to say: keepalives hold the link
        while time.monotonic() < deadline:
            for h in (a, b):
                h.maintain(time.monotonic())
                h.process()
                h.flush()
            time.sleep(0.02)
        assert a.connected() == {b.listen} and b.connected() == {a.listen}
        deadline = time.monotonic() + 1.5  # b hangs (never runs again): a closes the link
        while time.monotonic() < deadline and a.connected():
            a.maintain(time.monotonic())
            a.process()
            a.flush()
            time.sleep(0.02)
        assert a.connected() == set()
    finally:
        a.close()
        b.close()


def test_a_dial_that_gets_no_answer_is_given_up_and_made_again() -> None:
    # the larger address dials; a dial left unanswered (its SYNs dropped by a partition) would
    # otherwise wait out TCP's SYN retransmissions (1 s, 3 s, 7 s) after the partition healed
    a, b = sorted((RaftHub(addr(), "s3cret", retry=0.05), RaftHub(addr(), "s3cret", retry=0.05)),
                  key=lambda h: h.listen, reverse=True)
    try:
        a.attach("g1", Recorder(), [b.listen])
        t0 = time.monotonic()
        a.maintain(t0)  # dials; never processed, so the connection stays "connecting"
        first = a._dialing[b.listen]
        a.maintain(t0 + hub_mod.CONNECT_TIMEOUT / 2)
        assert a._dialing.get(b.listen) is first
        a.maintain(t0 + hub_mod.CONNECT_TIMEOUT + 0.01)  # given up and dialled again
        assert first not in a._conns.values()
        assert a._dialing.get(b.listen) not in (None, first)
        pump([a, b], lambda: a.connected() == {b.listen} and b.connected() == {a.listen})
    finally:
        a.close()
        b.close()


def test_an_injected_cut_keeps_the_silent_link(monkeypatch: pytest.MonkeyPatch) -> None:
    # fault injection drops messages on a link kept up; closing it would let a new one through
    monkeypatch.setattr(hub_mod, "SILENT_PEER_TIMEOUT", 0.3)
    a, b, _, _ = _pair()
    try:
        def rounds(seconds: float) -> None:  # a's passes (b says nothing): read, then maintain
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and a.connected():
                a.process()
                a.maintain(time.monotonic())
                time.sleep(0.02)

        a.cut = frozenset({b.listen})
        rounds(0.6)
        assert a.connected() == {b.listen}
        a.cut = frozenset()
        rounds(0.6)
        assert a.connected() == set()
    finally:
        a.close()
        b.close()


def test_a_hub_that_stalled_reads_before_it_calls_a_peer_silent(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node whose loop stopped for longer than the silence limit (a long pass, a stop, CPU
    starvation) finds its peer's keepalives waiting unread: its first round after the stall must
    not close the link for a silence of its own making (every node of a cluster compacting a
    large partition did that, and their leaders stepped down)."""
    monkeypatch.setattr(hub_mod, "SILENT_PEER_TIMEOUT", 0.6)
    monkeypatch.setattr(hub_mod, "KEEPALIVE_EVERY", 0.2)
    a, b, ra, _ = _pair()
    try:
        deadline = time.monotonic() + hub_mod.SILENT_PEER_TIMEOUT + 0.3
        while time.monotonic() < deadline:  # a stalls; b keeps its rounds (keepalives to a)
            b.maintain(time.monotonic())
            b.process()
            b.flush()
            time.sleep(0.05)
        a.maintain(time.monotonic())  # a's first round after the stall, before it reads (as the host does)
        assert a.connected() == {b.listen} and ("down", b.listen, None) not in ra.events
        a.process()
        a.maintain(time.monotonic())
        assert a.connected() == {b.listen} and ("down", b.listen, None) not in ra.events
    finally:
        a.close()
        b.close()


def test_a_hub_that_keeps_reading_still_closes_a_silent_peer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub_mod, "SILENT_PEER_TIMEOUT", 0.6)
    a, b, ra, _ = _pair()
    try:
        deadline = time.monotonic() + hub_mod.SILENT_PEER_TIMEOUT + 1.0
        while time.monotonic() < deadline and ("down", b.listen, None) not in ra.events:
            a.maintain(time.monotonic())  # b says nothing (hung): a's rounds go on
            a.process()
            a.flush()
            time.sleep(0.05)
        assert ("down", b.listen, None) in ra.events
    finally:
        a.close()
        b.close()
