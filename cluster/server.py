"""The asyncio Kafka wire server: one task per connection, one request in flight."""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from cluster.dispatch import CloseConnection, ConnInfo, Dispatcher
from cluster.framing import FrameError, read_frame

log = logging.getLogger("kcoord.server")


class WireServer:
    def __init__(self, dispatcher: Dispatcher, host: str, port: int, *, max_request_bytes: int) -> None:
        self.dispatcher = dispatcher
        self.host = host
        self.port = port
        self.max_request_bytes = max_request_bytes
        self._server: asyncio.AbstractServer | None = None
        self._conns: dict[int, asyncio.StreamWriter] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ids = itertools.count(1)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._on_connect, self.host, self.port, reuse_address=True,
                                                  limit=1 << 20)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._conns.values()):
            w.close()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2)
            except TimeoutError:
                pass

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        cid = next(self._ids)
        peer = writer.get_extra_info("peername") or ("?", 0)
        conn = ConnInfo(str(peer[0]), int(peer[1]), cid)
        self._conns[cid] = writer
        try:
            await self._serve(reader, writer, conn)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception as e:  # noqa: BLE001 - never let one connection crash the server
            log.error("event=connection_error conn=%d peer=%s:%d error=%r", cid, conn.host, conn.port,
                      f"{type(e).__name__}: {e}")
        finally:
            self._conns.pop(cid, None)
            writer.close()
            if task is not None:
                self._tasks.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: ConnInfo) -> None:
        while True:
            try:
                frame = await read_frame(reader, self.max_request_bytes)
            except FrameError as e:
                log.warning("event=bad_frame conn=%d peer=%s:%d error=%r action=close", conn.connection_id,
                            conn.host, conn.port, str(e))
                return
            if frame is None:
                return
            try:
                response = await self.dispatcher.handle(frame, conn)
            except CloseConnection:
                return
            if response is not None:
                writer.write(response)
                await writer.drain()
