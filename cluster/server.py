"""The asyncio Kafka wire server: a protocol object per connection; responses in request order.

Most requests are handled one at a time per connection, as Kafka does. OffsetCommit is
pipelined (up to ``PIPELINE_DEPTH`` per connection): each starts as soon as it is read, and
since its handler hands the request to the coordinator runtime before its first suspension,
commits reach it in the connection's order; the responses are written in that order too. A
client with many asynchronous commits in flight thus fills one replicated entry instead of
waiting a replication round trip per commit.

Cost per request matters here (a heartbeat is a few tens of microseconds of work): frames are
cut from the bytes as they arrive (no reader coroutine), a request's handler is started on
the spot and only becomes a task if it has to wait (a heartbeat or a read never does), and
the responses ready after one read leave in one write.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from collections.abc import Coroutine
from typing import Any, cast

from cluster.dispatch import CloseConnection, ConnInfo, Dispatcher

log = logging.getLogger("kcoord.server")

PIPELINE_DEPTH = 64
PIPELINED_KEYS = frozenset({8})  # OffsetCommit
_CLOSE = object()  # a slot's answer: close the connection once the earlier answers are written


class WireServer:
    def __init__(self, dispatcher: Dispatcher, host: str, port: int, *, max_request_bytes: int) -> None:
        self.dispatcher = dispatcher
        self.host = host
        self.port = port
        self.max_request_bytes = max_request_bytes
        self._server: asyncio.AbstractServer | None = None
        self._conns: dict[int, _Connection] = {}
        self._ids = itertools.count(1)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Connection(self), self.host, self.port,
                                                reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns.values()):
            conn.abort()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2)
            except TimeoutError:
                pass


class _Slot:
    """One request's place in the connection's answer order."""

    __slots__ = ("done", "response", "task")

    def __init__(self) -> None:
        self.done = False
        self.response: Any = None
        self.task: asyncio.Task[Any] | None = None


class _Connection(asyncio.Protocol):
    def __init__(self, server: WireServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.info = ConnInfo("?", 0, next(server._ids))
        self.buf = bytearray()
        self.frames: deque[bytes] = deque()  # read, not yet started
        self.slots: deque[_Slot] = deque()  # started, in request order, not yet written
        self.out: list[bytes] = []
        self.receiving = False
        self.closing = False
        self.write_paused = False
        self.read_paused = False
        self.ended = False  # no more frames are taken (end of stream, or a bad frame)

    # ---------------------------------------------------------------- transport events

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.info = ConnInfo(str(peer[0]), int(peer[1]), self.info.connection_id)
        self.server._conns[self.info.connection_id] = self

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.server._conns.pop(self.info.connection_id, None)
        for slot in self.slots:
            if slot.task is not None:
                slot.task.cancel()
        self.slots.clear()
        self.frames.clear()

    def eof_received(self) -> bool:
        if self.buf:
            self._bad_frame(f"truncated frame: {len(self.buf)} bytes at end of stream")
        else:
            self._end()  # the client half-closed: answer what it sent, then close
        return True

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._pump()

    def data_received(self, data: bytes) -> None:
        if self.ended:
            return
        buf = self.buf
        buf += data
        pos, end, limit = 0, len(buf), self.server.max_request_bytes
        while end - pos >= 4:
            size = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
            if size < 0 or size > limit:
                self._bad_frame(f"negative frame size {size}" if size < 0 else
                                f"frame size {size} larger than socket.request.max.bytes={limit}")
                return
            if end - pos - 4 < size:
                break
            self.frames.append(bytes(buf[pos + 4:pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        self.receiving = True
        try:
            self._pump()
        finally:
            self.receiving = False
            self._write_out()

    # ---------------------------------------------------------------- requests

    def _pump(self) -> None:
        """Start what may start: a pipelined request at once (up to the depth), any other one
        once every earlier request is answered."""
        frames = self.frames
        while frames and not self.closing and not self.write_paused:
            frame = frames[0]
            if not frame:  # end of stream
                if self.slots:
                    break
                frames.popleft()
                self.close()
                return
            pipelined = len(frame) >= 2 and int.from_bytes(frame[:2], "big", signed=True) in PIPELINED_KEYS
            if self.slots and (not pipelined or len(self.slots) >= PIPELINE_DEPTH):
                break
            frames.popleft()
            slot = _Slot()
            self.slots.append(slot)
            self._start(frame, slot)
        transport = self.transport
        if transport is None or self.closing:
            return
        if frames and not self.read_paused:  # backpressure: read no further until these start
            self.read_paused = True
            transport.pause_reading()
        elif not frames and self.read_paused:
            self.read_paused = False
            transport.resume_reading()

    def _start(self, frame: bytes, slot: _Slot) -> None:
        coro = self.server.dispatcher.handle(frame, self.info)
        try:
            waiting = coro.send(None)
        except StopIteration as stop:
            self._answer(slot, stop.value)
            return
        except CloseConnection:
            self._answer(slot, _CLOSE)
            return
        except Exception as e:  # noqa: BLE001 - never let one connection crash the server
            self._failed(e)
            return
        slot.task = asyncio.get_running_loop().create_task(_finish(coro, waiting))
        slot.task.add_done_callback(lambda task: self._task_done(slot, task))

    def _task_done(self, slot: _Slot, task: asyncio.Task[Any]) -> None:
        if task.cancelled() or self.closing:
            return
        exc = task.exception()
        if exc is None:
            self._answer(slot, task.result())
        elif isinstance(exc, CloseConnection):
            self._answer(slot, _CLOSE)
        else:
            self._failed(exc)
            return
        self._pump()
        self._write_out()

    def _answer(self, slot: _Slot, response: Any) -> None:
        slot.done, slot.response = True, response
        slots = self.slots
        while slots and slots[0].done:
            first = slots.popleft()
            if first.response is _CLOSE:
                self.close()
                return
            if first.response is not None:
                self.out.append(first.response)
        if not self.receiving:
            self._write_out()

    def _write_out(self) -> None:
        if self.out and self.transport is not None and not self.transport.is_closing():
            out, self.out = self.out, []
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))

    # ---------------------------------------------------------------- closing

    def _bad_frame(self, why: str) -> None:
        log.warning("event=bad_frame conn=%d peer=%s:%d error=%r action=close", self.info.connection_id,
                    self.info.host, self.info.port, why)
        self.buf.clear()
        self._end()

    def _end(self) -> None:
        """Take no more frames; answer those read before, then close."""
        if not self.ended:
            self.ended = True
            self.frames.append(b"")  # the marker _pump closes at
            self._pump()
            self._write_out()

    def _failed(self, e: BaseException) -> None:
        log.error("event=connection_error conn=%d peer=%s:%d error=%r", self.info.connection_id, self.info.host,
                  self.info.port, f"{type(e).__name__}: {e}")
        self.abort()

    def close(self) -> None:
        """Close after writing what is answered (later answers are dropped, as Kafka does)."""
        self._write_out()
        self.closing = True
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.abort()


async def _finish(coro: Coroutine[Any, Any, Any], waiting: Any) -> Any:
    """Run the rest of a handler that was started by hand and suspended on ``waiting``
    (a future, or None for a bare yield): wait for it, then resume the handler, and so on."""
    while True:
        if waiting is None:
            await asyncio.sleep(0)
        else:
            waiting._asyncio_future_blocking = False  # as a task's step does, or awaiting it fails
            try:
                await waiting
            except BaseException:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    coro.close()
                    raise
                # the handler sees the outcome itself when it resumes (the future's result() raises)
        try:
            waiting = coro.send(None)
        except StopIteration as stop:
            return stop.value
