"""``failover``, ``load`` and ``idle``: scenarios for a 3-node kcoord cluster.

With ``--start-cluster`` the bench starts a fresh 3-node cluster in a temporary directory
(``cluster.tools.local_cluster.LocalCluster``: free Kafka ports, Raft ports below 32768), owns the node
processes (it SIGKILLs and restarts them itself) and stops the cluster afterwards.

- ``failover``: a group commits synchronously in a loop; the group's coordinator (leader of
  its ``__consumer_offsets`` partition) is SIGKILLed; the sample is the time from the kill to
  the first acknowledged commit after it. The node is restarted and the bench waits until
  leadership is balanced and stable before the next kill. Afterwards every group's committed
  offset is read back: it must be >= the last acknowledged one. With ``--fault isolate`` the
  coordinator is cut off from the other nodes instead (every Raft message to and from it
  dropped, through the nodes' fault files) while its clients still reach it, and a prober asks
  it for the group's offsets every 10 ms: besides the takeover time, the sample records how long
  after the cut the isolated node still answered as coordinator (the cut's moment is when the
  node logged applying it).
- ``load``: G groups that all hash to one ``__consumer_offsets`` partition commit one offset
  each (raw OffsetCommit v2 over many connections); the partition's leader is SIGKILLed; the
  figures are the new leader's ``event=shard_loaded ... took_ms`` and the client-visible time
  from the kill until an OffsetFetch of one of those groups succeeds.
- ``idle``: CPU of the 3 node processes (utime+stime from /proc) while nothing happens, with
  2 topics of 6 partitions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import secrets
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.brokers import BenchError
from bench.common import CLIENT_DEFAULTS, broker_count, create_topic, run_id
from bench.report import Metric, Reporter, rnd
from cluster.tools.common import recv_exact
from cluster.tools.local_cluster import ClusterStartError, free_plan
from cluster.tools.local_cluster import LocalCluster as BaseCluster
from coordinator.partitioner import partition_for

OFFSETS_TOPIC = "__consumer_offsets"
RAFT_SLOTS_CHECKED = 64
SHARD_LOADED = re.compile(r"event=shard_loaded partition=(\d+) epoch=(\d+) entries=(\d+) records=(\d+) "
                          r"took_ms=(\d+)(?: prereplayed_entries=(\d+))?")
NOT_COORDINATOR = 16
IN_FLIGHT_S = 0.05
LOAD_IN_PROGRESS = 14


# ------------------------------------------------------------------ raw wire (tiny, hand-made frames)


def _s(text: str) -> bytes:
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def _frame(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    payload = struct.pack(">hhi", api_key, version, corr) + _s("kcoord-bench") + body
    return struct.pack(">i", len(payload)) + payload


def offset_commit_v2(corr: int, group: str, topic: str, partition: int, offset: int, count: int = 1) -> bytes:
    """Commit ``offset`` for partitions ``partition .. partition + count - 1`` of ``topic``."""
    parts = b"".join(struct.pack(">iq", partition + i, offset) + struct.pack(">h", -1) for i in range(count))
    body = (_s(group) + struct.pack(">i", -1) + _s("") + struct.pack(">q", -1) + struct.pack(">i", 1) + _s(topic)
            + struct.pack(">i", count) + parts)
    return _frame(8, 2, corr, body)


def offset_fetch_v2(corr: int, group: str, topic: str, partition: int) -> bytes:
    return _frame(9, 2, corr, _s(group) + struct.pack(">i", 1) + _s(topic) + struct.pack(">ii", 1, partition))


def metadata_v1(corr: int, topic: str) -> bytes:
    return _frame(3, 1, corr, struct.pack(">i", 1) + _s(topic))


class _Rd:
    def __init__(self, b: bytes, pos: int = 0) -> None:
        self.b, self.p = b, pos

    def i8(self) -> int:
        self.p += 1
        return int(self.b[self.p - 1])

    def i16(self) -> int:
        (v,) = struct.unpack_from(">h", self.b, self.p)
        self.p += 2
        return int(v)

    def i32(self) -> int:
        (v,) = struct.unpack_from(">i", self.b, self.p)
        self.p += 4
        return int(v)

    def i64(self) -> int:
        (v,) = struct.unpack_from(">q", self.b, self.p)
        self.p += 8
        return int(v)

    def s(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        self.p += n
        return self.b[self.p - n:self.p].decode()

    def skip_bytes(self) -> None:
        n = self.i32()
        self.p += max(n, 0)


def commit_error(frame: bytes) -> int:
    r = _Rd(frame, 4)
    r.i32()
    r.s()
    r.i32()
    r.i32()
    return r.i16()


def parse_offset_fetch_v2(frame: bytes) -> tuple[int, int, int]:
    """(top-level error, partition error, offset) of a one-partition OffsetFetch v2 answer."""
    r = _Rd(frame, 4)
    perr, off = -1, -1
    for _ in range(r.i32()):
        r.s()
        for _ in range(r.i32()):
            r.i32()
            off = r.i64()
            r.s()
            perr = r.i16()
    return r.i16(), perr, off


def parse_metadata_leaders(frame: bytes) -> list[int]:
    from kio.index import load_response_schema
    from kio.serial import entity_reader

    resp: Any
    resp, _ = entity_reader(load_response_schema(3, 1))(frame, 4)
    leaders: list[int] = []
    for t in resp.topics:
        leaders = [-1] * len(t.partitions)
        for p in t.partitions:
            if 0 <= p.partition_index < len(leaders):
                leaders[p.partition_index] = int(p.leader_id)
    return leaders


def rpc(addr: tuple[str, int], frame: bytes, timeout: float = 2.0) -> bytes:
    with socket.create_connection(addr, timeout=timeout) as sock:
        sock.sendall(frame)
        (size,) = struct.unpack(">i", recv_exact(sock, 4))
        return recv_exact(sock, size)


# ------------------------------------------------------------------ the cluster the bench owns


class LocalCluster(BaseCluster):
    """A 3-node cluster in a temporary directory: start, SIGKILL and restart nodes, stop all."""

    def __init__(self, settings: dict[str, str], nodes: int = 3, keep: bool = False) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="kcoord-bench-cluster-"))
        self.keep = keep
        try:
            layout = free_plan(nodes, self.dir, RAFT_SLOTS_CHECKED)
        except ClusterStartError as e:
            raise BenchError(str(e)) from None
        super().__init__(layout, secrets.token_hex(16), self.dir, dict(settings), log_dir=self.dir)

    def addr(self, i: int) -> tuple[str, int]:
        return ("127.0.0.1", self.layout[i].kafka_port)

    def start(self, *which: int, timeout: float = 60.0) -> LocalCluster:
        try:
            super().start(*which, timeout=timeout)
        except ClusterStartError as e:
            raise BenchError(str(e)) from None
        return self

    def kill(self, i: int) -> float:
        """SIGKILL node ``i``; the monotonic time of the kill."""
        t = super().kill(i)
        if t is None:
            raise BenchError(f"node {i} is not running")
        return t

    def stop(self) -> None:
        self.stop_all()
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- leadership of __consumer_offsets, as every live node sees it

    def offsets_leaders(self, i: int) -> list[int] | None:
        try:
            return parse_metadata_leaders(rpc(self.addr(i), metadata_v1(1, OFFSETS_TOPIC), 2.0))
        except (OSError, struct.error, ConnectionError):
            return None

    def agreed_leaders(self) -> list[int] | None:
        views = [self.offsets_leaders(i) for i in range(len(self.layout)) if self.alive(i)]
        if not views or any(v is None for v in views) or any(v != views[0] for v in views):
            return None
        return views[0]

    def balanced(self, leaders: list[int] | None, per_node: int) -> bool:
        if leaders is None or any(x < 0 for x in leaders):
            return False
        return all(leaders.count(i) >= per_node for i in range(len(self.layout)))

    def wait_balanced(self, quiet_s: float = 2.0, timeout: float = 120.0) -> float:
        """Wait until every node leads >= n/(nodes+1) offsets partitions, unchanged for ``quiet_s``."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        stable_since, last = None, None
        while time.monotonic() < deadline:
            leaders = self.agreed_leaders()
            per = max(1, len(leaders) // (len(self.layout) + 1)) if leaders else 1
            if leaders is not None and self.balanced(leaders, per):
                now = time.monotonic()
                if leaders != last:
                    stable_since, last = now, leaders
                elif stable_since is not None and now - stable_since >= quiet_s:
                    return now - t0
            else:
                stable_since, last = None, None
            time.sleep(0.2)
        raise BenchError(f"leadership not balanced/stable after {timeout:.0f}s: {self.agreed_leaders()}")

    def log_sizes(self) -> list[int]:
        return [self.log_path(i).stat().st_size if self.log_path(i).exists() else 0 for i in range(len(self.layout))]

    def log_since(self, i: int, offset: int) -> str:
        p = self.log_path(i)
        if not p.exists():
            return ""
        with open(p, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")


def log_events(cluster: LocalCluster) -> dict[str, int]:
    """Counts of noteworthy events in all node logs (elections, errors, ...)."""
    out: dict[str, int] = {}
    for i in range(len(cluster.layout)):
        for line in cluster.log_text(i).splitlines():
            m = re.search(r"event=(\w+)", line)
            if m and (m.group(1) in {"leader_elected", "leadership_lost", "shard_loaded", "shard_unloaded"}
                      or " ERROR " in line or " WARNING " in line or "error" in m.group(1)):
                out[m.group(1)] = out.get(m.group(1), 0) + 1
    return out


def _settings(args: Any) -> dict[str, str]:
    # failover waits for balanced leadership before each kill: a balancing round every second
    # that hands back any partition led elsewhere (the nodes' default waits out Kafka's 300 s)
    out: dict[str, str] = {"leader.imbalance.check.interval.seconds": "1", "leader.imbalance.per.broker.percentage": "0"}
    if getattr(args, "fault", "kill") == "isolate":
        out["raft_fault_injection"] = "true"  # cluster/link_control.py
    for item in args.kcoord_set:
        k, _, v = item.partition("=")
        out[k] = v
    return out


# ------------------------------------------------------------------ scenarios


class _ClusterScenario:
    NAME = ""
    MIN_NODES = 3

    @classmethod
    def add_arguments(cls, p: Any) -> None:
        p.add_argument("--start-cluster", action="store_true",
                       help="start a fresh 3-node cluster in a temp dir (Raft ports < 32768), stop it afterwards")
        p.add_argument("--keep", action="store_true", help="keep the temp dir (node logs) of --start-cluster")

    @classmethod
    def params(cls, args: Any) -> dict[str, Any]:
        return {}

    @classmethod
    def metrics(cls, args: Any) -> list[Metric]:
        return []

    @classmethod
    def ok(cls, result: dict[str, Any]) -> bool:
        return False

    @classmethod
    def precheck(cls, bootstrap: str, args: Any) -> None:
        n = broker_count(bootstrap)
        if n < cls.MIN_NODES:
            raise BenchError(f"{cls.NAME} needs a 3-node cluster started by `kcoord up`; "
                             f"{bootstrap} reports {n} broker(s)")
        if args.start_peer or args.peer:
            raise BenchError(f"{cls.NAME} runs against a kcoord cluster only (no peer comparison)")

    @classmethod
    def run_one(cls, name: str, bootstrap: str, args: Any, rep: Reporter) -> dict[str, Any]:
        cls.precheck(bootstrap, args)
        raise BenchError(f"{cls.NAME} kills and restarts node processes: run it with --start-cluster")

    @classmethod
    def run_cluster(cls, args: Any, rep: Reporter) -> dict[str, Any]:
        if args.bootstrap or args.start_kcoord or args.peer or args.start_peer:
            raise BenchError("--start-cluster cannot be combined with --bootstrap/--start-kcoord/--peer")
        cluster = LocalCluster(_settings(args), keep=args.keep)
        rep.note(f"starting a 3-node cluster in {cluster.dir}")
        try:
            cluster.start()
            waited = cluster.wait_balanced()
            rep.note(f"cluster up: {cluster.bootstrap}; leadership balanced after {waited:.1f}s")
            result = cls.drive(cluster, args, rep)
            result["log_events"] = log_events(cluster)
            if args.keep:
                result["cluster_dir"] = str(cluster.dir)
            return result
        finally:
            cluster.stop()

    @classmethod
    def drive(cls, cluster: LocalCluster, args: Any, rep: Reporter) -> dict[str, Any]:
        raise NotImplementedError


class _Committer(threading.Thread):
    """Synchronous commits of increasing offsets in a loop (one every ``interval`` seconds, 0 = back
    to back); every acknowledgement time-stamped."""

    def __init__(self, bootstrap: str, group: str, topic: str, interval: float = 0.0, debug: str = "") -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.group, self.topic, self.interval = bootstrap, group, topic, interval
        self.extra: dict[str, Any] = {"debug": debug} if debug else {}  # librdkafka's debug contexts
        self.acks: list[tuple[float, int]] = []
        self.sent: dict[int, float] = {}  # seq -> send time
        self.errors: list[tuple[float, str]] = []
        self.stop_ev = threading.Event()
        self.failure: str | None = None

    def run(self) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        try:
            c = Consumer(dict(CLIENT_DEFAULTS, **{"bootstrap.servers": self.bootstrap, "group.id": self.group,
                                                   "log_level": 7 if self.extra else 2,
                                                   "enable.auto.commit": False}, **self.extra))
            c.assign([TopicPartition(self.topic, 0)])
            c.pause([TopicPartition(self.topic, 0)])
            seq = 0
            while not self.stop_ev.is_set():
                seq += 1
                self.sent[seq] = time.monotonic()
                try:
                    res = c.commit(offsets=[TopicPartition(self.topic, 0, seq)], asynchronous=False)
                except KafkaException as e:
                    self.errors.append((time.monotonic(), str(e.args[0])[:120]))
                    time.sleep(0.005)
                    continue
                now = time.monotonic()
                if res is not None and any(tp.error is not None for tp in res):
                    self.errors.append((now, str(res[0].error)[:120]))
                    continue
                self.acks.append((now, seq))
                if self.interval:
                    time.sleep(max(0.0, self.sent[seq] + self.interval - time.monotonic()))
            c.close()
        except Exception as e:  # noqa: BLE001 - reported by the scenario
            self.failure = repr(e)


class _StaticMember(_Committer):
    """A static member (``group.instance.id``) of a subscribed group, as an application runs it:
    polls, and commits the offsets of what it is assigned synchronously every ``interval``;
    every acknowledgement time-stamped in ``_Committer``'s fields."""

    def __init__(self, bootstrap: str, group: str, topic: str, instance: str, interval: float,
                 debug: str = "") -> None:
        super().__init__(bootstrap, group, topic, interval, debug)
        self.instance = instance

    def run(self) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        try:
            c = Consumer(dict(CLIENT_DEFAULTS, **{
                "bootstrap.servers": self.bootstrap, "group.id": self.group, "group.instance.id": self.instance,
                "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1000, "log_level": 7 if self.extra else 2,
                "enable.auto.commit": False}, **self.extra))
            c.subscribe([self.topic])
            seq = 0
            while not self.stop_ev.is_set():
                c.poll(self.interval)
                owned = c.assignment()
                if not owned:
                    continue
                seq += 1
                self.sent[seq] = time.monotonic()
                try:
                    c.commit(offsets=[TopicPartition(tp.topic, tp.partition, seq) for tp in owned],
                             asynchronous=False)
                except KafkaException as e:
                    self.errors.append((time.monotonic(), str(e.args[0])[:120]))
                    continue
                self.acks.append((time.monotonic(), seq))
            c.close()
        except Exception as e:  # noqa: BLE001 - reported by the scenario
            self.failure = repr(e)


def _first_ack_after(client: _Committer, t_kill: float) -> float | None:
    """When ``client`` first had a commit acknowledged after the kill. An answer the killed node
    wrote just before SIGKILL can still arrive after it: acks of commits sent before the kill that
    arrive within IN_FLIGHT_S of it do not count."""
    after = [t for t, sq in client.acks[-200:] if t > t_kill
             and (client.sent.get(sq, 0.0) >= t_kill or t - t_kill > IN_FLIGHT_S)]
    return min(after) if after else None


def _committed(bootstrap: str, group: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(dict(CLIENT_DEFAULTS, **{"bootstrap.servers": bootstrap, "group.id": group,
                                           "enable.auto.commit": False}))
    try:
        (tp,) = c.committed([TopicPartition(topic, 0)], timeout=30)
        return -1 if tp.error is not None else int(tp.offset)
    finally:
        c.close()


class _CoordinatorProber(threading.Thread):
    """Asks one node for a group's committed offset every 10 ms; times of the answers it gave
    as coordinator (no error), and how many it refused."""

    def __init__(self, addr: tuple[str, int], group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.addr, self.group, self.topic = addr, group, topic
        self.ok: list[float] = []
        self.refused = 0
        self.stop_ev = threading.Event()

    def run(self) -> None:
        corr = 0
        while not self.stop_ev.is_set():
            corr += 1
            try:
                top, perr, _off = parse_offset_fetch_v2(rpc(self.addr, offset_fetch_v2(corr, self.group, self.topic,
                                                                                        0), 1.0))
            except (OSError, ConnectionError, struct.error):
                top, perr = -1, -1
            if top == 0 and perr == 0:
                self.ok.append(time.monotonic())
            else:
                self.refused += 1
            time.sleep(0.01)


def _cut(cluster: LocalCluster, victim: int | None) -> None:
    """Cut ``victim`` off from the other nodes (None: heal), through the nodes' fault files."""
    n = len(cluster.layout)
    for i, node in enumerate(cluster.layout):
        spec: dict[str, Any] = {}
        if victim is not None:
            spec = {"cut": [j for j in range(n) if j != victim]} if i == victim else {"cut": [victim]}
        (node.data_dir / "raft-faults.json").write_text(json.dumps(spec))


_APPLIED = re.compile(r"^ts=(\S+) .*event=raft_faults_applied", re.MULTILINE)


def _cut_applied(cluster: LocalCluster, victim: int, sizes: list[int], timeout: float = 5.0) -> float:
    """When the cut took hold, on this process's monotonic clock: the nodes apply their fault
    files within 0.2 s of each other (each logs when), and ``victim`` has lost touch with the
    others once it applied its own, or once they all applied theirs."""
    deadline = time.monotonic() + timeout
    applied: dict[int, float] = {}
    while time.monotonic() < deadline and len(applied) < len(cluster.layout):
        for i in range(len(cluster.layout)):
            m = _APPLIED.search(cluster.log_since(i, sizes[i])) if i not in applied else None
            if m:
                wall = datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
                applied[i] = time.monotonic() - (time.time() - wall)
        time.sleep(0.01)
    if len(applied) < len(cluster.layout):
        raise BenchError(f"nodes {sorted(set(range(len(cluster.layout))) - set(applied))} did not apply their "
                         f"fault files in {timeout:.0f}s")
    others = max(t for i, t in applied.items() if i != victim)
    return min(applied[victim], others)


DEBUG_CONTEXTS = "cgrp,broker,protocol"


@contextlib.contextmanager
def _client_log(path: str) -> Iterator[None]:
    """librdkafka logs to the process's stderr (fd 2) with wall-clock stamps: with ``path``, fd 2
    goes to that file meanwhile, and the bench's own progress to the original stderr."""
    if not path:
        yield
        return
    saved, stderr = os.dup(2), sys.stderr
    with open(path, "ab") as f:
        os.dup2(f.fileno(), 2)
        sys.stderr = os.fdopen(os.dup(saved), "w")
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sys.stderr.close()
            sys.stderr = stderr


class Failover(_ClusterScenario):
    """SIGKILL the coordinator of a committing group; time until commits are acknowledged again."""

    NAME = "failover"

    @classmethod
    def add_arguments(cls, p: Any) -> None:
        super().add_arguments(p)
        p.add_argument("--kills", type=int, default=10, help="coordinator kills or cuts (default 10)")
        p.add_argument("--timeout", type=float, default=60.0, help="max seconds to wait for a commit (default 60)")
        p.add_argument("--fault", choices=["kill", "isolate"], default="kill",
                       help="SIGKILL the coordinator, or cut it off from the other nodes (default kill)")
        p.add_argument("--cut-seconds", type=float, default=6.0, help="length of each cut (default 6)")
        p.add_argument("--interval-ms", type=int, default=0,
                       help="commit every this many ms (default 0: back to back; 20 as an application would)")
        p.add_argument("--static-members", type=int, default=0,
                       help="also run a subscribed group of this many static members committing every "
                            "--interval-ms; a sample is then the time until every client has a commit "
                            "acknowledged (default 0)")
        p.add_argument("--victim", choices=["coordinator", "rotate"], default="coordinator",
                       help="kill the committing group's coordinator, or nodes 0, 1, 2, 0, ... in turn "
                            "(default coordinator)")
        p.add_argument("--client-debug", metavar="FILE", default="",
                       help="write every client's librdkafka debug log (contexts cgrp,broker,protocol; "
                            "wall-clock time stamps) to FILE; each kill's wall-clock time is in the result's "
                            "detail, to find the slow ones there")

    @classmethod
    def params(cls, args: Any) -> dict[str, Any]:
        return {"kills": args.kills, "fault": args.fault, "interval_ms": args.interval_ms,
                "static_members": args.static_members, "victim": args.victim}

    @classmethod
    def metrics(cls, args: Any) -> list[Metric]:
        what = "kill" if args.fault == "kill" else "cut"
        window = [] if args.fault == "kill" else [
            Metric("window_min_s", "cut -> last answer of the isolated node as coordinator, min", "s", "lower"),
            Metric("window_median_s", "cut -> last answer of the isolated node, median", "s", "lower"),
            Metric("window_max_s", "cut -> last answer of the isolated node, max", "s", "lower")]
        return [*window,
                Metric("min_s", f"{what} -> first acked commit, min", "s", "lower"),
                Metric("median_s", f"{what} -> first acked commit, median", "s", "lower"),
                Metric("max_s", f"{what} -> first acked commit, max", "s", "lower"),
                Metric("failed_commits", "failed commits (all kills)", "", ""),
                Metric("acked_commits", "acknowledged commits", "", ""),
                Metric("groups_checked", "groups read back", "", ""),
                Metric("lost_commits", "lost acknowledged commits", "", "")]

    @classmethod
    def ok(cls, result: dict[str, Any]) -> bool:
        return result.get("lost_commits") == 0 and len(result.get("samples_s", [])) == result.get("kills")

    @classmethod
    def drive(cls, cluster: LocalCluster, args: Any, rep: Reporter) -> dict[str, Any]:
        rid = run_id()
        topic = f"bench-failover-{rid}"
        create_topic(cluster.bootstrap, topic, max(1, args.static_members))
        interval = args.interval_ms / 1000
        with _client_log(args.client_debug):
            members = [_StaticMember(cluster.bootstrap, f"bench-failover-{rid}-static", topic, f"member-{i}",
                                     interval, DEBUG_CONTEXTS if args.client_debug else "")
                       for i in range(args.static_members)]
            for m in members:
                m.start()
            try:
                return cls._kills(cluster, args, rep, rid, topic, members)
            finally:
                for m in members:
                    m.stop_ev.set()
                for m in members:
                    m.join(30)

    @classmethod
    def _kills(cls, cluster: LocalCluster, args: Any, rep: Reporter, rid: str, topic: str,
               members: list[_StaticMember]) -> dict[str, Any]:
        interval = args.interval_ms / 1000
        samples: list[float] = []
        windows: list[float] = []
        detail: list[dict[str, Any]] = []
        last_acked: dict[str, int] = {}
        acked = failed = 0
        for k in range(args.kills):
            group = f"bench-failover-{rid}-{k}"
            part = partition_for(group, len(cluster.agreed_leaders() or [0] * 16))
            com = _Committer(cluster.bootstrap, group, topic, interval, DEBUG_CONTEXTS if args.client_debug else "")
            com.start()
            clients: list[_Committer] = [com, *members]
            deadline = time.monotonic() + 30
            t0 = time.monotonic()
            while time.monotonic() < deadline and com.failure is None and not all(
                    len([a for a in c.acks[-20:] if a[0] > t0]) >= 20 for c in clients):
                time.sleep(0.05)
            slow = [c for c in clients if len([a for a in c.acks[-20:] if a[0] > t0]) < 20]
            if slow:
                com.stop_ev.set()
                raise BenchError(f"clients do not commit: {[(c.failure, c.errors[-3:]) for c in slow]}")
            leaders = cluster.agreed_leaders()
            if leaders is None or leaders[part] < 0:
                raise BenchError(f"no agreed leader of {OFFSETS_TOPIC}-{part}: {leaders}")
            victim = leaders[part] if args.victim == "coordinator" else k % len(cluster.layout)
            time.sleep(0.2)
            prober = _CoordinatorProber(cluster.addr(victim), group, topic) if args.fault == "isolate" else None
            if prober is not None:
                prober.start()
                time.sleep(0.2)
                sizes = cluster.log_sizes()
                _cut(cluster, victim)
                t_kill = _cut_applied(cluster, victim, sizes)
            else:
                t_kill = cluster.kill(victim)
            end = t_kill + args.timeout
            firsts: list[float | None] = [None] * len(clients)
            while time.monotonic() < end:
                firsts = [_first_ack_after(c, t_kill) for c in clients]
                if all(f is not None for f in firsts):
                    break
                time.sleep(0.005)
            first = None if any(f is None for f in firsts) else max(f for f in firsts if f is not None)
            if prober is not None:
                time.sleep(max(0.0, t_kill + args.cut_seconds - time.monotonic()))
            time.sleep(0.5)
            com.stop_ev.set()
            com.join(30)
            errs_after = [e for t, e in com.errors if t > t_kill]
            acked += len(com.acks)
            failed += len(com.errors)
            if com.acks:
                last_acked[group] = max(s for _, s in com.acks)
            sample = None if first is None else first - t_kill
            rec: dict[str, Any] = {"kill": k, "at": rnd(time.time() - (time.monotonic() - t_kill), 3), "group": group,
                   "partition": part, "killed_node": victim,
                   "coordinator_killed": victim == leaders[part],
                   "took_s": rnd(sample, 3), "failed_commits": len(errs_after),
                   "errors": sorted({e for e in errs_after})[:4]}
            if members:
                rec["each_client_s"] = [None if f is None else rnd(f - t_kill, 3) for f in firsts]
                rec["member_errors"] = sorted({e for m in members for t, e in m.errors if t > t_kill})[:4]
            note = ""
            if prober is not None:
                prober.stop_ev.set()
                prober.join(10)
                last_ok = max((t for t in prober.ok if t <= t_kill + args.cut_seconds), default=None)
                win = None if last_ok is None else max(0.0, last_ok - t_kill)
                rec["isolated_answered_until_s"] = rnd(win, 3)
                rec["isolated_refusals"] = prober.refused
                if win is not None:
                    windows.append(win)
                note = f"; isolated node answered until {'?' if win is None else f'{win:.3f}s'} after the cut"
                _cut(cluster, None)
            detail.append(rec)
            role = f"leader of {OFFSETS_TOPIC}-{part}" if victim == leaders[part] else "not the coordinator"
            rep.note(f"{args.fault} {k + 1}/{args.kills}: node {victim} ({role}) -> "
                     f"{'no commit' if sample is None else f'{sample:.3f}s'}, {len(errs_after)} failed commits"
                     + note)
            if sample is not None:
                samples.append(sample)
            if prober is None:
                cluster.start(victim)
            waited = cluster.wait_balanced()
            rec["rebalanced_after_restart_s"] = rnd(waited, 1)
        lost = []
        for group, want in last_acked.items():
            got = _committed(cluster.bootstrap, group, topic)
            if got < want:
                lost.append({"group": group, "committed": got, "acked": want})
        window = {} if args.fault == "kill" else {
            "window_samples_s": [rnd(w, 3) for w in windows],
            "window_min_s": rnd(min(windows), 3) if windows else None,
            "window_median_s": rnd(statistics.median(windows), 3) if windows else None,
            "window_max_s": rnd(max(windows), 3) if windows else None}
        return {"kills": args.kills, "fault": args.fault, **window, "samples_s": [rnd(s, 3) for s in samples],
                "min_s": rnd(min(samples), 3) if samples else None,
                "median_s": rnd(statistics.median(samples), 3) if samples else None,
                "max_s": rnd(max(samples), 3) if samples else None,
                "failed_commits": failed, "acked_commits": acked, "groups_checked": len(last_acked),
                "lost_commits": len(lost), "lost_detail": lost[:20], "detail": detail}


class Load(_ClusterScenario):
    """Fill one offsets partition with G groups' offsets; SIGKILL its leader; time the new leader's load."""

    NAME = "load"

    @classmethod
    def add_arguments(cls, p: Any) -> None:
        super().add_arguments(p)
        p.add_argument("--groups", type=int, default=100_000, help="groups in the partition (default 100000)")
        p.add_argument("--offsets-per-group", type=int, default=1,
                       help="partitions each group commits, one request per group (default 1)")
        p.add_argument("--connections", type=int, default=32, help="connections filling it (default 32)")
        p.add_argument("--partition", type=int, default=None, help="offsets partition to fill (default random)")
        p.add_argument("--timeout", type=float, default=300.0, help="max seconds to wait for the load (default 300)")

    @classmethod
    def params(cls, args: Any) -> dict[str, Any]:
        return {"groups": args.groups, "offsets_per_group": args.offsets_per_group, "connections": args.connections}

    @classmethod
    def metrics(cls, args: Any) -> list[Metric]:
        return [Metric("fill_s", "fill time", "s", "lower"),
                Metric("fill_commits_per_s", "fill rate", "commits/s", "higher"),
                Metric("shard_loaded_took_ms", "new leader shard_loaded took_ms", "ms", "lower"),
                Metric("offsets", "committed offsets in the partition", "", ""),
                Metric("shard_loaded_records", "records replayed at load (after the pre-replayed image)", "", ""),
                Metric("kill_to_offset_fetch_s", "kill -> OffsetFetch ok", "s", "lower"),
                Metric("kill_to_shard_loaded_s", "kill -> shard_loaded logged (seen)", "s", "lower")]

    @classmethod
    def ok(cls, result: dict[str, Any]) -> bool:
        return result.get("kill_to_offset_fetch_s") is not None and result.get("shard_loaded_took_ms") is not None

    @classmethod
    def drive(cls, cluster: LocalCluster, args: Any, rep: Reporter) -> dict[str, Any]:
        rid = run_id()
        topic = f"bench-load-{rid}"
        create_topic(cluster.bootstrap, topic, args.offsets_per_group)
        leaders = cluster.agreed_leaders()
        assert leaders is not None
        n = len(leaders)
        part = args.partition if args.partition is not None else random.randrange(n)
        t0 = time.monotonic()
        groups: list[str] = []
        i = 0
        prefix = f"L{rid}-"
        while len(groups) < args.groups:
            g = f"{prefix}{i}"
            if partition_for(g, n) == part:
                groups.append(g)
            i += 1
        rep.note(f"{len(groups):,} group names for {OFFSETS_TOPIC}-{part} in {time.monotonic() - t0:.1f}s")
        leader = leaders[part]
        done = [0]
        errors: dict[int, int] = {}
        retried = [0]
        with rep.phase(f"fill {OFFSETS_TOPIC}-{part} (leader node {leader})", None, lambda: done[0], "commits"):
            t_fill = time.monotonic()
            asyncio.run(_fill(cluster.addr(leader), groups, topic, args.connections, done, errors,
                              args.offsets_per_group, retried))
            fill_s = time.monotonic() - t_fill
        if errors:
            raise BenchError(f"fill failed: error codes {errors} (leadership moved during the fill?)")
        rate = len(groups) / fill_s
        rep.note(f"filled {len(groups):,} groups in {fill_s:.1f}s ({rate:,.0f} commits/s, "
                 f"{retried[0]} retriable errors retried)")
        time.sleep(2.0)
        if cluster.agreed_leaders() != leaders:
            rep.note(f"leadership changed during the fill: {leaders} -> {cluster.agreed_leaders()}")
            leaders = cluster.agreed_leaders() or leaders
            leader = leaders[part]
        probe_group, probe_offset = groups[-1], len(groups)
        survivors = [j for j in range(len(cluster.layout)) if j != leader]
        sizes = cluster.log_sizes()
        fetch_ok: list[float] = []
        fetch_errors: dict[str, int] = {}
        stop = threading.Event()

        def prober() -> None:
            corr = 0
            while not stop.is_set():
                for j in survivors:
                    corr += 1
                    try:
                        top, perr, off = parse_offset_fetch_v2(
                            rpc(cluster.addr(j), offset_fetch_v2(corr, probe_group, topic, 0), 2.0))
                    except (OSError, ConnectionError, struct.error) as e:
                        fetch_errors[type(e).__name__] = fetch_errors.get(type(e).__name__, 0) + 1
                        continue
                    if top == 0 and perr == 0 and off == probe_offset:
                        fetch_ok.append(time.monotonic())
                        return
                    key = f"top={top},partition={perr}"
                    fetch_errors[key] = fetch_errors.get(key, 0) + 1
                time.sleep(0.01)

        th = threading.Thread(target=prober, daemon=True)
        t_kill = cluster.kill(leader)
        th.start()
        loaded: dict[str, Any] | None = None
        t_seen = None
        end = t_kill + args.timeout
        with rep.phase(f"killed node {leader}; waiting for the new leader to load {OFFSETS_TOPIC}-{part}"):
            while time.monotonic() < end and (loaded is None or not fetch_ok):
                if loaded is None:
                    for j in survivors:
                        for m in SHARD_LOADED.finditer(cluster.log_since(j, sizes[j])):
                            if int(m.group(1)) == part:
                                loaded = {"node": j, "epoch": int(m.group(2)), "entries": int(m.group(3)),
                                          "records": int(m.group(4)), "took_ms": int(m.group(5)),
                                          "prereplayed_entries": int(m.group(6) or 0)}
                                t_seen = time.monotonic()
                time.sleep(0.05)
        stop.set()
        th.join(5)
        # the dead node comes back last, so that its own restart load is not mistaken for the failover's
        cluster.start(leader)
        restart_load = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and restart_load is None:
            for m in SHARD_LOADED.finditer(cluster.log_since(leader, sizes[leader])):
                if int(m.group(1)) == part:
                    restart_load = {"epoch": int(m.group(2)), "entries": int(m.group(3)),
                                    "records": int(m.group(4)), "took_ms": int(m.group(5))}
            time.sleep(0.2)
        return {"groups": len(groups), "offsets": len(groups) * args.offsets_per_group, "partition": part,
                "killed_node": leader,
                "fill_s": rnd(fill_s, 1), "fill_commits_per_s": rnd(rate, 0), "fill_retried": retried[0],
                "shard_loaded_took_ms": loaded["took_ms"] if loaded else None,
                "shard_loaded_records": loaded["records"] if loaded else None, "shard_loaded": loaded,
                "kill_to_offset_fetch_s": rnd(fetch_ok[0] - t_kill, 3) if fetch_ok else None,
                "kill_to_shard_loaded_s": rnd(t_seen - t_kill, 3) if t_seen else None,
                "offset_fetch_errors_before_ok": fetch_errors,
                "restarted_node_load_back": restart_load}


RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
RETRY_FOR_S = 5.0


async def _fill(addr: tuple[str, int], groups: list[str], topic: str, conns: int, done: list[int],
                errors: dict[int, int], per_group: int = 1, retried: list[int] | None = None) -> None:
    """Commit every group's offsets on ``conns`` connections to one node. A retriable error is
    retried for RETRY_FOR_S, as a client would (a leader whose followers fall behind under this
    flood answers NOT_COORDINATOR until their acknowledgements renew its lease); past that, or
    any other error, it counts in ``errors``."""
    it = iter(range(len(groups)))

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(*addr)
        corr = 0
        try:
            for idx in it:
                give_up = time.monotonic() + RETRY_FOR_S
                while True:
                    corr += 1
                    writer.write(offset_commit_v2(corr, groups[idx], topic, 0, idx + 1, per_group))
                    (size,) = struct.unpack(">i", await reader.readexactly(4))
                    err = commit_error(await reader.readexactly(size))
                    if err in RETRIABLE and time.monotonic() < give_up:
                        if retried is not None:
                            retried[0] += 1
                        await asyncio.sleep(0.05)
                        continue
                    break
                if err:
                    errors[err] = errors.get(err, 0) + 1
                    if sum(errors.values()) > 100:
                        return
                else:
                    done[0] += 1
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(conns)))


class Idle(_ClusterScenario):
    """CPU of an idle 3-node cluster (2 topics x 6 partitions, 16 offsets partitions)."""

    NAME = "idle"

    @classmethod
    def add_arguments(cls, p: Any) -> None:
        super().add_arguments(p)
        p.add_argument("--topics", type=int, default=2, help="topics (default 2)")
        p.add_argument("--partitions", type=int, default=6, help="partitions per topic (default 6)")
        p.add_argument("--settle", type=float, default=20.0, help="seconds to wait first (default 20)")
        p.add_argument("--window", type=float, default=30.0, help="seconds measured (default 30)")

    @classmethod
    def params(cls, args: Any) -> dict[str, Any]:
        return {"topics": args.topics, "partitions": args.partitions, "settle_s": args.settle,
                "window_s": args.window}

    @classmethod
    def metrics(cls, args: Any) -> list[Metric]:
        return [Metric("cpu_pct_total", "3 nodes, % of one core", "%", "lower"),
                Metric("cpu_pct_max_node", "busiest node, % of one core", "%", "lower")]

    @classmethod
    def ok(cls, result: dict[str, Any]) -> bool:
        return result.get("cpu_pct_total") is not None

    @classmethod
    def drive(cls, cluster: LocalCluster, args: Any, rep: Reporter) -> dict[str, Any]:
        rid = run_id()
        for t in range(args.topics):
            create_topic(cluster.bootstrap, f"bench-idle-{rid}-{t}", args.partitions)
        with rep.phase("settling", args.settle):
            time.sleep(args.settle)
        pids = [cluster.pid(i) for i in range(len(cluster.layout))]
        tick = os.sysconf("SC_CLK_TCK")
        a = [_cpu_ticks(p) for p in pids]
        t0 = time.monotonic()
        with rep.phase("measuring", args.window):
            time.sleep(args.window)
        b = [_cpu_ticks(p) for p in pids]
        el = time.monotonic() - t0
        per = [(y - x) / tick / el * 100 for x, y in zip(a, b, strict=True)]
        return {"cpu_pct_total": rnd(sum(per), 2), "cpu_pct_max_node": rnd(max(per), 2),
                "cpu_pct_per_node": [rnd(x, 2) for x in per], "window_s": rnd(el, 1)}


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of the whole line)
