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
import functools
import itertools
import logging
import ssl
from collections import deque
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, cast

from cluster.dispatch import CloseConnection, ConnInfo, Dispatcher, LongPolls
from cluster.log_limit import LogLimiter
from cluster.security.principal_mapper import NoMatchingRule, PrincipalMapper
from cluster.security.sasl import SaslAuthenticator
from cluster.security.tls import HANDSHAKE_TIMEOUT_S, certificate_principal
from cluster.supervise import supervised

log = logging.getLogger("kcoord.server")

PIPELINE_DEPTH = 64
PIPELINED_KEYS = frozenset({8})  # OffsetCommit
PRODUCE_KEY = 0
# Kafka's sasl.server.max.receive.size: before authentication a frame is a SASL token or
# ApiVersions, never larger than this, so an unauthenticated client cannot make the node hold more.
UNAUTHENTICATED_MAX_BYTES = 524288
# Frames up to this size may use the last ``SMALL_FRAME_ROOM`` of queued.max.request.bytes, which
# larger frames (Produce batches, partial or not) may not: clients that hold large frames half
# sent, or do not read their answers, cannot keep a commit or a heartbeat from being read. (A frame
# larger than the rest of the budget, the large-frame cap, may: it is let in below the cap.)
SMALL_FRAME_BYTES = 65536
SMALL_FRAME_ROOM = 16 * 1024 * 1024
# A closed connection's answers may take this long to drain: a client that does not read them would
# otherwise keep the connection half open, and its unsent bytes counted, for ever.
CLOSE_LINGER_S = 10.0
AUTO_MAX_CONNECTIONS = 10000  # each may hold a read's worth of a frame waiting for room (~256 KiB)
_CLOSE = object()  # a slot's answer: close the connection once the earlier answers are written


@dataclass(frozen=True, slots=True)
class _CloseAfter:
    """A slot's answer: write this, then close (a failed SASL exchange's last answer)."""

    data: bytes


