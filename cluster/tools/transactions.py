"""``kcoord transactions``: what Kafka's ``kafka-transactions.sh`` does for listing and describing.

``list`` asks every broker (ListTransactions; ``--state``, ``--producer-id``, ``--duration-filter``
as Kafka's tool names them) and prints ``TransactionalId Coordinator ProducerId TransactionState``;
``describe --transactional-id ID`` finds the id's coordinator (FindCoordinator, key type 1) and
prints its DescribeTransactions answer with Kafka's columns. confluent-kafka's AdminClient has
neither API, so the requests go over the Kafka protocol directly (``cluster.peer_client``).
Exit status: 0 on success, 1 when something failed.
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import time
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.peer_client import PeerClient, PeerRequestError
from cluster.tools.common import ToolError, add_common, admin, error, parse_host_port, print_table, timeout_s

COMMAND = "transactions"
FIND_COORDINATOR, DESCRIBE_TXNS, LIST_TXNS = 10, 65, 66


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(COMMAND, help="list and describe transactions (kafka-transactions.sh)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common(p)
    sub = p.add_subparsers(dest="action", required=True)
    ls = sub.add_parser("list", help="every transactional id the brokers coordinate")
    ls.add_argument("--state", action="append", default=[], metavar="STATE",
                    help="only these states (Empty, Ongoing, PrepareCommit, ...); repeatable")
    ls.add_argument("--producer-id", action="append", type=int, default=[], metavar="ID", help="repeatable")
    ls.add_argument("--duration-filter", type=int, default=-1, metavar="MS",
                    help="only transactions open longer than this")
    d = sub.add_parser("describe", help="one transactional id's state at its coordinator")
    d.add_argument("--transactional-id", required=True)


def _brokers(args: argparse.Namespace) -> dict[int, tuple[str, int]]:
    md = admin(args).list_topics(timeout=timeout_s(args))
    return {b.id: (b.host, b.port) for b in md.brokers.values()}


async def _list(args: argparse.Namespace) -> list[tuple[str, int, int, str]]:
    from kio.schema.list_transactions.v1.request import ListTransactionsRequest

    client = PeerClient("kcoord-tools", timeout_s(args))
    rows = []
    try:
        for node, (host, port) in sorted(_brokers(args).items()):
            resp = await client.request(host, port, LIST_TXNS, 1, ListTransactionsRequest(
                state_filters=tuple(args.state), producer_id_filters=tuple(args.producer_id),
                duration_filter=args.duration_filter))
            if int(resp.error_code) != 0:
                raise ToolError(f"broker {node}: {resp.error_code.name}")
            if resp.unknown_state_filters:
                raise ToolError(f"unknown states: {', '.join(resp.unknown_state_filters)}")
            rows += [(t.transactional_id, node, int(t.producer_id), t.transaction_state)
                     for t in resp.transaction_states]
    finally:
        client.close()
    return sorted(rows)


async def _describe(args: argparse.Namespace) -> tuple[int, Any]:
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
    from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest

    client = PeerClient("kcoord-tools", timeout_s(args))
    tid = args.transactional_id
    try:
        host, port = parse_host_port(args.bootstrap_server.split(",")[0])
        found = await client.request(host, port, FIND_COORDINATOR, 3,
                                     FindCoordinatorRequest(key=tid, key_type=1))  # type: ignore[arg-type]
        if int(found.error_code) != 0:
            raise ToolError(f"no coordinator for {tid!r}: {found.error_code.name}")
        frame, pos = await client.request_raw(found.host, int(found.port), DESCRIBE_TXNS, 0,
                                              DescribeTransactionsRequest(transactional_ids=(tid,)))
    finally:
        client.close()
    (state,) = _described(frame, pos)
    if state.error_code != 0:
        raise ToolError(f"{tid!r}: {ErrorCode(state.error_code).name}")
    return int(found.node_id), state


@dataclass(frozen=True)
class Described:
    error_code: int
    transactional_id: str
    transaction_state: str
    timeout_ms: int
    start_ms: int
    producer_id: int
    producer_epoch: int
    partitions: list[tuple[str, int]]


def _described(frame: bytes, pos: int) -> list[Described]:
    """DescribeTransactions v0's answer read by hand: kio refuses the start time -1 that Kafka
    sends for a transaction not started."""
    def uvarint() -> int:
        nonlocal pos
        shift = value = 0
        while True:
            b = frame[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def fixed(fmt: str) -> int:
        nonlocal pos
        (v,) = struct.unpack_from(fmt, frame, pos)
        pos += struct.calcsize(fmt)
        return int(v)

    def string() -> str:
        nonlocal pos
        n = uvarint() - 1
        pos += n
        return frame[pos - n:pos].decode()

    def skip_tags() -> None:
        nonlocal pos
        for _ in range(uvarint()):
            uvarint()
            pos += uvarint()

    fixed(">i")  # throttle time
    out = []
    for _ in range(uvarint() - 1):
        error_code, tid, state = fixed(">h"), string(), string()
        timeout, start, pid, epoch = fixed(">i"), fixed(">q"), fixed(">q"), fixed(">h")
        partitions = []
        for _ in range(uvarint() - 1):
            topic = string()
            partitions += [(topic, fixed(">i")) for _ in range(uvarint() - 1)]
            skip_tags()
        skip_tags()
        out.append(Described(error_code, tid, state, timeout, start, pid, epoch, partitions))
    return out


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "list":
            rows = asyncio.run(_list(args))
            print_table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows)
            return 0
        coordinator, s = asyncio.run(_describe(args))
    except (ToolError, PeerRequestError) as e:
        error(str(e))
        return 1
    start = s.start_ms
    parts = ",".join(f"{t}-{p}" for t, p in s.partitions)
    print_table(["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                 "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TransactionTimeoutMs", "TopicPartitions"],
                [(coordinator, s.transactional_id, int(s.producer_id), int(s.producer_epoch), s.transaction_state,
                  start if start >= 0 else "None", int(time.time() * 1000) - start if start >= 0 else "None",
                  s.timeout_ms, parts)])
    return 0
