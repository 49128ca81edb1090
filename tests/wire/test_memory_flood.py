"""A live node under clients that hold memory: many connections each sending the start of a
maximal frame and never the rest, and many that send requests and never read the answers. The
node's RSS stays under queued.max.request.bytes plus its normal footprint, a well-behaved client
keeps committing meanwhile, and the node is back to normal when they go. The default set runs a
bounded version; the slow one runs 200 of each with 100 MiB frames against the default budget."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import pytest

from tests.cluster.harness import NodeProcess
from tests.wire.raw import RawConn, api_versions_v0

pytestmark = pytest.mark.cluster


def _rss_mb(node: NodeProcess) -> float:
    assert node.proc is not None
    for line in Path(f"/proc/{node.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _send_what_fits(sock: socket.socket, data: bytes) -> int:
    sock.setblocking(False)
    sent = 0
    try:
        while sent < len(data):
            sent += sock.send(data[sent:sent + 1 << 20])
    except BlockingIOError:
        pass
    return sent


def _commit_rounds(bootstrap: str, seconds: float) -> int:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "flood-bystander", "enable.auto.commit": False})
    done, offset, until = 0, 0, time.monotonic() + seconds
    try:
        while time.monotonic() < until:
            offset += 1
            try:
                out = c.commit(offsets=[TopicPartition("flood", 0, offset)], asynchronous=False)
            except KafkaException as e:
                print("commit failed:", e)
                continue
            if out and out[0].error is None:
                done += 1
    finally:
        c.close()
    return done


def _flood(tmp_path: Path, *, conns: int, frame: int, budget_mb: int, body_mb: int) -> None:
    node = NodeProcess(tmp_path, settings={"queued.max.request.bytes": budget_mb << 20,
                                           "socket.request.max.bytes": frame + 4}).start()
    held: list[socket.socket] = []
    try:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic("flood", 1, 1)])["flood"].result(10)
        assert _commit_rounds(node.bootstrap, 1.0) > 0
        base = _rss_mb(node)
        host, port = node.bootstrap.rsplit(":", 1)
        body = b"x" * (body_mb << 20)
        for _ in range(conns):  # the start of a maximal Produce frame, never finished
            s = socket.create_connection((host, int(port)))
            _send_what_fits(s, struct.pack(">ihh", frame, 0, 9) + body)
            held.append(s)
        request = struct.pack(">i", 14) + struct.pack(">hhih", 18, 0, 1, 4) + b"slow"  # ApiVersions v0
        for _ in range(conns):  # requests whose answers are never read
            s = socket.create_connection((host, int(port)))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            _send_what_fits(s, request * 300)
            held.append(s)
        for _ in range(3):  # the senders push again what the node has read meanwhile
            time.sleep(0.5)
            for s in held[:conns]:
                _send_what_fits(s, body)
        peak = _rss_mb(node)
        committed = _commit_rounds(node.bootstrap, 2.0)
        peak = max(peak, _rss_mb(node))
        print(f"flood: {conns} partial frames of {frame >> 20} MiB + {conns} non-readers: RSS base {base:.0f} MB, "
              f"peak {peak:.0f} MB, budget {budget_mb} MB, {committed} commits in 2 s meanwhile")
        assert committed > 0, "a well-behaved client could not commit during the flood"
        assert peak < base + budget_mb + 64, f"RSS {peak:.0f} MB: base {base:.0f} MB + budget {budget_mb} MB"
        assert node.alive()
    finally:
        for s in held:
            s.close()
    time.sleep(0.5)
    c = RawConn(node.bootstrap)
    try:
        assert api_versions_v0(c)[1] == 0 and _commit_rounds(node.bootstrap, 0.5) > 0
    finally:
        c.close()
        node.kill()


def test_partial_frames_and_unread_answers_are_bounded(tmp_path: Path) -> None:
    _flood(tmp_path, conns=40, frame=16 << 20, budget_mb=64, body_mb=4)


@pytest.mark.slow
def test_200_partial_frames_and_200_non_readers_are_bounded(tmp_path: Path) -> None:
    _flood(tmp_path, conns=200, frame=100 << 20, budget_mb=256, body_mb=16)
