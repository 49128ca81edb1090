"""``kcoord status``: nodes up or down, partitions led per node, groups per state.

Only the Kafka protocol is used, so this works against Apache Kafka too:

* nodes = the brokers in the Metadata answer, the addresses given with ``--bootstrap-server`` and
  every node id named as a replica; each is probed with its own Metadata request (``up``/``down``;
  a replica id with no known address is ``down``);
* partitions led = Metadata leaders of every topic, ``__consumer_offsets`` counted apart (its leader
  is the group coordinator of the groups hashed to that partition), each partition's leader as
  most nodes' own Metadata answers name it (a node cut off from the others names none);
* groups per state = ListGroups.

Followers' replication lag is not visible through the Kafka protocol (Metadata only gives the ISR);
the table shows ``n/a`` and the count of under-replicated partitions (ISR smaller than replicas).
The cluster metadata quorum follows, as ``kafka-metadata-quorum describe --replication`` shows it
(``cluster.tools.quorum``; DescribeQuorum on a PLAINTEXT listener): each voter and observer with
its directory id, log end offset and lag.
Exit status: 0 if every node is up, 1 otherwise.
"""

from __future__ import annotations

import argparse
import concurrent.futures
from dataclasses import dataclass, field
from typing import Any

from cluster.tools import quorum
from cluster.tools.common import (
    ToolError,
    add_common,
    admin,
    client_config,
    error,
    parse_host_port,
    print_table,
    result,
    timeout_s,
)
from cluster.tools.groups import kafka_state

COMMAND = "status"
OFFSETS_TOPIC = "__consumer_offsets"


