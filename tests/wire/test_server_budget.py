"""queued.max.request.bytes: while the node holds that many bytes of requests read and not yet
answered, it reads no more from anyone; once answers go out, reading resumes. Driven in-process
with a dispatcher whose "park" requests wait for the test to release them."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable

import pytest

from cluster import server as server_module
from cluster.dispatch import ApiRegistry, CloseConnection, ConnInfo, Dispatcher
from cluster.server import ConnectionLimits, WireServer, _Connection


class ParkingDispatcher(Dispatcher):
    def __init__(self) -> None:
        super().__init__(ApiRegistry(), node=None)
        self.release = asyncio.Event()

    async def handle(self, frame: bytes, conn: ConnInfo) -> bytes | None:
        if frame.startswith(b"park"):
            await self.release.wait()
        return struct.pack(">i", 4) + frame[:4]


class BigAnswers(ParkingDispatcher):
    """Answers with 8 MB, more than the kernel buffers for a client that does not read; a "bye"
    request's answer is the last before the connection is closed."""

    async def handle(self, frame: bytes, conn: ConnInfo) -> bytes | None:
        answer = struct.pack(">i", 8_000_000) + b"z" * 8_000_000
        if frame.startswith(b"bye"):
            raise CloseConnection(answer)
        return answer


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


async def _answer(reader: asyncio.StreamReader, timeout: float) -> bytes:
    head = await asyncio.wait_for(reader.readexactly(4), timeout)
    return await reader.readexactly(struct.unpack(">i", head)[0])


def test_reading_pauses_over_the_node_budget_and_resumes() -> None:
    async def run() -> None:
        dispatcher = ParkingDispatcher()
        limits = ConnectionLimits(max_request_bytes=1 << 20, non_produce_max_bytes=1 << 20,
                                  queued_max_bytes=1 << 20)
        server = WireServer(dispatcher, "127.0.0.1", 0, limits=limits)
        await server.start()
        parked = []
        try:
            for _ in range(20):  # 20 x 60 KB parked: over the 1 MiB budget
                r, w = await asyncio.open_connection("127.0.0.1", server.port)
                w.write(_frame(b"park" + b"x" * 60_000))
                parked.append((r, w))
            for _ in range(100):
                if server.queued_bytes >= 1 << 20:
                    break
                await asyncio.sleep(0.01)
            assert server.queued_bytes >= 1 << 20
            r, w = await asyncio.open_connection("127.0.0.1", server.port)
            w.write(_frame(b"ping"))
            assert await _answer(r, 2) == b"ping"  # what was read before is still answered ...
            w.write(_frame(b"pong"))
            try:
                await _answer(r, 0.5)
                raise AssertionError("read past queued.max.request.bytes")
            except TimeoutError:
                pass  # ... but nothing more is read while the node is over its budget
            dispatcher.release.set()
            for pr, _ in parked:
                assert await _answer(pr, 2) == b"park"
            assert await _answer(r, 2) == b"pong"  # answers freed the budget: reading resumed
            assert server.queued_bytes == 0
            w.close()
        finally:
            for _, pw in parked:
                pw.close()
            await server.stop()

    asyncio.run(run())


