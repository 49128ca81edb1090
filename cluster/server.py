"""The asyncio Kafka wire server: one task per connection; responses in request order.

Most requests are handled one at a time per connection, as Kafka does. OffsetCommit is
pipelined (up to ``PIPELINE_DEPTH`` per connection): each starts as soon as it is read, and
since its handler hands the request to the coordinator runtime before its first suspension,
commits reach it in the connection's order; the responses are written in that order too. A
client with many asynchronous commits in flight thus fills one replicated entry instead of
waiting a replication round trip per commit. (Pipelining Heartbeat as well cost more CPU per
heartbeat than it saved in ``kcoord bench heartbeat``.)
"""

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
        queue: _Answers = _Answers(PIPELINE_DEPTH)
        sender = asyncio.ensure_future(_send_in_order(queue, writer))
        try:
            while not sender.done():
                try:
                    frame = await read_frame(reader, self.max_request_bytes)
                except FrameError as e:
                    log.warning("event=bad_frame conn=%d peer=%s:%d error=%r action=close", conn.connection_id,
                                conn.host, conn.port, str(e))
                    break
                if frame is None:
                    break
                if len(frame) >= 2 and int.from_bytes(frame[:2], "big", signed=True) in PIPELINED_KEYS:
                    task = asyncio.ensure_future(self.dispatcher.handle(frame, conn))
                    queue.unanswered += 1  # before it can be answered
                    if not await _put_or_stop(queue, task, sender):
                        task.cancel()
                        break
                    continue
                # Any other request: after every earlier one is answered, handled and answered here
                # before the next is read (the sender is idle meanwhile: nothing is queued).
                if queue.unanswered:
                    await _join_or_stop(queue, sender)
                    if sender.done():
                        break
                try:
                    response = await self.dispatcher.handle(frame, conn)
                except CloseConnection:
                    break
                if response is not None:
                    writer.write(response)
                    await writer.drain()
            if queue.unanswered:
                await _join_or_stop(queue, sender)  # answer what was read before the end
        finally:
            sender.cancel()
            while not queue.empty():
                queue.get_nowait().cancel()
        if sender.done() and not sender.cancelled() and sender.exception() is not None:
            raise sender.exception()  # type: ignore[misc]  # the connection's error, for _on_connect


PIPELINE_DEPTH = 64
PIPELINED_KEYS = frozenset({8})  # OffsetCommit


class _Answers(asyncio.Queue["asyncio.Task[bytes | None]"]):
    """Pipelined requests in the order they were read; ``unanswered`` counts those not yet written."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize)
        self.unanswered = 0


async def _send_in_order(queue: _Answers, writer: asyncio.StreamWriter) -> None:
    while True:
        task = await queue.get()
        try:
            try:
                response = await task
            except CloseConnection:
                writer.close()
                return
            if response is not None:
                writer.write(response)
                await writer.drain()
        finally:
            queue.unanswered -= 1
            queue.task_done()  # only once written: the reader's join means "all answered"


async def _join_or_stop(queue: asyncio.Queue[Any], sender: asyncio.Future[None]) -> None:
    """Until every queued request is answered, or the sender stopped (the connection is closing)."""
    joined = asyncio.ensure_future(queue.join())
    await asyncio.wait((joined, sender), return_when=asyncio.FIRST_COMPLETED)
    joined.cancel()


async def _put_or_stop(queue: asyncio.Queue[Any], item: Any, sender: asyncio.Future[None]) -> bool:
    """Queue ``item``, waiting for room (backpressure); False if the sender stopped first."""
    if sender.done():
        return False
    if not queue.full():
        queue.put_nowait(item)
        return True
    put = asyncio.ensure_future(queue.put(item))
    await asyncio.wait((put, sender), return_when=asyncio.FIRST_COMPLETED)
    if put.done():
        return True
    put.cancel()
    return False
