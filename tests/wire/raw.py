"""A minimal raw Kafka wire client for tests (hand-made frames, kio for bodies)."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer


class RawConn:
    def __init__(self, bootstrap: str, timeout: float = 5.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def call(self, api_key: int, version: int, body: Any) -> Any:
        """Send one request and read its response (None if the server closed the connection)."""
        self.request(api_key, version, body)
        return self.response(api_key, version)

    def sasl_plain(self, user: str, password: str) -> int:
        """SaslHandshake v1 + SaslAuthenticate v2 with PLAIN: the SaslAuthenticate error code."""
        done = self.sasl_plain_response(user, password)
        return -1 if done is None else int(done.error_code)

    def sasl_plain_response(self, user: str, password: str) -> Any:
        """SaslHandshake v1 + SaslAuthenticate v2 with PLAIN: the SaslAuthenticate response (None: closed)."""
        from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
        from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

        shake = self.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        assert shake is not None and int(shake.error_code) == 0, shake
        return self.call(36, 2, SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def header(self, api_key: int, version: int, *, flexible: bool, client_id: str | None = "raw") -> bytes:
        self.corr += 1
        out = struct.pack(">hhi", api_key, version, self.corr)
        if client_id is None:
            out += struct.pack(">h", -1)
        else:
            out += struct.pack(">h", len(client_id)) + client_id.encode()
        if flexible:
            out += b"\x00"
        return out

    def request(self, api_key: int, version: int, body: Any) -> None:
        cls = load_request_schema(api_key, version)
        buf = io.BytesIO()
        entity_writer(cls)(buf, body)
        self.send_frame(self.header(api_key, version, flexible=cls.__flexible__) + buf.getvalue())

    def recv_frame(self) -> bytes | None:
        """One response frame, or None if the server closed the connection."""
        head = self._recv_exact(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def response(self, api_key: int, version: int) -> Any:
        frame = self.recv_frame()
        if frame is None:
            return None
        cls = load_response_schema(api_key, version)
        (corr,) = struct.unpack_from(">i", frame, 0)
        assert corr == self.corr, (corr, self.corr)
        pos = 4
        if cls.__flexible__ and api_key != 18:
            pos += 1
        obj, _ = entity_reader(cls)(frame, pos)
        return obj

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False


def api_versions_v0(conn: RawConn, version: int = 0) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Send ApiVersions at ``version`` with an empty body; parse the answer as v0 format."""
    conn.send_frame(conn.header(18, version, flexible=False))
    frame = conn.recv_frame()
    assert frame is not None, "connection closed"
    corr, err, n = struct.unpack_from(">ihi", frame, 0)
    apis = [struct.unpack_from(">hhh", frame, 10 + 6 * i) for i in range(n)]
    return corr, err, apis


def ask(address: str, api_key: int, version: int, body: Any) -> Any:
    """One request on a fresh connection to ``host:port``: its response (None if closed)."""
    conn = RawConn(address, timeout=10.0)
    try:
        return conn.call(api_key, version, body)
    finally:
        conn.close()