async def _settle(check: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


def _non_reader(port: int) -> socket.socket:
    """A client that reads none of its answers (and has the kernel buffer little of them)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return sock


def _server_side(server: WireServer, writer: asyncio.StreamWriter) -> _Connection:
    return next(c for c in server._conns.values() if c.info.port == writer.get_extra_info("sockname")[1])


def test_a_partial_frame_counts_its_declared_size_and_waits_for_room() -> None:
    """A frame's declared size is counted when its header arrives, before its body: clients that
    send the start of large frames and never the rest cannot make the node hold more than its
    budget (each holds at most one read until it has room), and small requests are still read."""

    async def run() -> None:
        dispatcher = ParkingDispatcher()
        budget = 1 << 20
        limits = ConnectionLimits(max_request_bytes=1 << 20, non_produce_max_bytes=1 << 20, queued_max_bytes=budget)
        server = WireServer(dispatcher, "127.0.0.1", 0, limits=limits)
        await server.start()
        attackers = []
        try:
            for _ in range(8):  # each declares 900 KB of Produce and sends 100 KB of it, then 100 KB more
                r, w = await asyncio.open_connection("127.0.0.1", server.port)
                w.write(struct.pack(">ihh", 900_000, 0, 9) + b"x" * 100_000)
                attackers.append((r, w))
            await _settle(lambda: sum(len(c.buf) for c in server._conns.values()) >= 100_004)
            await asyncio.sleep(0.2)
            for _, w in attackers:
                w.write(b"y" * 100_000)
            await asyncio.sleep(0.3)
            reserved = [c for c in server._conns.values() if c.reserved]
            assert len(reserved) == 1 and server.queued_bytes == 900_000  # one frame fits; the rest wait
            waiting = [c for c in server._conns.values() if not c.reserved]
            assert all(c.read_paused for c in waiting)
            assert sum(len(c.buf) for c in waiting) <= 7 * 100_008  # nothing read past the first write
            r, w = await asyncio.open_connection("127.0.0.1", server.port)
            w.write(_frame(b"ping"))  # a small request still has room
            assert await _answer(r, 2) == b"ping"
            assert server.queued_bytes == 900_000
            # the holder goes away: its reservation is freed and a waiting frame takes the room
            holder = next(i for i, (_, aw) in enumerate(attackers)
                          if aw.get_extra_info("sockname")[1] == reserved[0].info.port)
            attackers.pop(holder)[1].close()
            await _settle(lambda: len([c for c in server._conns.values() if c.reserved]) == 1
                          and reserved[0].info.connection_id not in server._conns)
            assert server.queued_bytes == 900_000
            w.close()
        finally:
            for _, aw in attackers:
                aw.close()
            await server.stop()

    asyncio.run(run())


def test_answers_a_client_does_not_read_count_against_the_budget() -> None:
    """An answer the client does not read stays in the node's write buffer: it is counted, so
    it shrinks the room large answers (a Fetch's) may take, and it is freed when the client goes."""

    async def run() -> None:
        limits = ConnectionLimits(max_request_bytes=1 << 20, non_produce_max_bytes=1 << 20,
                                  queued_max_bytes=64 << 20)
        server = WireServer(BigAnswers(), "127.0.0.1", 0, limits=limits)
        await server.start()
        room = server.room()
        sock = _non_reader(server.port)
        try:
            sock.sendall(_frame(b"big1") + _frame(b"big2"))
            # the kernel takes up to tcp_wmem's max (4 MiB by default) of the 8 MB: the rest is held
            await _settle(lambda: server.queued_bytes >= 3_000_000)  # beyond what the kernel buffers
            assert server.room() <= room - 4_000_000
            sock.close()
            await _settle(lambda: server.queued_bytes == 0)
            assert server.room() == room
        finally:
            sock.close()
            await server.stop()

    asyncio.run(run())


def test_before_authentication_a_frame_is_small() -> None:
    """On a SASL listener, a client that has not authenticated sends SASL tokens and ApiVersions,
    never more than sasl.server.max.receive.size: a larger frame closes the connection at its
    header, before any of its body is held."""
    from cluster.security.sasl import SaslAuthenticator, SaslConfig

    async def run() -> None:
        config = SaslConfig(mechanisms=["PLAIN"], plain_users={"u": "p"}, scram=lambda user, mechanism: None)
        server = WireServer(ParkingDispatcher(), "127.0.0.1", 0, limits=ConnectionLimits(),
                            authenticators={"": lambda: SaslAuthenticator(config)})
        await server.start()
        try:
            r, w = await asyncio.open_connection("127.0.0.1", server.port)
            w.write(struct.pack(">ihh", 600_000, 18, 3) + b"x" * 1000)  # within the frame limits, too big now
            assert await asyncio.wait_for(r.read(), 2) == b""  # closed, unanswered
            w.close()
            r, w = await asyncio.open_connection("127.0.0.1", server.port)
            w.write(_frame(b"ping"))  # a small one is read (and here, dispatched)
            assert await _answer(r, 2) == b"ping"
            w.close()
        finally:
            await server.stop()

    asyncio.run(run())


def _unread_answers_are_freed(request: bytes, *, idle_ms: int = 600000, closing: bool = False) -> None:
    """A client sends ``request`` (BigAnswers: an 8 MB answer) and never reads: the answer is held
    in the budget, then the connection goes and frees it (``closing``: it is being closed meanwhile)."""

    async def run() -> None:
        limits = ConnectionLimits(max_request_bytes=1 << 20, non_produce_max_bytes=1 << 20,
                                  queued_max_bytes=64 << 20, idle_ms=idle_ms)
        server = WireServer(BigAnswers(), "127.0.0.1", 0, limits=limits)
        await server.start()
        sock = _non_reader(server.port)
        try:
            sock.sendall(_frame(request))
            # the kernel takes up to tcp_wmem's max (4 MiB by default) of the 8 MB: the rest is held
            await _settle(lambda: server.queued_bytes >= 3_000_000)
            if closing:
                assert all(c.closing for c in server._conns.values())
            await _settle(lambda: not server._conns and server.queued_bytes == 0)
        finally:
            sock.close()
            await server.stop()

    asyncio.run(run())


def test_the_idle_sweep_aborts_a_client_that_does_not_read() -> None:
    """connections.max.idle.ms: a graceful close would wait for a client that does not read its
    answers to read them, leaving the connection half open and its unsent bytes in the budget
    for ever; the sweep aborts such a connection instead."""
    _unread_answers_are_freed(b"big1", idle_ms=300)


def test_a_close_whose_answers_are_not_read_is_aborted_after_a_linger(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any close (here one after a last answer) waits for the answers to be read only so long:
    then the connection is aborted, and what it held of the budget is freed."""
    monkeypatch.setattr(server_module, "CLOSE_LINGER_S", 0.5)
    _unread_answers_are_freed(b"bye!", closing=True)


def test_a_frame_over_the_large_frame_cap_is_read_while_less_than_the_cap_is_held() -> None:
    """queued.max.request.bytes = socket.request.max.bytes: a frame larger than the large-frame cap
    (the budget less the room kept for small frames) can never fit under it. It is let in once less
    than the cap is held, not only once nothing is (which constant small traffic never allows)."""

    async def run() -> None:
        dispatcher = ParkingDispatcher()
        limits = ConnectionLimits(max_request_bytes=1 << 20, non_produce_max_bytes=1 << 20,
                                  queued_max_bytes=1 << 20)  # the cap: 768 KiB
        server = WireServer(dispatcher, "127.0.0.1", 0, limits=limits)
        await server.start()
        r1, w1 = await asyncio.open_connection("127.0.0.1", server.port)
        r2, w2 = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            w1.write(_frame(b"park" + b"x" * 1000))  # small traffic: the node never holds nothing
            await _settle(lambda: server.queued_bytes == 1004)
            w2.write(_frame(b"ping" + b"x" * 900_000))
            assert await _answer(r2, 3) == b"ping"
            assert server.queued_bytes == 1004
            dispatcher.release.set()
            assert await _answer(r1, 2) == b"park"
        finally:
            w1.close()
            w2.close()
            await server.stop()

    asyncio.run(run())


def test_a_waiter_that_goes_away_lets_the_frame_behind_it_in() -> None:
    """A waiting connection that holds nothing frees nothing when it goes (here swept as idle): the
    frame that waited behind it, and fits, is let in then, not at some later, unrelated free."""

    async def run() -> None:
        dispatcher = ParkingDispatcher()
        limits = ConnectionLimits(max_request_bytes=1 << 20, non_produce_max_bytes=1 << 20,
                                  queued_max_bytes=1 << 20, idle_ms=300)  # the large-frame cap: 768 KiB
        server = WireServer(dispatcher, "127.0.0.1", 0, limits=limits)
        await server.start()
        clients = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(3)]
        (ra, wa), (_, wb), (rc, wc) = clients
        try:
            wa.write(_frame(b"park" + b"x" * 600_000))  # parked: holds 600 KB, never idle
            await _settle(lambda: server.queued_bytes == 600_004)
            wb.write(struct.pack(">i", 700_000) + b"x" * 1000)  # does not fit: waits, holding nothing
            await _settle(lambda: len(server._waiting) == 1)
            waiter = _server_side(server, wb)
            assert waiter.held == 0
            # a parked request (never idle), then a frame that fits but waits behind the first
            wc.write(_frame(b"park") + struct.pack(">i", 100_004) + b"ping" + b"x" * 1000)
            await _settle(lambda: len(server._waiting) == 2)
            behind = _server_side(server, wc)
            wc.write(b"x" * 99_000)
            await _settle(lambda: waiter.info.connection_id not in server._conns)  # swept as idle
            await _settle(lambda: behind not in server._waiting)
            assert server.queued_bytes == 600_004 + 4 + 100_004
            dispatcher.release.set()
            assert await _answer(ra, 2) == b"park"
            assert await _answer(rc, 2) == b"park"
            assert await _answer(rc, 2) == b"ping"
        finally:
            for _, w in clients:
                w.close()
            await server.stop()

    asyncio.run(run())
