"""TLS on the Raft port (``raft_tls``): what the hub writes to its sockets is TLS, the hub's own
handshake included, and a peer is admitted only with a certificate of the cluster's CA.

Raft frames carry the logs, the metadata log's SCRAM stored and server keys among them: with
only the cluster secret they were authenticated but readable by anyone on the path.
"""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from cluster.config import ConfigError, load_config
from cluster.security.tls import raft_tls
from cluster.tools.local_cluster import plan
from cluster.tools.secure_setup import make_material, prepare
from replication.hub import MAGIC, NONCE_BYTES, RaftHub, RaftTLS
from tests.replication.test_hub import Recorder, addr, pump

SECRET = "hub-tls-test-secret"


def _tls(directory: Path) -> RaftTLS:
    """The Raft port's TLS as a node builds it from its settings, with a CA of its own."""
    ca, keystore, _ = make_material(directory)
    cfg = load_config(None, env={}, overrides={"ssl.keystore.location": str(keystore),
                                               "ssl.truststore.location": str(ca), "raft_tls": True})
    tls = raft_tls(cfg)
    assert tls is not None
    return tls


def _pair(tls_a: RaftTLS | None, tls_b: RaftTLS | None) -> tuple[RaftHub, RaftHub, Recorder, Recorder]:
    a, b = RaftHub(addr(), SECRET, retry=0.05, tls=tls_a), RaftHub(addr(), SECRET, retry=0.05, tls=tls_b)
    ra, rb = Recorder(), Recorder()
    a.attach("g", ra, [b.listen])
    b.attach("g", rb, [a.listen])
    return a, b, ra, rb


def _run(hubs: list[RaftHub], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for h in hubs:
            h.maintain(time.monotonic())
            h.process()
            h.flush()
        time.sleep(0.01)


def test_raft_frames_and_the_handshake_travel_inside_tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = bytearray()
    try_write = RaftHub._try_write

    def spy(self: RaftHub, conn: Any) -> None:  # every byte a hub hands its sockets
        written.extend(conn.wbuf)
        try_write(self, conn)

    monkeypatch.setattr(RaftHub, "_try_write", spy)
    key = b"scram-stored-key:" + bytes(range(32))
    tls = _tls(tmp_path / "ca")
    for with_tls in (False, True):  # without TLS first: the spy does see what is sent
        written.clear()
        a, b, _ra, rb = _pair(tls if with_tls else None, tls if with_tls else None)
        try:
            pump([a, b], lambda: bool(a.connected() and b.connected()))  # noqa: B023
            assert a.send(b.listen, "g", {"type": "append_entries", "entries": [[key, 2, 1]]})
            pump([a, b], lambda: any(k == "msg" for k, _, _ in rb.events))  # noqa: B023
            assert [m for k, _, m in rb.events if k == "msg"][0]["entries"][0][0] == key
        finally:
            a.close()
            b.close()
        if with_tls:
            assert key not in written and MAGIC not in written
        else:
            assert key in written and MAGIC in written


def test_the_raft_port_with_tls_admits_no_peer_without_a_certificate_of_its_ca(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kcoord.raft.hub")
    ours, theirs = _tls(tmp_path / "ours"), _tls(tmp_path / "theirs")
    for other in (theirs, None):  # a certificate of another CA; no TLS at all (the secret is right)
        a, b, _ra, _rb = _pair(ours, other)
        try:
            _run([a, b], 1.0)
            assert not a.connected() and not b.connected(), f"other={other}"
            host, port = a.listen.rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=2) as s:
                s.sendall(len(MAGIC + bytes(NONCE_BYTES) + b"x:1").to_bytes(4, "big") + MAGIC + bytes(NONCE_BYTES)
                          + b"x:1")  # the hub's plain hello
                s.settimeout(0.2)
                got = b""
                deadline = time.monotonic() + 1.0
                while time.monotonic() < deadline:
                    a.process()
                    try:
                        chunk = s.recv(4096)
                    except TimeoutError:
                        continue
                    if not chunk:
                        break
                    got += chunk
                assert MAGIC not in got  # no challenge: nothing of the hub's handshake outside TLS
        finally:
            a.close()
            b.close()
    assert any("event=raft_tls_refused" in r.getMessage() for r in caplog.records)


def test_up_secure_turns_on_tls_on_the_raft_port(tmp_path: Path) -> None:
    layout = plan(3, 30500, 21000, tmp_path)
    setup = prepare(tmp_path, layout)
    cfg = load_config(None, env={}, overrides={**setup.settings, **setup.per_node[0], **setup.private})
    assert cfg.raft_tls and raft_tls(cfg) is not None
    with pytest.raises(ConfigError, match="raft_tls"):
        load_config(None, env={}, overrides={"raft_tls": True, "ssl.keystore.location": str(tmp_path / "x.pem")})
