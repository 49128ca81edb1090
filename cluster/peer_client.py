"""A small Kafka-protocol client for node-to-node requests (the transaction coordinator's
WriteTxnMarkers to partition leaders): one connection per address, one request at a time on
it, kio for the bodies. A failed connection is dropped and opened again on the next request."""

from __future__ import annotations

import asyncio
import io
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
        self.lock = asyncio.Lock()
        self.corr = 0


class PeerClient:
    def __init__(self, client_id: str, timeout_s: float = 10.0) -> None:
        self._client_id = client_id.encode()
        self._timeout_s = timeout_s
        self._conns: dict[tuple[str, int], _Conn] = {}

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
        async with conn.lock:
            conn.corr += 1
            head = _HEADER.pack(api_key, version, conn.corr) + struct.pack(">h", len(self._client_id)) + self._client_id
            if req_cls.__flexible__:
                head += b"\x00"  # no tagged fields
            buf = io.BytesIO()
            entity_writer(req_cls)(buf, body)
            payload = head + buf.getvalue()
            try:
                conn.writer.write(struct.pack(">i", len(payload)) + payload)
                await conn.writer.drain()
                size = struct.unpack(">i", await asyncio.wait_for(conn.reader.readexactly(4), self._timeout_s))[0]
                frame = await asyncio.wait_for(conn.reader.readexactly(size), self._timeout_s)
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as e:
                self._drop(host, port, conn)
                raise PeerRequestError(f"{host}:{port}: {e!r}") from e
        if struct.unpack_from(">i", frame, 0)[0] != conn.corr:
            self._drop(host, port, conn)
            raise PeerRequestError(f"{host}:{port}: answer to another request")
        return frame, 5 if resp_cls.__flexible__ else 4

    async def _conn(self, host: str, port: int) -> _Conn:
        conn = self._conns.get((host, port))
        if conn is None or conn.writer.is_closing():
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), self._timeout_s)
            except (OSError, TimeoutError) as e:
                raise PeerRequestError(f"{host}:{port}: {e!r}") from e
            conn = self._conns[(host, port)] = _Conn(reader, writer)
        return conn

    def _drop(self, host: str, port: int, conn: _Conn) -> None:
        conn.writer.close()
        if self._conns.get((host, port)) is conn:
            del self._conns[(host, port)]

    def close(self) -> None:
        for conn in self._conns.values():
            conn.writer.close()
        self._conns.clear()
