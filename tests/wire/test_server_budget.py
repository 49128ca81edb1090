"""queued.max.request.bytes: while the node holds that many bytes of requests read and not yet
answered, it reads no more from anyone; once answers go out, reading resumes. Driven in-process
with a dispatcher whose "park" requests wait for the test to release them."""

from __future__ import annotations

import asyncio
import struct

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
            for _ in range(6):  # 6 x 200 KB parked: over the 1 MiB budget
                r, w = await asyncio.open_connection("127.0.0.1", server.port)
                w.write(_frame(b"park" + b"x" * 200_000))
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
