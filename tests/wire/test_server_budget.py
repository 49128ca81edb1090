"""queued.max.request.bytes: while the node holds that many bytes of requests read and not yet
answered, it reads no more from anyone; once answers go out, reading resumes. Driven in-process
with a dispatcher whose "park" requests wait for the test to release them."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable

from cluster.dispatch import ApiRegistry, ConnInfo, Dispatcher
from cluster.server import ConnectionLimits, WireServer


class ParkingDispatcher(Dispatcher):
    def __init__(self) -> None:
        super().__init__(ApiRegistry(), node=None)
        self.release = asyncio.Event()

    async def handle(self, frame: bytes, conn: ConnInfo) -> bytes | None:
        if frame.startswith(b"park"):
            await self.release.wait()
        return struct.pack(">i", 4) + frame[:4]


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

    class BigAnswers(ParkingDispatcher):
        async def handle(self, frame: bytes, conn: ConnInfo) -> bytes | None:
            return struct.pack(">i", 8_000_000) + b"z" * 8_000_000

    async def run() -> None:
        limits = ConnectionLimits(max_request_bytes=1 << 20, non_produce_max_bytes=1 << 20,
                                  queued_max_bytes=64 << 20)
        server = WireServer(BigAnswers(), "127.0.0.1", 0, limits=limits)
        await server.start()
        room = server.room()
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            sock.sendall(_frame(b"big1") + _frame(b"big2"))
            await _settle(lambda: server.queued_bytes >= 4_000_000)  # beyond what the kernel buffers
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
