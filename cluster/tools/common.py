"""Shared pieces of the operators' tools: common options, admin clients, tables, raw requests."""

from __future__ import annotations

import argparse
import asyncio
import socket
import struct
import sys
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


class ToolError(Exception):
    """A failure to report as ``Error: <message>`` with exit code 1."""


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT[,HOST:PORT]",
                        help=f"where to connect (default {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties file (key=value lines, librdkafka names), e.g. for TLS/SASL")
    parser.add_argument("--timeout", type=int, default=15000, metavar="MS",
                        help="timeout of each request in ms (default 15000)")


def client_config(args: argparse.Namespace) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": args.bootstrap_server, "client.id": "kcoord-tools",
                            "socket.timeout.ms": max(1000, args.timeout),
                            # a tool must not create the topics it looks at (producer-type handles default to true)
                            "allow.auto.create.topics": False,
                            # failures surface as exceptions; librdkafka's own log only with --log-level DEBUG
                            "log_level": 7 if str(getattr(args, "log_level", "")).upper() == "DEBUG" else 0}
    path = getattr(args, "command_config", None)
    if path:
        with open(path) as fh:
            for raw in fh:
                line = raw.strip()
                if not line or line.startswith(("#", "!")) or "=" not in line:
                    continue
                k, v = line.split("=", 1)
                conf[k.strip()] = v.strip()
    return conf


def admin(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_config(args))


def admin_class(name: str) -> Any:
    """A class of ``confluent_kafka.admin`` (``NewTopic``, ``OffsetSpec`` ...), untyped on purpose."""
    from confluent_kafka import admin as kadmin

    return getattr(kadmin, name)


def timeout_s(args: argparse.Namespace) -> float:
    return float(args.timeout) / 1000.0


def console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    # Not a terminal (pipe, test): never wrap or truncate columns.
    width = None if stream.isatty() else 100_000
    return Console(file=stream, width=width, highlight=False, soft_wrap=True)


def print_table(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A borderless, left-aligned table like Kafka's tools print, rendered with rich."""
    table = Table(box=box.SIMPLE_HEAD if sys.stdout.isatty() else None, show_edge=False, pad_edge=False,
                  header_style="bold")
    for col in columns:
        table.add_column(col, no_wrap=True, overflow="ignore")
    for row in rows:
        table.add_row(*(Text(cell_text(v)) for v in row))
    out = console()
    with out.capture() as cap:
        out.print(table)
    text = "\n".join(line.rstrip() for line in cap.get().splitlines())
    print(text)


def cell_text(v: object) -> str:
    if v is None:
        return "-"
    return str(v)


def kafka_error(e: BaseException) -> tuple[str, str]:
    """(error name, message) of a KafkaException or any other exception."""
    kerr: Any = e.args[0] if e.args else None
    if kerr is not None and hasattr(kerr, "name") and hasattr(kerr, "str"):
        return str(kerr.name()), str(kerr.str())
    return type(e).__name__, str(e)


def error(msg: str) -> None:
    print(f"Error: {msg}", file=sys.stderr)


def failed(e: Exception) -> int:
    """Report a tool's failure (a ToolError's message, else the admin client's error name and
    message) as ``Error: ...``; the exit status, 1."""
    if isinstance(e, ToolError):
        error(str(e))
    else:
        name, msg = kafka_error(e)
        error(f"{name}: {msg}")
    return 1


def warn(msg: str) -> None:
    print(msg, file=sys.stderr)


def parse_host_port(addr: str) -> tuple[str, int]:
    host, _, port = addr.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ToolError(f"bad address {addr!r}, expected HOST:PORT")
    return host.strip("[]"), int(port)


def result(future: Any, args: argparse.Namespace) -> Any:
    return future.result(timeout=timeout_s(args) + 5)


# ------------------------------------------------------------------ raw requests
#
# confluent-kafka's Python AdminClient has no OffsetDelete (API 47), so ``groups delete-offsets``
# sends that one request itself. OffsetDelete v0 is not a flexible version: request header v1,
# response header v0, plain (non-compact) strings and arrays.


def _str(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> Any:
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from ``sock`` (ConnectionError if it closes first)."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    try:
        return recv_exact(sock, n)
    except ConnectionError as e:
        raise ToolError(str(e)) from None


def raw_request(host: str, port: int, api_key: int, api_version: int, body: bytes, timeout: float) -> bytes:
    """Send one non-flexible request, return the response body (after the correlation id)."""
    correlation = 1
    header = struct.pack(">hhi", api_key, api_version, correlation) + _str("kcoord-tools")
    frame = header + body
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        data = _recv_exact(sock, size)
    (got,) = struct.unpack_from(">i", data, 0)
    if got != correlation:
        raise ToolError(f"unexpected correlation id {got}")
    return data[4:]


def offset_delete(host: str, port: int, group: str, topics: dict[str, list[int]],
                  timeout: float) -> tuple[int, dict[tuple[str, int], int]]:
    """OffsetDelete v0 to the group's coordinator: (top-level error code, {(topic, p): error code})."""
    body = _str(group) + struct.pack(">i", len(topics))
    for name, parts in topics.items():
        body += _str(name) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    r = _Reader(raw_request(host, port, 47, 0, body, timeout))
    top = r.take(">h")
    r.take(">i")  # throttle_time_ms
    out: dict[tuple[str, int], int] = {}
    for _ in range(r.take(">i")):
        name = r.string() or ""
        for _ in range(r.take(">i")):
            p = r.take(">i")
            out[(name, p)] = r.take(">h")
    return top, out


def consumer_group_describe(host: str, port: int, group: str, timeout: float) -> Any:
    """ConsumerGroupDescribe v0 to the group's coordinator, for what confluent-kafka's admin client
    does not expose (group, target and member epochs): kio's DescribedGroup."""
    from cluster.apis.common import req_mod
    from cluster.peer_client import PeerClient

    async def ask() -> Any:
        client = PeerClient("kcoord-tools", timeout)
        try:
            body = req_mod(69, 0).ConsumerGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False)
            return (await client.request(host, port, 69, 0, body)).groups[0]
        finally:
            client.close()

    return asyncio.run(ask())


# Kafka's error names and messages for the codes the tools report.
ERROR_MESSAGES: dict[int, tuple[str, str]] = {
    0: ("NONE", ""),
    3: ("UNKNOWN_TOPIC_OR_PARTITION", "This server does not host this topic-partition."),
    14: ("COORDINATOR_LOAD_IN_PROGRESS", "The coordinator is loading and hence can't process requests."),
    15: ("COORDINATOR_NOT_AVAILABLE", "The coordinator is not available."),
    16: ("NOT_COORDINATOR", "This is not the correct coordinator."),
    24: ("INVALID_GROUP_ID", "The configured groupId is invalid."),
    30: ("GROUP_AUTHORIZATION_FAILED", "Group authorization failed."),
    68: ("NON_EMPTY_GROUP", "The group is not empty."),
    69: ("GROUP_ID_NOT_FOUND", "The group id does not exist."),
    86: ("GROUP_SUBSCRIBED_TO_TOPIC", "The consumer group is actively subscribed to the topic"),
}


def error_text(code: int) -> str:
    name, msg = ERROR_MESSAGES.get(code, (f"ERROR_{code}", f"error code {code}"))
    return f"{name}: {msg}" if msg else name