@dataclass
class NodeRow:
    node_id: int | None
    address: str | None
    up: bool = False
    data_led: int = 0
    offsets_led: int = 0
    replicas: int = 0
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(COMMAND, help="nodes up/down, partitions led per node, groups per state",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common(p)
    p.add_argument("--probe-timeout", type=int, default=3000, metavar="MS",
                   help="how long a node may take to answer its probe (default 3000)")


def _probe(args: argparse.Namespace, address: str) -> tuple[bool, int | None, str, dict[tuple[str, int], int]]:
    """Metadata to one address only: (up, the node id it says it is, error, the partition
    leaders it knows)."""
    from confluent_kafka.admin import AdminClient

    conf = client_config(args)
    conf["bootstrap.servers"] = address
    leaders: dict[tuple[str, int], int] = {}
    try:
        adm = AdminClient(conf)
        md = adm.list_topics(timeout=args.probe_timeout / 1000)
        offsets = adm.list_topics(topic=OFFSETS_TOPIC, timeout=args.probe_timeout / 1000).topics
    except Exception as e:  # noqa: BLE001 - a down node is a result, not a failure
        return False, None, str(e), leaders
    for name, t in {**md.topics, **offsets}.items():
        if t.error is None:
            leaders.update({(name, p.id): p.leader for p in t.partitions.values() if p.leader >= 0})
    return True, md.orig_broker_id if md.orig_broker_id >= 0 else None, "", leaders


def _leaders_by_majority(views: list[dict[tuple[str, int], int]]) -> dict[tuple[str, int], int]:
    """Each partition's leader as most nodes see it: a node cut off from the others names
    no leaders (or stale ones) and must not hide what the rest of the cluster agrees on."""
    votes: dict[tuple[str, int], dict[int, int]] = {}
    for view in views:
        for key, leader in view.items():
            votes.setdefault(key, {})[leader] = votes.setdefault(key, {}).get(leader, 0) + 1
    return {key: max(v.items(), key=lambda kv: (kv[1], -kv[0]))[0] for key, v in votes.items()}


def collect(args: argparse.Namespace) -> tuple[list[NodeRow], dict[str, int], int, int, str | None]:
    adm = admin(args)
    md = adm.list_topics(timeout=timeout_s(args))
    topics = dict(md.topics)
    if OFFSETS_TOPIC not in topics:
        extra = adm.list_topics(topic=OFFSETS_TOPIC, timeout=timeout_s(args)).topics.get(OFFSETS_TOPIC)
        if extra is not None and extra.error is None and extra.partitions:
            topics[OFFSETS_TOPIC] = extra
    rows: dict[int, NodeRow] = {b.id: NodeRow(b.id, f"{b.host}:{b.port}") for b in md.brokers.values()}
    for t in topics.values():
        for p in t.partitions.values() if t.error is None else []:
            for r in p.replicas:
                rows.setdefault(r, NodeRow(r, None))
    known = {r.address for r in rows.values()}
    for addr in args.bootstrap_server.split(","):
        host, port = parse_host_port(addr)
        if f"{host}:{port}" not in known:
            rows[-len(rows) - 1000] = NodeRow(None, f"{host}:{port}")
    views: list[dict[tuple[str, int], int]] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        probes = {k: pool.submit(_probe, args, r.address) for k, r in rows.items() if r.address}
        for k, fut in probes.items():
            up, node_id, err, leaders = fut.result()
            rows[k].up, rows[k].error = up, err
            views.append(leaders)
            if rows[k].node_id is None and node_id is not None:
                rows[k].node_id = node_id
    leader_of = _leaders_by_majority(views)
    under_replicated = 0
    leaderless = 0
    for name, t in topics.items():
        if t.error is not None:
            continue
        for p in t.partitions.values():
            for r in p.replicas:
                rows[r].replicas += 1
            if len(p.isrs) < len(p.replicas):
                under_replicated += 1
            leader = leader_of.get((name, p.id), p.leader)
            if leader < 0:
                leaderless += 1
                continue
            row = rows.setdefault(leader, NodeRow(leader, None))
            if name == OFFSETS_TOPIC:
                row.offsets_led += 1
            else:
                row.data_led += 1
    # A bootstrap address that turned out to be a known node: keep one row.
    merged: dict[object, NodeRow] = {}
    for r in rows.values():
        key: object = r.node_id if r.node_id is not None else r.address
        if key in merged:
            merged[key].up = merged[key].up or r.up
        else:
            merged[key] = r
    groups: dict[str, int] = {}
    groups_error: str | None = None
    try:
        res = result(adm.list_consumer_groups(request_timeout=timeout_s(args)), args)
        for g in res.valid:
            s = kafka_state(g.state)
            groups[s] = groups.get(s, 0) + 1
        if res.errors:
            groups_error = "; ".join(str(e) for e in res.errors)
    except Exception as e:  # noqa: BLE001
        groups_error = str(e)
    nodes = sorted(merged.values(), key=lambda r: (r.node_id is None, r.node_id or 0, r.address or ""))
    return nodes, groups, under_replicated, leaderless, groups_error


def run(args: argparse.Namespace) -> int:
    try:
        nodes, groups, under, leaderless, groups_error = collect(args)
    except ToolError as e:
        error(str(e))
        return 1
    except Exception as e:  # noqa: BLE001
        from confluent_kafka import KafkaException

        if isinstance(e, KafkaException | TimeoutError | OSError):
            error(f"cannot reach the cluster at {args.bootstrap_server}: {e}")
            return 1
        raise
    print_table(["NODE", "ADDRESS", "STATUS", "DATA-PARTITIONS-LED", "OFFSETS-PARTITIONS-LED", "REPLICAS",
                 "FOLLOWER-LAG"],
                [(n.node_id if n.node_id is not None else "?", n.address or "unknown", "up" if n.up else "down",
                  n.data_led, n.offsets_led, n.replicas, "n/a") for n in nodes])
    print()
    print(f"Under-replicated partitions: {under}    Partitions without a leader: {leaderless}")
    print("Follower lag: n/a (the Kafka protocol does not expose a partition's replication lag, only the ISR; "
          "the metadata quorum's is below)")
    print()
    if groups_error:
        error(f"listing groups: {groups_error}")
    print_table(["GROUP-STATE", "GROUPS"], sorted(groups.items()))
    print()
    _print_quorum(args, nodes)
    return 0 if all(n.up for n in nodes) else 1


def _print_quorum(args: argparse.Namespace, nodes: list[NodeRow]) -> None:
    protocol = str(client_config(args).get("security.protocol", "PLAINTEXT")).upper()
    if protocol != "PLAINTEXT":
        print(f"Metadata quorum: not shown (it is asked on a PLAINTEXT listener; this one is {protocol})")
        return
    up = [n.address for n in nodes if n.up and n.address]
    if not up:
        print("Metadata quorum: no node up to ask")
        return
    host, port = parse_host_port(up[0])
    q = quorum.describe(host, port, timeout_s(args))
    if isinstance(q, str):
        print(f"Metadata quorum: {q}")
        return
    print(f"Metadata quorum: leader {q.leader_id}, epoch {q.epoch}, high watermark {q.high_watermark}")
    print_table(["NODE", "DIRECTORY-ID", "LOG-END-OFFSET", "LAG", "CAUGHT-UP-MS-AGO", "STATUS"],
                [(r.node_id, r.directory or "-", r.log_end, r.lag,
                  "-" if r.caught_up_ms_ago is None else r.caught_up_ms_ago, r.status) for r in q.replicas])
