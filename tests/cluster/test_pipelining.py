"""Requests pipelined on one connection: OffsetCommits run concurrently but take effect and are
answered in the order they were sent; other requests wait for everything before them."""

from __future__ import annotations

import socket
import struct

from bench.cluster3 import commit_error, offset_commit_v2, offset_fetch_v2, parse_offset_fetch_v2
from bench.common import create_topic


def _read_frames(sock: socket.socket, n: int) -> list[bytes]:
    buf = b""
    out: list[bytes] = []
    while len(out) < n:
        chunk = sock.recv(1 << 16)
        assert chunk, "connection closed"
        buf += chunk
        while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
            size = struct.unpack(">i", buf[:4])[0]
            out.append(buf[4:4 + size])
            buf = buf[4 + size:]
    return out


def test_pipelined_commits_apply_and_answer_in_order(bootstrap: str) -> None:
    create_topic(bootstrap, "pipe", 1)
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        # 200 commits of increasing offsets, then a fetch (not pipelined: answered after all of them),
        # all written before reading anything
        frames = [offset_commit_v2(i, "pipe-group", "pipe", 0, i) for i in range(1, 201)]
        frames.append(offset_fetch_v2(201, "pipe-group", "pipe", 0))
        sock.sendall(b"".join(frames))
        answers = _read_frames(sock, 201)
    correlation_ids = [struct.unpack(">i", a[:4])[0] for a in answers]
    assert correlation_ids == list(range(1, 202))
    assert all(commit_error(a) == 0 for a in answers[:200])
    assert parse_offset_fetch_v2(answers[200]) == (0, 0, 200)  # the last commit sent is the one kept
