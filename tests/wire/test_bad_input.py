"""Malformed and hostile input: each bad connection gets its error or is closed, while a
concurrent healthy client keeps succeeding and the server stays up."""

from __future__ import annotations

import struct
import threading
import time

import pytest
from kio.schema.errors import ErrorCode

from tests.wire.raw import RawConn, api_versions_v0

pytestmark = pytest.mark.cluster


class HealthyClients:
    """Two healthy clients in background threads: a raw ApiVersions loop and a
    confluent-kafka AdminClient.list_topics loop. Records every failure."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.stop = threading.Event()
        self.ok = {"raw": 0, "admin": 0}
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._raw, daemon=True),
                        threading.Thread(target=self._admin, daemon=True)]

    def __enter__(self) -> HealthyClients:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(10)

    def _raw(self) -> None:
        conn = RawConn(self.bootstrap)
        try:
            while not self.stop.is_set():
                _, err, apis = api_versions_v0(conn)
                if err != 0 or not any(k == 18 for k, _, _ in apis):
                    self.errors.append(f"raw ApiVersions error={err}")
                self.ok["raw"] += 1
                time.sleep(0.01)
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"raw: {e!r}")
        finally:
            conn.close()

    def _admin(self) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        while not self.stop.is_set():
            try:
                md = admin.list_topics(timeout=5)
                assert md.cluster_id
                self.ok["admin"] += 1
            except Exception as e:  # noqa: BLE001
                self.errors.append(f"admin: {e!r}")
            time.sleep(0.05)


def expect_closed(bootstrap: str, payload: bytes, *, shutdown_write: bool = False) -> None:
    conn = RawConn(bootstrap)
    try:
        conn.send_raw(payload)
        if shutdown_write:
            import socket

            conn.sock.shutdown(socket.SHUT_WR)
        assert conn.closed_by_peer(), "server did not close the connection"
    finally:
        conn.close()


def test_bad_input_isolated(kcoord_node) -> None:
    bs = kcoord_node.bootstrap
    with HealthyClients(bs) as healthy:
        time.sleep(0.5)
        # 1. garbage (an HTTP request: its "length" is ~1.2 GB > socket.request.max.bytes)
        expect_closed(bs, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        # 2. random-ish garbage with a small valid length but no valid header
        expect_closed(bs, struct.pack(">i", 3) + b"\xff\xfe\xfd")
        # 3. truncated frame, then the client half-closes
        expect_closed(bs, struct.pack(">i", 100) + b"\x00\x12\x00\x00" + b"x" * 10, shutdown_write=True)
        # 4. truncated size prefix
        expect_closed(bs, b"\x00\x00", shutdown_write=True)
        # 5. length above the max (default 104857600)
        expect_closed(bs, struct.pack(">i", 104857601) + b"\x00" * 16)
        # 6. negative length
        expect_closed(bs, struct.pack(">i", -5) + b"\x00" * 16)
        # 7. unknown API keys: one kio does not know, one not registered here (AlterReplicaLogDirs)
        for key in (999, 34):
            c = RawConn(bs)
            c.send_frame(c.header(key, 0, flexible=False))
            assert c.closed_by_peer(), f"api key {key} did not close"
            c.close()
        # 8. ApiVersions v99 → v0-format UNSUPPORTED_VERSION with the API list
        c = RawConn(bs)
        corr, err, apis = api_versions_v0(c, version=99)
        assert corr == c.corr
        assert err == ErrorCode.unsupported_version.value
        keys = {k: (lo, hi) for k, lo, hi in apis}
        assert keys[18] == (0, 4) and 0 in keys and 1 in keys and 3 in keys
        # ... and the same connection still works afterwards
        _, err, _ = api_versions_v0(c, version=0)
        assert err == 0
        c.close()
        # 9. Metadata v99: no schema for that version → closed
        c = RawConn(bs)
        c.send_frame(c.header(3, 99, flexible=False))
        assert c.closed_by_peer()
        c.close()
        # 10. Fetch v13 (kio knows it, we serve 4–12) → Fetch error response UNSUPPORTED_VERSION
        from kio.schema.fetch.v13.request import FetchRequest

        c = RawConn(bs)
        c.request(1, 13, FetchRequest(replica_id=-1, max_wait=__import__("datetime").timedelta(0), min_bytes=1,
                                      max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                                      topics=(), forgotten_topics_data=(), rack_id=""))
        resp = c.response(1, 13)
        assert resp is not None and resp.error_code == ErrorCode.unsupported_version
        c.close()
        # 11. Produce v1: advertised (for librdkafka) but not served, no schema → closed
        c = RawConn(bs)
        c.send_frame(c.header(0, 1, flexible=False) + b"\x00\x01\x00\x00\x03\xe8\x00\x00\x00\x00")
        assert c.closed_by_peer()
        c.close()
        # 12. a body that does not parse: Metadata v1 claiming 5 topics, none follow
        c = RawConn(bs)
        c.send_frame(c.header(3, 1, flexible=False) + struct.pack(">i", 5))
        assert c.closed_by_peer()
        c.close()
        # 13. a flexible header whose tagged fields run past the frame
        c = RawConn(bs)
        c.send_frame(struct.pack(">hhih", 3, 12, 1, -1) + b"\x05\x01")
        assert c.closed_by_peer()
        c.close()
        time.sleep(0.5)
    assert not healthy.errors, healthy.errors
    assert healthy.ok["raw"] > 20 and healthy.ok["admin"] > 3, healthy.ok
    assert kcoord_node.alive()
    log = kcoord_node.log_text()
    assert "event=bad_frame" in log and "event=unknown_api_key" in log and "event=bad_request_body" in log


def test_api_versions_advertises_registered(kcoord_node) -> None:
    c = RawConn(kcoord_node.bootstrap)
    _, err, apis = api_versions_v0(c)
    c.close()
    assert err == 0
    got = {k: (lo, hi) for k, lo, hi in apis}
    assert got[0] == (0, 12)  # Produce: v0–2 advertised for librdkafka, rejected; v12 transaction version 2
    assert got[1] == (4, 12) and got[2] == (1, 11) and got[3] == (0, 13)
    assert got[10] == (0, 6) and got[22] == (0, 5)
    # both transaction protocol versions: AddPartitionsToTxn v4-5 are partition leaders' batches
    # (clients send v3 at most), EndTxn and TxnOffsetCommit v5 are KIP-890's version 2,
    # WriteTxnMarkers v2 names a marker's version; DescribeProducers v0
    assert (got[24], got[25], got[26], got[27], got[28], got[61], got[65], got[66]) == (
        (0, 5), (0, 4), (0, 5), (1, 2), (0, 5), (0, 0), (0, 0), (0, 1))