def _closing(e: CloseConnection) -> Any:
    return _CloseAfter(e.answer) if e.answer else _CLOSE


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What one client can make the server hold (Kafka's names where it has them)."""

    max_request_bytes: int = 104857600  # socket.request.max.bytes: Produce frames
    non_produce_max_bytes: int = 4194304  # every other API's frames
    max_connections: int = AUTO_MAX_CONNECTIONS  # max.connections
    max_connections_per_ip: int = 1000  # max.connections.per.ip
    idle_ms: int = 600000  # connections.max.idle.ms
    queued_max_bytes: int = 268435456  # queued.max.request.bytes: read, not yet answered, all connections


def auto_max_connections(room: int) -> int:
    """``max.connections = -1``: ``room``, what the node's open-file budget keeps for connections once
    its own files and its partitions' are counted (``cluster.fd_budget``), at most
    ``AUTO_MAX_CONNECTIONS``."""
    return min(AUTO_MAX_CONNECTIONS, room)


class WireServer:
    def __init__(self, dispatcher: Dispatcher, host: str, port: int, *,
                 limits: ConnectionLimits | None = None, name: str = "",
                 more: list[tuple[str, str, int]] | None = None,
                 authenticators: Mapping[str, Callable[[], SaslAuthenticator]] | None = None,
                 tls: Mapping[str, ssl.SSLContext] | None = None,
                 principal_mapper: PrincipalMapper | None = None) -> None:
        self.dispatcher = dispatcher
        self.host = host
        self.port = port
        self.name = name  # the main listener's name
        self.more = list(more or [])  # further listeners: (name, host, port), sharing the limits
        self.ports: dict[str, int] = {}
        self.authenticators = dict(authenticators or {})  # listener -> a new connection's SASL exchange
        self.tls = dict(tls or {})  # listener -> its TLS context (SSL and SASL_SSL listeners)
        self.principal_mapper = principal_mapper or PrincipalMapper()
        self.limits = limits or ConnectionLimits()
        self.max_request_bytes = self.limits.max_request_bytes
        self._server: asyncio.AbstractServer | None = None
        self._more_servers: list[asyncio.AbstractServer] = []
        self._conns: dict[int, _Connection] = {}
        self._per_ip: dict[str, int] = {}
        self._ids = itertools.count(1)
        self.queued_bytes = 0  # request bytes read and not yet answered, all connections
        self._starved: set[_Connection] = set()  # paused until queued_bytes falls
        self._waiting: dict[_Connection, int] = {}  # paused until their frame fits: size, oldest first
        self._sweeper: asyncio.Task[None] | None = None
        self.warn = LogLimiter(log)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Connection(self, self.name), self.host, self.port,
                                                reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        self.ports[self.name] = self.port
        for name, host, port in self.more:
            extra = await loop.create_server(functools.partial(_Connection, self, name), host or None, port,
                                             reuse_address=True)
            self._more_servers.append(extra)
            self.ports[name] = extra.sockets[0].getsockname()[1]
        self._sweeper = supervised(self._close_idle(), "idle-connections")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._server is not None:
            self._server.close()
        for extra in self._more_servers:
            extra.close()
        for conn in list(self._conns.values()):
            conn.abort()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2)
            except TimeoutError:
                pass

    # ---------------------------------------------------------------- limits

    def admit(self, conn: _Connection) -> bool:
        """Count a new connection in, or say why not (max.connections, max.connections.per.ip)."""
        host = conn.info.host
        if len(self._conns) >= self.limits.max_connections:
            self.warn.warning("connection_refused", "event=connection_refused peer=%s:%d reason=max_connections "
                              "limit=%d", host, conn.info.port, self.limits.max_connections)
            return False
        if self._per_ip.get(host, 0) >= self.limits.max_connections_per_ip:
            self.warn.warning("connection_refused", "event=connection_refused peer=%s:%d "
                              "reason=max_connections_per_ip limit=%d", host, conn.info.port,
                              self.limits.max_connections_per_ip)
            return False
        self._conns[conn.info.connection_id] = conn
        self._per_ip[host] = self._per_ip.get(host, 0) + 1
        return True

    def release(self, conn: _Connection) -> None:
        if self._conns.pop(conn.info.connection_id, None) is None:
            return
        left = self._per_ip.get(conn.info.host, 1) - 1
        if left > 0:
            self._per_ip[conn.info.host] = left
        else:
            self._per_ip.pop(conn.info.host, None)
        self._starved.discard(conn)
        if self._waiting.pop(conn, None) is not None:
            self._grant_waiting()  # it may have been the head: the frame behind it may fit now

    def frame_limit(self, api_key: int) -> int:
        return self.limits.max_request_bytes if api_key == PRODUCE_KEY else self.limits.non_produce_max_bytes

    def hold(self, n: int) -> None:
        self.queued_bytes += n

    def reserve(self, conn: _Connection, size: int) -> bool:
        """Count a frame's declared size when its header arrives, before its body (Kafka's memory
        pool): granted while it fits the budget (see ``_fits``), otherwise the connection waits,
        not reading, until bytes are freed; large frames are granted in the order they came."""
        if (not self._waiting or size <= SMALL_FRAME_BYTES) and self._fits(size):
            self.queued_bytes += size
            return True
        self._waiting[conn] = size
        return False

    def _fits(self, size: int) -> bool:
        """A small frame fits the whole budget, a larger one the budget less the room kept for small
        ones (its cap). A frame larger than its cap, which can never fit (queued.max.request.bytes
        set to socket.request.max.bytes), is let in as soon as less than the cap is held, as Kafka's
        non-strict memory pool does: waiting for nothing to be held would starve it, and every
        large frame behind it, under constant small traffic. The node then holds at most the cap
        and one such frame."""
        budget = self.limits.queued_max_bytes
        cap = budget if size <= SMALL_FRAME_BYTES else budget - min(SMALL_FRAME_ROOM, budget // 4)
        if size > cap:
            return self.queued_bytes < cap
        return self.queued_bytes + size <= cap

    def room(self) -> int:
        """What a large answer (a Fetch's) may still take of the budget before it is sent."""
        return max(0, self.limits.queued_max_bytes - min(SMALL_FRAME_ROOM, self.limits.queued_max_bytes // 4)
                   - self.queued_bytes)

    def free(self, n: int) -> None:
        self.queued_bytes -= n
        if self._starved and self.queued_bytes < self.limits.queued_max_bytes:
            starved, self._starved = self._starved, set()
            for conn in starved:
                conn.unstarve()
        self._grant_waiting()

    def _grant_waiting(self) -> None:
        """Count in the waiting frames that fit now."""
        while self._waiting:  # the oldest waiting frame first, and only once it fits: O(1) per call
            conn, size = next(iter(self._waiting.items()))
            if not self._fits(size):
                break
            del self._waiting[conn]
            self.queued_bytes += size
            conn.granted(size)

    def over_budget(self, conn: _Connection) -> bool:
        """Reading pauses while the node holds queued.max.request.bytes of unanswered requests."""
        if self.queued_bytes < self.limits.queued_max_bytes:
            return False
        self._starved.add(conn)
        return True

    async def _close_idle(self) -> None:
        """connections.max.idle.ms: close connections with nothing read or written for that long
        and no request in flight; abort those whose client has not read its answers (a close would
        wait for it to, holding their bytes in the budget)."""
        idle_s = self.limits.idle_ms / 1000
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(idle_s / 4, 30.0))
            cutoff = loop.time() - idle_s
            for conn in list(self._conns.values()):
                if conn.last_active < cutoff and not conn.slots:
                    unread = conn.has_unsent()
                    log.info("event=connection_idle_closed conn=%d peer=%s:%d idle_ms=%d action=%s",
                             conn.info.connection_id, conn.info.host, conn.info.port, self.limits.idle_ms,
                             "abort" if unread else "close")
                    if unread:
                        conn.abort()
                    else:
                        conn.close()


class _Slot:
    """One request's place in the connection's answer order."""

    __slots__ = ("done", "response", "size", "task")

    def __init__(self, size: int) -> None:
        self.size = size  # the request's bytes, held in queued.max.request.bytes until answered
        self.done = False
        self.response: Any = None
        self.task: asyncio.Task[Any] | None = None


class _Connection(asyncio.Protocol):
    def __init__(self, server: WireServer, listener: str = "") -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.long_polls = LongPolls(lambda: bool(self.frames) or len(self.slots) > 1)
        self.info = ConnInfo("?", 0, next(server._ids), listener, self.long_polls)
        self.buf = bytearray()
        self.frames: deque[bytes] = deque()  # read, not yet started
        self.slots: deque[_Slot] = deque()  # started, in request order, not yet written
        self.out: list[bytes] = []
        self.receiving = False
        self.write_scheduled = False  # a _scheduled_write is pending (_write_soon)
        self.closing = False
        self.write_paused = False
        self.read_paused = False
        self.ended = False  # no more frames are taken (end of stream, or a bad frame)
        self.starved = False  # paused while the node holds queued.max.request.bytes
        self.held = 0  # this connection's share of the server's queued_bytes
        self.reserved = 0  # of which the declared size of the frame being read (its header seen)
        self.unsent = 0  # of which answer bytes the client has not read yet (its write buffer)
        self.last_active = 0.0  # loop time of the last read or write (connections.max.idle.ms)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.handshake: asyncio.Task[Any] | None = None  # a TLS listener's handshake, while it lasts
        self.linger: asyncio.TimerHandle | None = None  # closed with answers unsent: aborted when it fires

    # ---------------------------------------------------------------- transport events

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername") or ("?", 0)
        authenticator = self.server.authenticators.get(self.info.listener)
        self.info = ConnInfo(str(peer[0]), int(peer[1]), self.info.connection_id, self.info.listener,
                             self.long_polls, authenticator() if authenticator is not None else None,
                             room=self.server.room)
        self.loop = asyncio.get_running_loop()
        self.last_active = self.loop.time()
        if not self.server.admit(self):  # counted before any TLS handshake: handshakes are bounded too
            self.closing = self.ended = True
            self.transport.abort()
            return
        tls = self.server.tls.get(self.info.listener)
        if tls is not None:
            self._begin_tls(tls)

    def _begin_tls(self, tls: ssl.SSLContext) -> None:
        """TLS from the first byte (Kafka has no STARTTLS). The handshake's first step runs now, so
        the transport hands what it reads next (the ClientHello, which uvloop may read at once) to
        TLS rather than to this protocol; the rest runs as a task, and a failed handshake is logged
        here, once, with the peer's address. Nothing is read as a request until it is done."""
        raw = self.transport
        assert raw is not None and self.loop is not None
        coro = self.loop.start_tls(raw, self, tls, server_side=True, ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
        try:
            waiting = coro.send(None)
        except StopIteration as stop:
            self._tls_ready(raw, stop.value)
            return
        except Exception as e:  # noqa: BLE001 - a handshake that fails at once is logged like any other
            self._tls_failed(raw, e)
            return
        self.handshake = self.loop.create_task(_finish(coro, waiting))
        self.handshake.add_done_callback(lambda task: self._handshake_done(raw, task))

    def _handshake_done(self, raw: asyncio.Transport, task: asyncio.Task[Any]) -> None:
        self.handshake = None
        if task.cancelled():
            self._refused(raw)
        elif task.exception() is not None:
            self._tls_failed(raw, cast(BaseException, task.exception()))
        else:
            self._tls_ready(raw, task.result())

    def _tls_failed(self, raw: asyncio.Transport, e: BaseException) -> None:
        why = getattr(e, "reason", None) or type(e).__name__  # rate-limited per reason, so each kind is seen
        self.server.warn.warning(f"tls_handshake_failed:{why}", "event=tls_handshake_failed conn=%d peer=%s:%d listener=%s "
                                 "error=%r", self.info.connection_id, self.info.host, self.info.port,
                                 self.info.listener, f"{type(e).__name__}: {e}")
        self._refused(raw)

    def _tls_ready(self, raw: asyncio.Transport, transport: asyncio.Transport | None) -> None:
        if transport is None or transport.is_closing():  # closed meanwhile
            self._refused(raw if transport is None else transport)
            return
        self.transport = transport
        if self.loop is not None:
            self.last_active = self.loop.time()
        if not self._tls_principal(transport):
            self._refused(transport)
        elif self.buf:
            self.data_received(b"")  # what arrived with the end of the handshake

    def _refused(self, transport: asyncio.Transport) -> None:
        self.closing = self.ended = True
        self.server.release(self)
        transport.abort()

    def _tls_principal(self, transport: asyncio.BaseTransport) -> bool:
        """The principal a TLS client's certificate gives, or False when no mapping rule takes the
        certificate's subject (Kafka refuses such a client)."""
        tls = transport.get_extra_info("ssl_object")
        der = tls.getpeercert(binary_form=True) if tls is not None else None
        try:
            self.info.tls_principal = certificate_principal(der, self.server.principal_mapper)
        except (NoMatchingRule, ValueError) as e:
            self.server.warn.warning("tls_principal_refused", "event=tls_principal_refused conn=%d peer=%s:%d "
                                     "listener=%s error=%r", self.info.connection_id, self.info.host, self.info.port,
                                     self.info.listener, str(e))
            return False
        if der is not None:
            log.info("event=tls_authenticated conn=%d peer=%s:%d listener=%s principal=%s", self.info.connection_id,
                     self.info.host, self.info.port, self.info.listener, self.info.tls_principal)
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        if self.linger is not None:
            self.linger.cancel()
            self.linger = None
        if self.handshake is not None:  # the raw connection went during the handshake: _handshake_done says so
            return
        self.closing = True
        self.server.release(self)
        self.reserved = self.unsent = 0
        if self.held:
            self.server.free(self.held)
            self.held = 0
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
        return self.info.tls_principal is None  # TLS has no half-close: its transport closes now

    def pause_writing(self) -> None:
        self.write_paused = True
        self._count_unsent()

    def resume_writing(self) -> None:
        self.write_paused = False
        self._count_unsent()
        self._pump()

    def _count_unsent(self) -> None:
        """Answers the client has not read count against the budget while writing is paused (the
        transport holds more than its high-water mark); reading from it pauses meanwhile, since
        no request starts while answers cannot be written."""
        transport = self.transport
        now = transport.get_write_buffer_size() if self.write_paused and transport is not None else 0
        if now > self.unsent:
            self.held += now - self.unsent
            self.server.hold(now - self.unsent)
        elif now < self.unsent:
            self.held -= self.unsent - now
            self.server.free(self.unsent - now)
        self.unsent = now

    def data_received(self, data: bytes) -> None:
        if self.ended:
            return
        if self.handshake is not None:  # decrypted bytes may come before _handshake_done: kept for it
            self.buf += data
            return
        server = self.server
        if self.loop is not None:
            self.last_active = self.loop.time()
        buf = self.buf
        buf += data
        pos, end = 0, len(buf)
        taken = 0
        while end - pos >= 4:
            size = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
            if not self._frame_allowed(size, buf, pos, end):
                return
            if end - pos - 4 < size:
                break
            self.frames.append(bytes(buf[pos + 4:pos + 4 + size]))
            if self.reserved:  # counted when its header came
                self.reserved = 0
            else:
                taken += size
            pos += 4 + size
        if pos:
            del buf[:pos]
        if taken:
            self.held += taken
            server.hold(taken)
            if server.over_budget(self):
                self.starved = True
        if not self.starved:
            self._reserve_partial()
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
            slot = _Slot(len(frame))
            self.slots.append(slot)
            self._start(frame, slot)
        if self.long_polls.behind():
            self.long_polls.cut_short()  # a request waits behind a long poll: answer that now
        self._update_reading()

    def _update_reading(self) -> None:
        """Read no further while frames wait to start, or while the node is over its budget."""
        transport = self.transport
        if transport is None or self.closing:
            return
        pause = bool(self.frames) or self.starved
        if pause and not self.read_paused:
            self.read_paused = True
            transport.pause_reading()
        elif not pause and self.read_paused:
            self.read_paused = False
            transport.resume_reading()

    def unstarve(self) -> None:
        self.starved = False
        self._reserve_partial()
        self._update_reading()

    def granted(self, size: int) -> None:
        """The server counted this connection's waiting frame in: read on."""
        self.reserved = size
        self.held += size
        self.starved = False
        self._update_reading()

    def _frame_allowed(self, size: int, buf: bytearray, pos: int, end: int) -> bool:
        """A frame's declared size against its limits, checked as soon as its header is read;
        False once the connection is being closed for it."""
        server = self.server
        limit = server.max_request_bytes
        if size < 0 or size > limit:
            self._bad_frame(f"negative frame size {size}" if size < 0 else
                            f"frame size {size} larger than socket.request.max.bytes={limit}")
            return False
        auth = self.info.auth
        # (never authenticated: a re-authenticating connection keeps its principal and its limits)
        if auth is not None and not auth.principal and size > UNAUTHENTICATED_MAX_BYTES:
            self._bad_frame(f"frame size {size} before authentication, larger than {UNAUTHENTICATED_MAX_BYTES}")
            return False
        if size > server.limits.non_produce_max_bytes and end - pos >= 6:
            api_key = int.from_bytes(buf[pos + 4:pos + 6], "big", signed=True)
            if size > server.frame_limit(api_key):
                self._bad_frame(f"frame size {size} of api_key {api_key} larger than its limit "
                                f"{server.frame_limit(api_key)}")
                return False
        return True

    def _reserve_partial(self) -> None:
        """The frame whose header is read but not its body: its declared size is counted now, or,
        when the budget has no room for it, the connection reads nothing more until it has (what
        it holds meanwhile is at most one read's worth of bytes)."""
        buf = self.buf
        if self.reserved or len(buf) < 4 or self.closing or self.ended:
            return
        size = int.from_bytes(buf[:4], "big", signed=True)
        if len(buf) - 4 >= size:
            return  # complete: taken at the next read
        if self.server.reserve(self, size):
            self.reserved = size
            self.held += size
        else:
            self.starved = True

    def _start(self, frame: bytes, slot: _Slot) -> None:
        coro = self.server.dispatcher.handle(frame, self.info)
        try:
            waiting = coro.send(None)
        except StopIteration as stop:
            self._answer(slot, stop.value)
            return
        except CloseConnection as e:
            self._answer(slot, _closing(e))
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
            self._answer(slot, _closing(exc))
        else:
            self._failed(exc)
            return
        self._pump()
        self._write_soon()

    def _write_soon(self) -> None:
        """Write at the next turn of the loop: the answers of pipelined requests that complete
        together (one commit notice releases a client's whole window) leave in one write."""
        if not self.write_scheduled and self.loop is not None:
            self.write_scheduled = True
            self.loop.call_soon(self._scheduled_write)

    def _scheduled_write(self) -> None:
        self.write_scheduled = False
        self._write_out()

    def _answer(self, slot: _Slot, response: Any) -> None:
        slot.done, slot.response = True, response
        slots = self.slots
        while slots and slots[0].done:
            first = slots.popleft()
            if first.size:
                self.held -= first.size
                self.server.free(first.size)
            if first.response is _CLOSE:
                self.close()
                return
            if isinstance(first.response, _CloseAfter):
                self.out.append(first.response.data)
                self.close()
                return
            if first.response is not None:
                self.out.append(first.response)
        if not self.receiving:
            self._write_soon()

    def _write_out(self) -> None:
        if self.out and self.transport is not None and not self.transport.is_closing():
            out, self.out = self.out, []
            if self.loop is not None:
                self.last_active = self.loop.time()
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))
            if self.write_paused:
                self._count_unsent()

    # ---------------------------------------------------------------- closing

    def _bad_frame(self, why: str) -> None:
        self.server.warn.warning("bad_frame", "event=bad_frame conn=%d peer=%s:%d error=%r action=close",
                                 self.info.connection_id, self.info.host, self.info.port, why)
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

    def has_unsent(self) -> bool:
        """Whether the transport still holds answer bytes the client has not read."""
        transport = self.transport
        return self.write_paused or (transport is not None and transport.get_write_buffer_size() > 0)

    def close(self) -> None:
        """Close after writing what is answered (later answers are dropped, as Kafka does). The
        transport closes once they are written; a client that does not read them is aborted after
        ``CLOSE_LINGER_S``, so its connection does not stay half open holding the budget."""
        self._write_out()
        self.closing = True
        if self.transport is None:
            return
        unsent = self.has_unsent()
        self.transport.close()
        if unsent and self.linger is None and self.loop is not None:
            self.linger = self.loop.call_later(CLOSE_LINGER_S, self.abort)

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
