"""A TCP fault proxy between Kafka clients and one node (asyncio, in a background thread).

Modes:
- ``ok``: forward bytes both ways;
- ``drop``: blackhole — connections stay open (new ones are accepted) but nothing is
  forwarded in either direction, so clients see timeouts; on heal the blackholed
  connections are closed (their byte streams lost data, they cannot be resumed);
- ``close``: every connection is closed and new ones are closed as soon as accepted;
- ``delay``: forward, after ``delay_ms`` per chunk.

Only client traffic goes through the proxy; Raft traffic between nodes does not, so a
``drop``/``close`` partitions the node from the clients, not from its peers.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import Future
from typing import Any


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.client_r, self.client_w = reader, writer
        self.upstream_w: asyncio.StreamWriter | None = None
        self.tainted = False  # bytes were dropped: close on heal

    def close(self) -> None:
        for w in (self.client_w, self.upstream_w):
            if w is not None:
                with contextlib.suppress(Exception):
                    w.close()


class FaultProxy:
    def __init__(self, listen_port: int, target_port: int, host: str = "127.0.0.1") -> None:
        self.listen_port = listen_port
        self.target_port = target_port
        self.host = host
        self.mode = "ok"
        self.delay_ms = 0
        self.conns: set[_Conn] = set()
        self.server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, self.host, self.listen_port, reuse_address=True)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for c in list(self.conns):
            c.close()

    def set_mode(self, mode: str, delay_ms: int = 0) -> None:
        old = self.mode
        self.mode, self.delay_ms = mode, delay_ms
        if mode == "close" or (old == "drop" and mode != "drop"):
            for c in list(self.conns):
                if mode == "close" or c.tainted:
                    c.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(reader, writer)
        if self.mode == "close":
            conn.close()
            return
        self.conns.add(conn)
        try:
            up_r, up_w = await asyncio.open_connection(self.host, self.target_port)
        except OSError:
            conn.close()
            self.conns.discard(conn)
            return
        conn.upstream_w = up_w
        if self.mode == "drop":
            conn.tainted = True
        try:
            await asyncio.gather(self._pump(conn, reader, up_w), self._pump(conn, up_r, writer))
        finally:
            conn.close()
            self.conns.discard(conn)

    async def _pump(self, conn: _Conn, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await src.read(65536)
                if not data:
                    break
                if self.mode == "drop":
                    conn.tainted = True
                    continue
                if self.mode == "delay" and self.delay_ms:
                    await asyncio.sleep(self.delay_ms / 1000)
                if self.mode == "close" or conn.tainted:
                    break
                dst.write(data)
                await dst.drain()
        except (OSError, asyncio.IncompleteReadError, RuntimeError):
            pass
        finally:
            conn.close()


class ProxySet:
    """One proxy per node, served by an event loop in a daemon thread."""

    def __init__(self, listen_ports: list[int]) -> None:
        self.listen_ports = listen_ports
        self.proxies: list[FaultProxy] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="fault-proxy")
        self.thread.start()

    def _call(self, coro: Any) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(10)

    def start(self, target_ports: list[int]) -> None:
        self.proxies = [FaultProxy(lp, tp) for lp, tp in zip(self.listen_ports, target_ports, strict=True)]
        for p in self.proxies:
            self._call(p.start())

    def set_mode(self, i: int, mode: str, delay_ms: int = 0) -> None:
        async def apply() -> None:
            self.proxies[i].set_mode(mode, delay_ms)

        self._call(apply())

    def heal_all(self) -> None:
        for i in range(len(self.proxies)):
            self.set_mode(i, "ok")

    def stop(self) -> None:
        for p in self.proxies:
            with contextlib.suppress(Exception):
                self._call(p.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
