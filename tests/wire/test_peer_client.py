"""The node-to-node client (cluster/peer_client.py) against a small in-order server: requests
on one connection are pipelined and each gets its own answer; a connection that dies fails every
request waiting on it, and the next request opens a new one."""

from __future__ import annotations

import asyncio
import datetime
import io
import struct
import time

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse
from kio.serial import entity_reader, entity_writer

from cluster.codec import request_schema
from cluster.peer_client import PeerClient, PeerRequestError

DELAY_S = 0.2


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, close_after: int | None) -> None:
    """Answers FindCoordinator v3 in order, each DELAY_S after it arrived, requests being worked on
    at once as a Kafka broker does (node id = the key's length)."""
    served = 0
    request_cls = request_schema(10, 3)
    assert request_cls is not None
    pending: asyncio.Queue[tuple[int, int, float]] = asyncio.Queue()

    async def answer() -> None:
        while True:
            corr, node, ready = await pending.get()
            await asyncio.sleep(max(0.0, ready - time.monotonic()))
            buf = io.BytesIO()
            entity_writer(FindCoordinatorResponse)(buf, FindCoordinatorResponse(
                throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, error_message=None, node_id=node,
                host="h", port=1))
            body = struct.pack(">i", corr) + b"\x00" + buf.getvalue()
            writer.write(struct.pack(">i", len(body)) + body)
            await writer.drain()

    task = asyncio.create_task(answer())
    try:
        while True:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            frame = await reader.readexactly(size)
            corr = struct.unpack_from(">i", frame, 4)[0]
            (n,) = struct.unpack_from(">h", frame, 8)
            req, _ = entity_reader(request_cls)(frame, 10 + n + 1)
            served += 1
            if close_after is not None and served > close_after:
                writer.close()
                return
            await pending.put((corr, len(req.key), time.monotonic() + DELAY_S))
    except asyncio.IncompleteReadError:
        pass
    finally:
        task.cancel()


def test_requests_on_one_connection_are_pipelined_and_matched() -> None:
    async def main() -> None:
        accepted: list[int] = []

        def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> object:
            accepted.append(1)
            return _serve(r, w, None)

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = PeerClient("t", 5.0)
        try:
            await client.request("127.0.0.1", port, 10, 3, FindCoordinatorRequest(key="x", key_type=0))
            t0 = time.monotonic()
            got = await asyncio.gather(*(client.request("127.0.0.1", port, 10, 3, FindCoordinatorRequest(
                key="k" * i, key_type=0)) for i in range(1, 6)))
            took = time.monotonic() - t0
            assert [int(r.node_id) for r in got] == [1, 2, 3, 4, 5]
            assert took < 3 * DELAY_S  # one connection, all five in flight at once (one at a time: 5 x DELAY_S)
            assert len(accepted) == 1
        finally:
            client.close()
            server.close()
    asyncio.run(main())


def test_a_dead_connection_fails_every_waiting_request_and_the_next_reconnects() -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: _serve(r, w, 1), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = PeerClient("t", 5.0)
        try:
            results = await asyncio.gather(*(client.request("127.0.0.1", port, 10, 3, FindCoordinatorRequest(
                key="k" * i, key_type=0)) for i in range(1, 4)), return_exceptions=True)
            assert all(isinstance(r, PeerRequestError) for r in results), results
            again = await asyncio.gather(*(client.request("127.0.0.1", port, 10, 3, FindCoordinatorRequest(
                key="k", key_type=0)) for _ in range(1)), return_exceptions=True)
            assert int(again[0].node_id) == 1  # type: ignore[union-attr]
        finally:
            client.close()
            server.close()
    asyncio.run(main())
