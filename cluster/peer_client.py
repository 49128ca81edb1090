"""A small Kafka-protocol client for node-to-node requests (the transaction coordinator's
WriteTxnMarkers to partition leaders, the leaders' transaction verifications): one connection per
address, requests pipelined on it (a Kafka server answers a connection's requests in order, so the
answers are matched first in, first out, and checked by correlation id), kio for the bodies. A
failed connection fails every request waiting on it and is opened again on the next request."""

from __future__ import annotations

import asyncio
import collections
import io
import ssl
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer

from cluster.codec import request_schema, response_schema

_HEADER = struct.Struct(">hhi")


class PeerRequestError(ConnectionError):
    pass


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.corr = 0
        self.waiting: collections.deque[tuple[int, asyncio.Future[bytes]]] = collections.deque()
        self.reading: asyncio.Task[None] | None = None

    def fail(self, error: Exception) -> None:
        while self.waiting:
            _, fut = self.waiting.popleft()
            if not fut.done():
                fut.set_exception(error)


def _retrieved(fut: asyncio.Future[bytes]) -> None:
    if not fut.cancelled():
        fut.exception()


class PeerClient:
    def __init__(self, client_id: str, timeout_s: float = 10.0, ssl_context: ssl.SSLContext | None = None) -> None:
        self._client_id = client_id.encode()
        self._ssl = ssl_context  # the nodes' listener is SSL: TLS, showing this node's certificate
        self._timeout_s = timeout_s
        self._conns: dict[tuple[str, int], _Conn] = {}
        self._connecting: asyncio.Lock | None = None  # one connection per address, even when asked at once

    async def request(self, host: str, port: int, api_key: int, version: int, body: Any) -> Any:
        resp_cls = response_schema(api_key, version)
        if resp_cls is None:
            raise ValueError(f"no schema for api {api_key} v{version}")
        frame, pos = await self.request_raw(host, port, api_key, version, body)
        obj, _ = entity_reader(resp_cls)(frame, pos)
        return obj

    async def request_raw(self, host: str, port: int, api_key: int, version: int, body: Any) -> tuple[bytes, int]:
        """The response frame and where its body starts (for answers kio cannot read)."""
        req_cls, resp_cls = request_schema(api_key, version), response_schema(api_key, version)
        if req_cls is None or resp_cls is None:
            raise ValueError(f"no schema for api {api_key} v{version}")
        conn = await self._conn(host, port)
        conn.corr += 1
        corr = conn.corr
        head = _HEADER.pack(api_key, version, corr) + struct.pack(">h", len(self._client_id)) + self._client_id
        if req_cls.__flexible__:
            head += b"\x00"  # no tagged fields
        buf = io.BytesIO()
        entity_writer(req_cls)(buf, body)
        payload = head + buf.getvalue()
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        fut.add_done_callback(_retrieved)  # a requester that timed out no longer reads its error
        conn.waiting.append((corr, fut))
        try:
            conn.writer.write(struct.pack(">i", len(payload)) + payload)
            await asyncio.wait_for(conn.writer.drain(), self._timeout_s)
            frame = await asyncio.wait_for(asyncio.shield(fut), self._timeout_s)
        except (OSError, TimeoutError) as e:
            self._drop(host, port, conn, PeerRequestError(f"{host}:{port}: {e!r}"))
            raise PeerRequestError(f"{host}:{port}: {e!r}") from e
        return frame, 5 if resp_cls.__flexible__ else 4

    async def _read(self, host: str, port: int, conn: _Conn) -> None:
        """Hand each answer to the request it belongs to, in order."""
        try:
            while True:
                size = struct.unpack(">i", await conn.reader.readexactly(4))[0]
                frame = await conn.reader.readexactly(size)
                if not conn.waiting or struct.unpack_from(">i", frame, 0)[0] != conn.waiting[0][0]:
                    raise PeerRequestError(f"{host}:{port}: answer to another request")
                _, fut = conn.waiting.popleft()
                if not fut.done():
                    fut.set_result(frame)
        except (OSError, asyncio.IncompleteReadError, PeerRequestError) as e:
            self._drop(host, port, conn, e if isinstance(e, PeerRequestError) else PeerRequestError(f"{host}:{port}: {e!r}"))

    async def _conn(self, host: str, port: int) -> _Conn:
        conn = self._conns.get((host, port))
        if conn is not None and not conn.writer.is_closing():
            return conn
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            return await self._open(host, port)

    async def _open(self, host: str, port: int) -> _Conn:
        conn = self._conns.get((host, port))
        if conn is None or conn.writer.is_closing():
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=self._ssl),
                                                        self._timeout_s)
            except (OSError, TimeoutError) as e:
                raise PeerRequestError(f"{host}:{port}: {e!r}") from e
            conn = self._conns[(host, port)] = _Conn(reader, writer)
            conn.reading = asyncio.create_task(self._read(host, port, conn))
        return conn

    def _drop(self, host: str, port: int, conn: _Conn, error: Exception) -> None:
        conn.writer.close()
        conn.fail(error)
        if conn.reading is not None and conn.reading is not asyncio.current_task():
            conn.reading.cancel()
        if self._conns.get((host, port)) is conn:
            del self._conns[(host, port)]

    def close(self) -> None:
        for conn in self._conns.values():
            conn.writer.close()
            conn.fail(PeerRequestError("client closed"))
            if conn.reading is not None:
                conn.reading.cancel()
        self._conns.clear()
