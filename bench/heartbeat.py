"""``heartbeat``: many groups with many members heartbeating, from a protocol-level load generator.

No client library: every member is simulated with raw Kafka requests (non-flexible versions,
hand-made frames) by ``--procs`` worker processes, each one asyncio loop.

1. FindCoordinator v2 (key type 0) per group, pipelined over the bootstrap addresses.
2. Join. A node answers the requests of one connection in order and holds a JoinGroup until
   the rebalance completes (a follower's SyncGroup until the leader's), so a group joins over a
   *lane* of its own connections to its coordinator, one per member, taken from a pool
   (``--lanes`` per coordinator and process): JoinGroup v5 with an empty member id (answered
   MEMBER_ID_REQUIRED with the id), JoinGroup with the id, SyncGroup v3 (the leader assigns an
   empty ConsumerProtocolAssignment to every member). A member that is synced while its group
   is not complete heartbeats every 100 ms and rejoins on REBALANCE_IN_PROGRESS, as a client
   does, until every member is synced in one generation.
3. Heartbeat v3 every ``--interval`` seconds per member (a random phase per member, at most one
   in flight per member, as clients do), pipelined over ``--connections`` shared connections
   per coordinator and process, written once per 10 ms tick.
4. Once every group is stable and ``--settle`` seconds more, the heartbeats *sent* during
   ``--duration`` seconds are measured: latency from the write to the answer, errors by code,
   achieved rate (answered without error) against members / interval. On NOT_COORDINATOR (or
   not available / loading) a group finds its coordinator again and goes on heartbeating, as
   clients do; any other heartbeat error makes it rejoin.

A node serves one request of a connection at a time, so pipelined heartbeats queue behind each
other on a connection: with too few connections (16 per node at 16,700 heartbeats/s here) the
queues grow without bound once the node falls behind for a moment. ``join_errors`` counts error
codes seen while joining (27 once per group is normal with an initial rebalance delay of 0: the
first generation holds one member; -1 = a connection lost or a request timed out).

``--group-protocol consumer`` (KIP-848): each member joins with one ConsumerGroupHeartbeat v1 at
epoch 0 (its own member id, no topic subscribed) and then heartbeats with its epoch, all other
fields null; nothing is held by the coordinator, so the joins go over the heartbeat connections.
FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID make the member join again at epoch 0.

``--start-cluster`` starts a 3-node cluster with ``group.initial.rebalance.delay.ms=0`` (a
``--kcoord-set`` overrides it); ``--bootstrap`` runs against a running cluster or node, and
``--peer``/``--start-peer`` runs the same load against the peer. tansu holds each JoinGroup for
about half the session timeout, so there keep the size small (``--members 200 --groups 40``).
At the end the members leave (LeaveGroup v3, one request per group), except on a cluster the
bench started and stops itself.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import random
import struct
import time
import uuid
from array import array
from collections.abc import Awaitable, Callable
from typing import Any

from bench.brokers import BenchError
from bench.cluster3 import LocalCluster, _ClusterScenario, _cpu_ticks, _Rd, _s
from bench.common import host_cpu, mp_context, run_id
from bench.report import Metric, Reporter, rnd
from coordinator_common.varint import uvarint

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
CONSUMER_GROUP_HEARTBEAT = 68
FENCED_MEMBER_EPOCH = 110
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED = 22, 25, 27, 79
MOVED = {COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR}
CLIENT_ID = _s("kcoord-bench-hb")
NULL_STRING = struct.pack(">h", -1)
# ConsumerProtocolSubscription / ConsumerProtocolAssignment v0: no topics, null user data
SUBSCRIPTION = struct.pack(">hii", 0, 0, -1)
ASSIGNMENT = struct.pack(">hii", 0, 0, -1)
TICK_S = 0.01
SYNCED_POLL_S = 0.1
REQUEST_TIMEOUT_S = 120.0
DRAIN_S = 10.0
SLICE_S = 5.0  # p99 per slice of the window, to tell a steady tail from a burst
HB_HEAD = struct.Struct(">ihhi")
ERR_AT = struct.Struct(">h")  # error code after throttle_time_ms, in Heartbeat/SyncGroup answers
SIZE_CORR = struct.Struct(">ii")


# ------------------------------------------------------------------ frames


def request(api: int, version: int, corr: int, body: bytes) -> bytes:
    return struct.pack(">ihhi", 8 + len(CLIENT_ID) + len(body), api, version, corr) + CLIENT_ID + body


def find_coordinator_v2(group: str) -> bytes:
    return _s(group) + b"\x00"


def join_group_v5(group: str, member_id: str, session_ms: int, rebalance_ms: int) -> bytes:
    return (_s(group) + struct.pack(">ii", session_ms, rebalance_ms) + _s(member_id) + NULL_STRING
            + _s("consumer") + struct.pack(">i", 1) + _s("range") + struct.pack(">i", len(SUBSCRIPTION))
            + SUBSCRIPTION)


def sync_group_v3(group: str, generation: int, member_id: str, assign_to: list[str]) -> bytes:
    parts = [_s(group), struct.pack(">i", generation), _s(member_id), NULL_STRING,
             struct.pack(">i", len(assign_to))]
    for m in assign_to:
        parts += [_s(m), struct.pack(">i", len(ASSIGNMENT)), ASSIGNMENT]
    return b"".join(parts)


def heartbeat_v3(group: str, generation: int, member_id: str) -> bytes:
    return _s(group) + struct.pack(">i", generation) + _s(member_id) + NULL_STRING


def _cs(text: str) -> bytes:
    """A compact (flexible-version) string."""
    b = text.encode()
    return uvarint(len(b) + 1) + b


def consumer_heartbeat_v1(group: str, member_id: str, epoch: int, rebalance_ms: int) -> bytes:
    """ConsumerGroupHeartbeat v1 (KIP-848) after the request header's client id: the header's
    empty tagged fields, then the body. A join (epoch 0) subscribes to no topic and owns nothing;
    later heartbeats leave every optional field null (unchanged)."""
    join = epoch == 0
    return (b"\x00" + _cs(group) + _cs(member_id) + struct.pack(">i", epoch) + b"\x00\x00"  # instance, rack
            + struct.pack(">i", rebalance_ms if join else -1) + (b"\x01" if join else b"\x00")  # topics [] / null
            + b"\x00\x00" + (b"\x01" if join else b"\x00") + b"\x00")  # regex, assignor, owned [] / null, tags


def parse_consumer_heartbeat_v1(b: bytes | bytearray, start: int = 0) -> tuple[int, int]:
    """(error, member epoch) of a ConsumerGroupHeartbeat v1 answer, after its correlation id."""
    pos = start + 1 + 4  # the response header's tagged fields, throttle time
    (err,) = ERR_AT.unpack_from(b, pos)
    pos += 2
    for _ in range(2):  # error message, member id: compact nullable strings
        n, shift = 0, 0
        while True:
            byte = b[pos]
            pos += 1
            n |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        pos += max(n - 1, 0)
    return int(err), int(struct.unpack_from(">i", b, pos)[0])


def leave_group_v3(group: str, member_ids: list[str]) -> bytes:
    return _s(group) + struct.pack(">i", len(member_ids)) + b"".join(_s(m) + NULL_STRING for m in member_ids)


def parse_find_coordinator_v2(b: bytes) -> tuple[int, str, int]:
    r = _Rd(b)
    r.i32()
    err = r.i16()
    r.s()
    r.i32()
    return err, r.s() or "", r.i32()


def parse_join_group_v5(b: bytes) -> tuple[int, int, str, str, list[str]]:
    """(error, generation, leader, member id, member ids (the leader's answer only))."""
    r = _Rd(b)
    r.i32()
    err, gen = r.i16(), r.i32()
    r.s()
    leader, member_id = r.s() or "", r.s() or ""
    members = []
    for _ in range(max(r.i32(), 0)):
        members.append(r.s() or "")
        r.s()
        r.skip_bytes()
    return err, gen, leader, member_id, members


def error_of(b: bytes) -> int:
    """Error code of a Heartbeat v3 / SyncGroup v3 / LeaveGroup v3 answer."""
    return int(ERR_AT.unpack_from(b, 4)[0])


# ------------------------------------------------------------------ connections


class _Conn(asyncio.Protocol):
    """One pipelined connection: requests written at once, answers matched by correlation id."""

    def __init__(self, addr: tuple[str, int]) -> None:
        self.addr = addr
        self.transport: Any = None
        self.buf = bytearray()
        self.corr = 0
        self.waiting: dict[int, asyncio.Future[bytes]] = {}
        self.lost: BaseException | None = None
        self.requests = self.answers = 0  # requests written by call(), answers read (of any request)

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, n = 0, len(buf)
        now = time.monotonic()
        while n - pos >= 8:
            size, corr = SIZE_CORR.unpack_from(buf, pos)
            end = pos + 4 + size
            if end > n:
                break
            self.answers += 1
            self.answer(corr, buf, pos + 8, end, now)
            pos = end
        if pos:
            del buf[:pos]

    def answer(self, corr: int, buf: bytearray, start: int, end: int, now: float) -> None:
        fut = self.waiting.pop(corr, None)
        if fut is not None and not fut.done():
            fut.set_result(bytes(buf[start:end]))

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionError(f"connection to {self.addr[0]}:{self.addr[1]} closed")
        for fut in self.waiting.values():
            if not fut.done():
                fut.set_exception(ConnectionError(str(self.lost)))
        self.waiting.clear()

    def next_corr(self) -> int:
        self.corr = (self.corr + 1) & 0x7FFFFFFF
        return self.corr

    async def call(self, api: int, version: int, body: bytes, timeout: float = REQUEST_TIMEOUT_S) -> bytes:
        if self.lost is not None:
            raise ConnectionError(str(self.lost))
        corr = self.next_corr()
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.waiting[corr] = fut
        self.requests += 1
        self.transport.write(request(api, version, corr, body))
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            self.waiting.pop(corr, None)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class _HbConn(_Conn):
    """A shared heartbeat connection: answers go straight to the worker, by member index."""

    def __init__(self, addr: tuple[str, int], worker: _Worker) -> None:
        super().__init__(addr)
        self.worker = worker
        self.members: dict[int, int] = {}  # corr -> member index
        self.out: list[bytes] = []

    def answer(self, corr: int, buf: bytearray, start: int, end: int, now: float) -> None:
        m = self.members.pop(corr, None)
        if m is None:
            return super().answer(corr, buf, start, end, now)
        if self.worker.consumer_protocol:
            err, epoch = parse_consumer_heartbeat_v1(buf, start)
            self.worker.on_epoch(m, epoch)
            self.worker.on_heartbeat(m, err, now)
        else:
            self.worker.on_heartbeat(m, int(ERR_AT.unpack_from(buf, start + 4)[0]), now)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self.worker.closing:
            self.worker.fatal = f"heartbeat connection to {self.addr[0]}:{self.addr[1]} lost: {exc!r}"


async def _connect(addr: tuple[str, int], factory: Any) -> Any:
    _, proto = await asyncio.get_running_loop().create_connection(factory, addr[0], addr[1])
    return proto


# ------------------------------------------------------------------ one worker process


class _Moved(Exception):
    """The group's coordinator answered NOT_COORDINATOR (or not available, or loading)."""


class _Group:
    __slots__ = ("gid", "k", "coord", "ids", "gen", "stable", "members", "established")

    def __init__(self, gid: str, k: int) -> None:
        self.gid, self.k = gid, k
        self.coord: tuple[str, int] | None = None
        self.ids = [""] * k
        self.gen = -1
        self.stable = False
        self.established = False
        self.members: list[int] = []


class _JoinRound:
    __slots__ = ("synced", "done")

    def __init__(self) -> None:
        self.synced: dict[int, int] = {}  # member slot -> generation it synced in
        self.done = asyncio.Event()


class _Worker:
    def __init__(self, wid: int, bootstrap: str, groups: list[tuple[str, int]], cfg: dict[str, Any],
                 progress: Any, t_start: Any) -> None:
        self.wid, self.cfg = wid, cfg
        self.consumer_protocol = cfg.get("group_protocol") == "consumer"
        self.hb_api, self.hb_version = (CONSUMER_GROUP_HEARTBEAT, 1) if self.consumer_protocol else (HEARTBEAT, 3)
        self.bootstrap = [(h, int(p)) for h, p in (a.rsplit(":", 1) for a in bootstrap.split(","))]
        self.progress, self.t_start = progress, t_start
        self.rng = random.Random(cfg["seed"] + wid)
        self.groups = [_Group(g, k) for g, k in groups]
        self.m_group: list[int] = []
        self.m_slot: list[int] = []
        for gi, g in enumerate(self.groups):
            for j in range(g.k):
                g.members.append(len(self.m_group))
                self.m_group.append(gi)
                self.m_slot.append(j)
        n = len(self.m_group)
        self.m_tail: list[bytes] = [b""] * n
        self.m_conn: list[_HbConn | None] = [None] * n
        self.m_sent = array("d", bytes(8 * n))  # write time of the member's heartbeat in flight, 0 if none
        self.m_epoch = array("i", bytes(4 * n))  # consumer protocol: the member's epoch
        self.hb_conns: dict[tuple[str, int], list[_HbConn]] = {}
        self.lanes_free: dict[tuple[str, int], list[list[_Conn]]] = {}
        self.lane_sems: dict[tuple[str, int], asyncio.Semaphore] = {}
        self.closing = False
        self.fatal: str | None = None
        self.w0 = self.w1 = 0.0
        # figures
        self.joined_members = 0
        self.join_requests = self.sync_requests = self.join_heartbeats = 0
        self.join_errors: dict[int, int] = {}
        self.rejoins = 0
        self.sent = self.ok = self.skipped = 0
        self.ok_total = 0
        self.errors: dict[int, int] = {}
        self.errors_outside: dict[int, int] = {}
        self.lat = array("d")
        self.lat_at = array("d")  # send time of each measured heartbeat
        self.lags = array("d")
        self.cpu0 = self.cpu1 = 0.0
        self.tasks: set[asyncio.Task[Any]] = set()
        self.hb_lock = asyncio.Lock()
        self.boot_conns: dict[int, _Conn] = {}
        self.finds = self.refinds = 0
        self.join_rounds = self.lanes_draining = 0

    # -- coordinators and connections

    async def boot_conn(self, i: int) -> _Conn:
        """A kept connection to bootstrap address ``i`` (mod their count), reopened when lost."""
        i %= len(self.bootstrap)
        conn = self.boot_conns.get(i)
        if conn is None or conn.lost is not None:
            addr = self.bootstrap[i]
            conn = self.boot_conns[i] = await _connect(addr, lambda: _Conn(addr))
        return conn

    async def find_coordinators(self) -> None:
        sem = asyncio.Semaphore(256)

        async def one(i: int, g: _Group) -> None:
            async with sem:
                g.coord = await self._find(await self.boot_conn(i), g.gid)

        for i in range(len(self.bootstrap)):
            await self.boot_conn(i)
        await asyncio.gather(*(one(i, g) for i, g in enumerate(self.groups)))

    async def _find(self, conn: _Conn, gid: str) -> tuple[str, int]:
        deadline = time.monotonic() + 60
        while True:
            err, host, port = parse_find_coordinator_v2(await conn.call(FIND_COORDINATOR, 2,
                                                                        find_coordinator_v2(gid)))
            if err == 0:
                return host, port
            if time.monotonic() > deadline:
                raise BenchError(f"FindCoordinator({gid}): error {err} for 60 s")
            await asyncio.sleep(0.2)

    async def find_again(self, g: _Group) -> None:
        self.finds += 1
        for attempt in range(len(self.bootstrap) + 1):
            try:
                g.coord = await self._find(await self.boot_conn(self.rng.randrange(len(self.bootstrap))), g.gid)
                return
            except (OSError, ConnectionError):
                if attempt == len(self.bootstrap):
                    raise
                await asyncio.sleep(0.2)

    async def heartbeat_conn(self, coord: tuple[str, int], m: int) -> _HbConn:
        conns = self.hb_conns.get(coord)
        if conns is None:
            async with self.hb_lock:
                conns = self.hb_conns.get(coord)
                if conns is None:
                    conns = [await _connect(coord, lambda: _HbConn(coord, self))
                             for _ in range(self.cfg["connections"])]
                    self.hb_conns[coord] = conns
        return conns[m % len(conns)]

    async def take_lane(self, coord: tuple[str, int], k: int) -> list[_Conn]:
        sem = self.lane_sems.get(coord)
        if sem is None:
            sem = self.lane_sems[coord] = asyncio.Semaphore(self.cfg["lanes"])
            self.lanes_free[coord] = []
        await sem.acquire()
        free = self.lanes_free[coord]
        for i, lane in enumerate(free):
            if len(lane) >= k:
                return free.pop(i)
        try:
            return [await _connect(coord, lambda: _Conn(coord)) for _ in range(k)]
        except BaseException:
            sem.release()
            raise

    def give_lane(self, coord: tuple[str, int], lane: list[_Conn]) -> None:
        """Back to the pool once no request of it is still held by the node (a JoinGroup or SyncGroup
        of a round that failed can be); closed if a connection was lost or it stays busy."""
        def idle() -> bool:
            return all(c.answers >= c.requests for c in lane)

        def put_back() -> None:
            if all(c.lost is None for c in lane) and idle():
                self.lanes_free[coord].append(lane)
            else:
                for c in lane:
                    c.close()
            self.lane_sems[coord].release()

        if idle() or any(c.lost is not None for c in lane):
            return put_back()

        async def drain() -> None:
            end = time.monotonic() + self.cfg["rebalance_ms"] / 1000 + 30
            while not idle() and time.monotonic() < end and all(c.lost is None for c in lane):
                await asyncio.sleep(0.05)
            put_back()

        self.lanes_draining += 1
        task = asyncio.get_running_loop().create_task(drain())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # -- join

    async def establish(self, g: _Group) -> None:
        if self.consumer_protocol:
            await self._retry_join(g, lambda coord: self.consumer_round(g, coord))
        else:
            await self._retry_join(g, lambda coord: self.classic_round(g, coord))
            assert g.coord is not None
            for j, m in enumerate(g.members):
                self.m_tail[m] = CLIENT_ID + heartbeat_v3(g.gid, g.gen, g.ids[j])
                self.m_conn[m] = await self.heartbeat_conn(g.coord, m)
                self.m_sent[m] = 0.0
        g.stable = True
        if not g.established:
            g.established = True
            self.joined_members += g.k

    async def _retry_join(self, g: _Group, join_round: Callable[[tuple[str, int]], Awaitable[None]]) -> None:
        """Join rounds until one completes: a moved coordinator is found again, a lost connection
        or a timeout retried after 0.5 s, up to ``--join-timeout``."""
        deadline = time.monotonic() + self.cfg["join_timeout"]
        while True:
            if g.coord is None:
                await self.find_again(g)
            coord = g.coord
            assert coord is not None
            try:
                await join_round(coord)
                return
            except* _Moved:
                g.coord = None
            except* (ConnectionError, TimeoutError) as eg:
                self.join_errors[-1] = self.join_errors.get(-1, 0) + len(eg.exceptions)
                await asyncio.sleep(0.5)
            if time.monotonic() > deadline:
                raise BenchError(f"group {g.gid} not stable after {self.cfg['join_timeout']:.0f}s "
                                 f"(join errors {self.join_errors})")

    async def classic_round(self, g: _Group, coord: tuple[str, int]) -> None:
        """One rebalance over a lane of the group's own connections: member ids first, so that the
        JoinGroups reach the coordinator together, then join and sync."""
        lane = await self.take_lane(coord, g.k)
        self.join_rounds += 1
        try:
            rnd_ = _JoinRound()
            async with asyncio.TaskGroup() as tg:
                for j in range(g.k):
                    if not g.ids[j]:
                        tg.create_task(self.member_id(g, j, lane[j]))
            async with asyncio.TaskGroup() as tg:
                for j in range(g.k):
                    tg.create_task(self.member_join(g, j, lane[j], rnd_))
        finally:
            self.give_lane(coord, lane)

    async def consumer_round(self, g: _Group, coord: tuple[str, int]) -> None:
        """KIP-848: each member joins with one ConsumerGroupHeartbeat at epoch 0 (its own member id,
        v1); nothing is held, so they all go over the shared heartbeat connections."""
        async with asyncio.TaskGroup() as tg:
            for j, m in enumerate(g.members):
                if not g.ids[j]:
                    g.ids[j] = base64.urlsafe_b64encode(uuid.UUID(int=self.rng.getrandbits(128)).bytes
                                                        ).decode().rstrip("=")
                tg.create_task(self.consumer_join(g, j, m, coord))

    async def consumer_join(self, g: _Group, j: int, m: int, coord: tuple[str, int]) -> None:
        conn = await self.heartbeat_conn(coord, m)
        while True:
            self.join_requests += 1
            err, epoch = parse_consumer_heartbeat_v1(await conn.call(
                CONSUMER_GROUP_HEARTBEAT, 1, consumer_heartbeat_v1(g.gid, g.ids[j], 0, self.cfg["rebalance_ms"])))
            if err == 0:
                break
            self._join_error(err)
            if err in MOVED:
                raise _Moved()
            await asyncio.sleep(0.1)
        self.m_conn[m] = conn
        self.m_sent[m] = 0.0
        self.on_epoch(m, epoch)

    def on_epoch(self, m: int, epoch: int) -> None:
        """A consumer-protocol member's epoch moved (members joining bump the group's): its next
        heartbeats carry the new one."""
        if epoch > 0 and (epoch != self.m_epoch[m] or not self.m_tail[m]):
            self.m_epoch[m] = epoch
            g = self.groups[self.m_group[m]]
            self.m_tail[m] = CLIENT_ID + consumer_heartbeat_v1(g.gid, g.ids[self.m_slot[m]], epoch, -1)

    async def member_id(self, g: _Group, j: int, conn: _Conn) -> None:
        self.join_requests += 1
        err, _, _, member_id, _ = parse_join_group_v5(await conn.call(
            JOIN_GROUP, 5, join_group_v5(g.gid, "", self.cfg["session_ms"], self.cfg["rebalance_ms"]),
            self.cfg["rebalance_ms"] / 1000 + REQUEST_TIMEOUT_S))
        if err in MOVED:
            self._join_error(err)
            raise _Moved()
        if err in (0, MEMBER_ID_REQUIRED):
            g.ids[j] = member_id
        else:
            self._join_error(err)

    def _join_error(self, err: int) -> None:
        self.join_errors[err] = self.join_errors.get(err, 0) + 1

    async def member_join(self, g: _Group, j: int, conn: _Conn, rnd_: _JoinRound) -> None:
        cfg = self.cfg
        join_timeout = cfg["rebalance_ms"] / 1000 + REQUEST_TIMEOUT_S
        while True:
            self.join_requests += 1
            err, gen, leader, member_id, members = parse_join_group_v5(await conn.call(
                JOIN_GROUP, 5, join_group_v5(g.gid, g.ids[j], cfg["session_ms"], cfg["rebalance_ms"]),
                join_timeout))
            if err == MEMBER_ID_REQUIRED:
                g.ids[j] = member_id
                continue
            if err:
                self._join_error(err)
                if err in MOVED:
                    raise _Moved()
                if err == UNKNOWN_MEMBER_ID:
                    g.ids[j] = ""
                elif err != REBALANCE_IN_PROGRESS:
                    await asyncio.sleep(0.1)
                continue
            g.ids[j] = member_id
            self.sync_requests += 1
            err = error_of(await conn.call(
                SYNC_GROUP, 3, sync_group_v3(g.gid, gen, member_id, members if leader == member_id else []),
                join_timeout))
            if err:
                self._join_error(err)
                if err in MOVED:
                    raise _Moved()
                if err == UNKNOWN_MEMBER_ID:
                    g.ids[j] = ""
                continue
            rnd_.synced[j] = gen
            if len(rnd_.synced) == g.k and len(set(rnd_.synced.values())) == 1:
                g.gen = gen
                rnd_.done.set()
                return
            # synced, the group not complete yet: heartbeat until it is or a rebalance shows
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(rnd_.done.wait(), SYNCED_POLL_S)
                    return
                self.join_heartbeats += 1
                err = error_of(await conn.call(HEARTBEAT, 3, heartbeat_v3(g.gid, gen, member_id)))
                if err:
                    break
            rnd_.synced.pop(j, None)
            if err != REBALANCE_IN_PROGRESS:
                self._join_error(err)
            if err in MOVED:
                raise _Moved()
            if err == UNKNOWN_MEMBER_ID:
                g.ids[j] = ""

    async def rejoin(self, g: _Group, slot: int, err: int) -> None:
        """After a heartbeat error: as a client, find the coordinator again on NOT_COORDINATOR (and
        go on heartbeating in the same generation), rejoin on anything else."""
        try:
            if err in MOVED:
                self.refinds += 1
                old = g.coord
                await asyncio.sleep(0.1)
                await self.find_again(g)
                assert g.coord is not None
                if g.coord != old:
                    for m in g.members:
                        self.m_conn[m] = await self.heartbeat_conn(g.coord, m)
                g.stable = True
                return
            self.rejoins += 1
            if err == UNKNOWN_MEMBER_ID or (self.consumer_protocol and err == FENCED_MEMBER_EPOCH):
                g.ids[slot] = ""
            await self.establish(g)
        except (BenchError, OSError, ConnectionError, TimeoutError) as e:
            self.fatal = f"group {g.gid}: {type(e).__name__}: {e}"

    # -- heartbeats

    def on_heartbeat(self, m: int, err: int, now: float) -> None:
        t = self.m_sent[m]
        self.m_sent[m] = 0.0
        if self.w0 and self.w0 <= t < self.w1:
            if err == 0:
                self.ok += 1
                self.lat.append(now - t)
                self.lat_at.append(t)
            else:
                self.errors[err] = self.errors.get(err, 0) + 1
        elif err:
            self.errors_outside[err] = self.errors_outside.get(err, 0) + 1
        if err == 0:
            self.ok_total += 1
            return
        g = self.groups[self.m_group[m]]
        if g.stable:
            g.stable = False
            task = asyncio.get_running_loop().create_task(self.rejoin(g, self.m_slot[m], err))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def scheduler(self) -> None:
        nb = max(1, round(self.cfg["interval"] / TICK_S))
        buckets: list[list[int]] = [[] for _ in range(nb)]
        for m in range(len(self.m_group)):
            buckets[self.rng.randrange(nb)].append(m)
        groups, m_group, m_tail, m_conn, m_sent = self.groups, self.m_group, self.m_tail, self.m_conn, self.m_sent
        pack = HB_HEAD.pack
        hb_api, hb_version = self.hb_api, self.hb_version
        duration = self.cfg["duration"]
        origin = time.monotonic()
        idx = 0
        wrote: list[int] = []
        dirty: set[_HbConn] = set()
        while not self.closing:
            now = time.monotonic()
            if not self.w0:
                v = float(self.t_start.value)
                if v:
                    self.w0, self.w1 = v, v + duration
            w0, w1 = self.w0, self.w1
            if w0 and not self.cpu0 and now >= w0:
                self.cpu0 = time.process_time()
            if w0 and not self.cpu1 and now >= w1:
                self.cpu1 = time.process_time()
            inwin = w0 <= now < w1
            cur = int((now - origin) / TICK_S)
            while idx <= cur:
                if inwin:
                    self.lags.append(now - (origin + idx * TICK_S))
                for m in buckets[idx % nb]:
                    if not groups[m_group[m]].stable:
                        continue
                    if m_sent[m]:
                        if inwin:
                            self.skipped += 1
                        continue
                    conn = m_conn[m]
                    assert conn is not None
                    corr = conn.corr = (conn.corr + 1) & 0x7FFFFFFF
                    conn.members[corr] = m
                    tail = m_tail[m]
                    conn.out.append(pack(8 + len(tail), hb_api, hb_version, corr) + tail)
                    m_sent[m] = now
                    wrote.append(m)
                    dirty.add(conn)
                idx += 1
            if dirty:
                for conn in dirty:
                    if conn.lost is None:
                        conn.transport.write(b"".join(conn.out))
                    conn.out.clear()
                dirty.clear()
                t_write = time.monotonic()
                for m in wrote:
                    if m_sent[m]:
                        m_sent[m] = t_write
                if inwin:
                    self.sent += len(wrote)
                wrote.clear()
            self.progress[2 * self.wid] = self.joined_members
            self.progress[2 * self.wid + 1] = self.ok_total
            await asyncio.sleep(max(0.0, origin + idx * TICK_S - time.monotonic()))

    # -- the whole run

    async def run(self, pipe: Any) -> None:
        t0 = time.monotonic()
        await self.find_coordinators()
        t_found = time.monotonic()
        sched = asyncio.create_task(self.scheduler())
        joins = [asyncio.create_task(self.establish(g)) for g in self.groups]
        pending: set[asyncio.Task[Any]] = set(joins)
        while pending:
            _, pending = await asyncio.wait(pending, timeout=0.5)
            self._check(sched)
        for t in joins:
            t.result()
        t_stable = time.monotonic()
        pipe.send(("stable", {"t_find": t0, "t_join": t_found, "t_stable": t_stable,
                              "coordinators": sorted(f"{h}:{p}" for h, p in self.hb_conns)}))
        while not self.w0 or time.monotonic() < self.w1:
            await asyncio.sleep(0.05)
            self._check(sched)
        end = time.monotonic() + DRAIN_S
        while time.monotonic() < end and any(self.w0 <= t < self.w1 for t in self.m_sent):
            await asyncio.sleep(0.05)
            self._check(sched)
        w0, w1 = self.w0, self.w1
        timeouts = sum(1 for t in self.m_sent if w0 <= t < w1)
        lat_ms = array("f", (x * 1000.0 for x in self.lat))
        slice_of = array("H", (min(65535, int((t - w0) / SLICE_S)) for t in self.lat_at))
        lag_ms = array("f", (x * 1000.0 for x in self.lags))
        pipe.send(("result", {
            "sent": self.sent, "ok": self.ok, "errors": self.errors, "timeouts": timeouts,
            "skipped_in_flight": self.skipped, "errors_outside_window": self.errors_outside,
            "rejoins": self.rejoins, "refinds": self.refinds,
            "join_rounds": self.join_rounds, "lanes_drained": self.lanes_draining,
            "lane_connections": sum(len(lane) for lanes in self.lanes_free.values() for lane in lanes), "join_requests": self.join_requests, "sync_requests": self.sync_requests,
            "join_heartbeats": self.join_heartbeats, "join_errors": self.join_errors,
            "cpu_s": (self.cpu1 or time.process_time()) - self.cpu0, "lat_ms": lat_ms.tobytes(), "slice_of": slice_of.tobytes(),
            "lag_ms": lag_ms.tobytes()}))
        while not pipe.poll():
            await asyncio.sleep(0.1)
            self._check(sched)
        pipe.recv()
        self.closing = True
        sched.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sched
        left = 0
        if self.cfg["leave"]:
            left = await self.leave_all()
        for conns in self.hb_conns.values():
            for c in conns:
                c.close()
        for lanes in self.lanes_free.values():
            for lane in lanes:
                for lc in lane:
                    lc.close()
        pipe.send(("left", {"groups_left": left}))

    def _check(self, sched: asyncio.Task[Any]) -> None:
        if self.fatal is not None:
            raise BenchError(self.fatal)
        if sched.done():
            sched.result()
            raise BenchError("heartbeat scheduler stopped")

    async def leave_all(self) -> int:
        sem = asyncio.Semaphore(256)
        left = 0

        async def one(g: _Group) -> None:
            nonlocal left
            if g.coord is None or g.coord not in self.hb_conns:
                return
            conn = self.hb_conns[g.coord][hash(g.gid) % len(self.hb_conns[g.coord])]
            async with sem:
                with contextlib.suppress(ConnectionError, TimeoutError):
                    if self.consumer_protocol:  # each member leaves with epoch -1
                        answers = await asyncio.gather(*(conn.call(
                            CONSUMER_GROUP_HEARTBEAT, 1, consumer_heartbeat_v1(g.gid, mid, -1, -1), 30.0)
                            for mid in g.ids))
                        if all(parse_consumer_heartbeat_v1(a)[0] == 0 for a in answers):
                            left += 1
                    elif error_of(await conn.call(LEAVE_GROUP, 3, leave_group_v3(g.gid, g.ids), 30.0)) == 0:
                        left += 1

        await asyncio.gather(*(one(g) for g in self.groups if g.established))
        return left


def _worker_main(wid: int, bootstrap: str, groups: list[tuple[str, int]], cfg: dict[str, Any], pipe: Any,
                 progress: Any, t_start: Any) -> None:
    try:
        import uvloop

        factory: Any = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        factory = None
    w = _Worker(wid, bootstrap, groups, cfg, progress, t_start)
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(w.run(pipe))
    except BaseException as e:  # noqa: BLE001 - the parent reports it
        with contextlib.suppress(Exception):
            pipe.send(("error", f"worker {wid}: {type(e).__name__}: {e}"))


# ------------------------------------------------------------------ the parent


def plan(members: int, groups: int, rid: str) -> list[tuple[str, int]]:
    if groups < 1 or members < groups:
        raise BenchError(f"need members >= groups >= 1 (members={members}, groups={groups})")
    base, extra = divmod(members, groups)
    return [(f"hb-{rid}-{g}", base + (1 if g < extra else 0)) for g in range(groups)]


def _expect(pipe: Any, kind: str, timeout: float, wid: int) -> dict[str, Any]:
    if not pipe.poll(timeout):
        raise BenchError(f"worker {wid}: no '{kind}' after {timeout:.0f}s")
    msg = pipe.recv()
    if msg[0] == "error":
        raise BenchError(msg[1])
    if msg[0] != kind:
        raise BenchError(f"worker {wid}: expected '{kind}', got '{msg[0]}'")
    return dict(msg[1])


def _pct(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, int(-(-q * len(sorted_values) // 100)) - 1))
    return sorted_values[k]


def measure(name: str, bootstrap: str, args: Any, rep: Reporter, pids: list[int] | None = None,
            leave: bool = True) -> dict[str, Any]:
    rid = run_id()
    groups = plan(args.members, args.groups, rid)
    nprocs = max(1, min(args.procs, len(groups)))
    settle = args.interval if args.settle is None else args.settle
    cfg = {"interval": args.interval, "duration": args.duration, "session_ms": args.session_timeout_ms,
           "rebalance_ms": args.rebalance_timeout_ms, "connections": args.connections, "lanes": args.lanes,
           "join_timeout": args.join_timeout, "leave": leave, "seed": random.randrange(1 << 30),
           "group_protocol": args.group_protocol}
    ctx = mp_context()
    progress = ctx.Array("q", 2 * nprocs, lock=False)
    t_start = ctx.Value("d", 0.0, lock=False)
    procs, pipes = [], []
    tick = os.sysconf("SC_CLK_TCK")
    cpu_join = [_cpu_ticks(p) for p in pids or []]
    t_spawn = time.monotonic()
    rep.note(f"{name}: {args.members:,} members in {len(groups):,} groups on {bootstrap}, "
             f"{nprocs} load generator process(es)")
    for w in range(nprocs):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_worker_main, args=(w, bootstrap, groups[w::nprocs], cfg, child, progress, t_start),
                        daemon=True)
        p.start()
        procs.append(p)
        pipes.append(parent)
    try:
        stable: list[dict[str, Any] | None] = [None] * nprocs
        deadline = time.monotonic() + args.join_timeout + 60
        timeline: list[int] = []  # members stable every 5 s from the spawn of the workers
        with rep.phase(f"{name}: find coordinators, join", None,
                       lambda: sum(progress[2 * w] for w in range(nprocs)), "members stable"):
            while any(s is None for s in stable):
                if time.monotonic() - t_spawn >= 5 * (len(timeline) + 1):
                    timeline.append(sum(progress[2 * w] for w in range(nprocs)))
                if time.monotonic() > deadline:
                    raise BenchError(f"members not stable after {args.join_timeout:.0f}s: "
                                     f"{sum(progress[2 * w] for w in range(nprocs)):,} of {args.members:,}")
                for w, pipe in enumerate(pipes):
                    if stable[w] is None and pipe.poll(0.1):
                        stable[w] = _expect(pipe, "stable", 0, w)
                    if stable[w] is None and not procs[w].is_alive():
                        raise BenchError(f"worker {w} exited {procs[w].exitcode}")
        st = [s for s in stable if s is not None]
        join_cpu = [(b - a) / tick / (time.monotonic() - t_spawn) * 100
                    for a, b in zip(cpu_join, [_cpu_ticks(p) for p in pids or []], strict=True)]
        find_s = max(s["t_join"] for s in st) - min(s["t_find"] for s in st)
        joined_s = max(s["t_stable"] for s in st) - min(s["t_join"] for s in st)
        rep.note(f"{name}: coordinators found in {find_s:.1f}s; {args.members:,} members stable "
                 f"in {joined_s:.1f}s ({args.members / max(joined_s, 1e-9):,.0f} members/s)")
        if settle > 0:
            with rep.phase(f"{name}: settle", settle):
                time.sleep(settle)
        w0 = time.monotonic() + 0.05
        cpu_a = [_cpu_ticks(p) for p in pids or []]
        host_a = host_cpu()
        t_start.value = w0
        ok_at_start = sum(progress[2 * w + 1] for w in range(nprocs))
        with rep.phase(f"{name}: measuring", args.duration,
                       lambda: sum(progress[2 * w + 1] for w in range(nprocs)) - ok_at_start, "heartbeats ok"):
            time.sleep(max(0.0, w0 + args.duration - time.monotonic()))
        cpu_b = [_cpu_ticks(p) for p in pids or []]
        host_b = host_cpu()
        results = [_expect(pipe, "result", DRAIN_S + 60, w) for w, pipe in enumerate(pipes)]
        for pipe in pipes:
            pipe.send("stop")
        left = 0
        if leave:
            with rep.phase(f"{name}: leave"):
                left = sum(_expect(pipe, "left", 120, w)["groups_left"] for w, pipe in enumerate(pipes))
    finally:
        for p in procs:
            p.join(5 if leave else 1)
            if p.is_alive():
                p.kill()
                p.join(5)
    lat: list[float] = []
    slices: list[list[float]] = [[] for _ in range(max(1, int(args.duration / SLICE_S + 0.999)))]
    lags: list[float] = []
    for r in results:
        part = array("f", r.pop("lat_ms"))
        lat.extend(part)
        for x, i in zip(part, array("H", r.pop("slice_of")), strict=True):
            slices[min(i, len(slices) - 1)].append(x)
        lags.extend(array("f", r.pop("lag_ms")))
    lat.sort()
    lags.sort()
    errors: dict[str, int] = {}
    for key in ("errors", "errors_outside_window", "join_errors"):
        merged: dict[int, int] = {}
        for r in results:
            for code, n in r[key].items():
                merged[code] = merged.get(code, 0) + n
        if key == "errors":
            errors = {str(k): v for k, v in sorted(merged.items())}
        else:
            results[0][key + "_merged"] = {str(k): v for k, v in sorted(merged.items())}
    sent = sum(r["sent"] for r in results)
    ok = sum(r["ok"] for r in results)
    expected = args.members / args.interval
    achieved = ok / args.duration
    out: dict[str, Any] = {
        "members": args.members, "groups": len(groups), "procs": nprocs,
        "coordinators": len({c for s in st for c in s["coordinators"]}),
        "find_coordinator_s": rnd(find_s, 2), "joined_s": rnd(joined_s, 2),
        "join_members_per_s": rnd(args.members / max(joined_s, 1e-9), 0),
        "join_requests": sum(r["join_requests"] for r in results),
        "sync_requests": sum(r["sync_requests"] for r in results),
        "join_heartbeats": sum(r["join_heartbeats"] for r in results),
        "join_rounds": sum(r["join_rounds"] for r in results),
        "join_lanes_drained": sum(r["lanes_drained"] for r in results),
        "join_lane_connections": sum(r["lane_connections"] for r in results),
        "join_errors": results[0]["join_errors_merged"],
        "join_timeline_5s": timeline,
        "sent": sent, "ok": ok, "errors": sum(errors.values()), "error_codes": errors,
        "timeouts": sum(r["timeouts"] for r in results),
        "skipped_in_flight": sum(r["skipped_in_flight"] for r in results),
        "errors_outside_window": results[0]["errors_outside_window_merged"],
        "rejoins": sum(r["rejoins"] for r in results),
        "coordinator_refinds": sum(r["refinds"] for r in results),
        "expected_per_s": rnd(expected, 1), "achieved_per_s": rnd(achieved, 1),
        "achieved_pct": rnd(100.0 * achieved / expected, 1),
        "p50_ms": rnd(_pct(lat, 50), 2), "p99_ms": rnd(_pct(lat, 99), 2), "p999_ms": rnd(_pct(lat, 99.9), 2),
        "max_ms": rnd(lat[-1] if lat else None, 2),
        "p99_ms_per_5s": [rnd(_pct(sorted(x), 99), 1) for x in slices],
        "loadgen_cpu_pct": rnd(100.0 * sum(r["cpu_s"] for r in results) / args.duration, 1),
        "host_cpu_busy_pct": rnd(100.0 * (host_b[0] - host_a[0]) / max(host_b[1] - host_a[1], 1), 1),
        "host_cpus": os.cpu_count(),
        "loadgen_lag_p99_ms": rnd(_pct(lags, 99), 2), "loadgen_lag_max_ms": rnd(lags[-1] if lags else None, 2),
    }
    if pids:
        per = [(b - a) / tick / args.duration * 100 for a, b in zip(cpu_a, cpu_b, strict=True)]
        out["nodes_cpu_pct"] = rnd(sum(per), 1)
        out["nodes_cpu_pct_per_node"] = [rnd(x, 1) for x in per]
        out["join_nodes_cpu_pct"] = rnd(sum(join_cpu), 1)
        out["join_nodes_cpu_pct_per_node"] = [rnd(x, 1) for x in join_cpu]
    if leave:
        out["groups_left"] = left
    return out


class Heartbeat(_ClusterScenario):
    """Members of many groups heartbeat at a fixed interval; latency and achieved rate."""

    NAME = "heartbeat"

    @classmethod
    def add_arguments(cls, p: Any) -> None:
        super().add_arguments(p)
        p.add_argument("--members", "-n", type=int, default=50_000, help="members in all (default 50000)")
        p.add_argument("--groups", "-g", type=int, default=10_000, help="groups (default 10000)")
        p.add_argument("--interval", type=float, default=3.0, help="heartbeat interval, s (default 3)")
        p.add_argument("--duration", "-d", type=float, default=60.0, help="seconds measured (default 60)")
        p.add_argument("--settle", type=float, default=None,
                       help="seconds between all members stable and the measurement (default: one interval)")
        p.add_argument("--procs", type=int, default=1, help="load generator processes (default 1)")
        p.add_argument("--connections", type=int, default=100,
                       help="heartbeat connections per coordinator and process (default 100; a node serves "
                            "one request per connection at a time, so few connections queue heartbeats)")
        p.add_argument("--lanes", type=int, default=64,
                       help="groups joining at once per coordinator and process, one connection per member "
                            "each (default 64)")
        p.add_argument("--session-timeout-ms", type=int, default=30000, help="session timeout (default 30000)")
        p.add_argument("--rebalance-timeout-ms", type=int, default=30000, help="rebalance timeout (default 30000)")
        p.add_argument("--join-timeout", type=float, default=900.0,
                       help="max seconds until every member is stable (default 900)")
        p.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic",
                       help="classic (JoinGroup/SyncGroup, Heartbeat v3) or consumer (KIP-848: "
                            "ConsumerGroupHeartbeat v1, members subscribed to no topic)")

    @classmethod
    def params(cls, args: Any) -> dict[str, Any]:
        return {"members": args.members, "groups": args.groups, "interval_s": args.interval,
                "duration_s": args.duration, "procs": args.procs, "connections": args.connections,
                "session_timeout_ms": args.session_timeout_ms, "group_protocol": args.group_protocol}

    @classmethod
    def metrics(cls, args: Any) -> list[Metric]:
        return [Metric("members", "members", "", ""),
                Metric("groups", "groups", "", ""),
                Metric("joined_s", "all members stable after", "s", "lower"),
                Metric("join_members_per_s", "join rate", "members/s", "higher"),
                Metric("join_nodes_cpu_pct", "nodes CPU while joining, % of one core (all)", "%", "lower"),
                Metric("sent", "heartbeats sent (window)", "", ""),
                Metric("ok", "heartbeats ok", "", ""),
                Metric("errors", "heartbeat errors", "", ""),
                Metric("timeouts", "heartbeats unanswered", "", ""),
                Metric("expected_per_s", "expected (members / interval)", "/s", ""),
                Metric("achieved_per_s", "achieved (ok / duration)", "/s", "higher"),
                Metric("achieved_pct", "achieved / expected", "%", "higher"),
                Metric("p50_ms", "heartbeat latency p50", "ms", "lower"),
                Metric("p99_ms", "heartbeat latency p99", "ms", "lower"),
                Metric("max_ms", "heartbeat latency max", "ms", "lower"),
                Metric("loadgen_cpu_pct", "load generator CPU, % of one core", "%", "lower"),
                Metric("loadgen_lag_p99_ms", "load generator schedule lag p99", "ms", "lower"),
                Metric("nodes_cpu_pct", "nodes CPU, % of one core (all)", "%", "lower"),
                Metric("host_cpu_busy_pct", "host CPU busy, % of all cores (anything)", "%", "")]

    @classmethod
    def ok(cls, result: dict[str, Any]) -> bool:
        return (result.get("errors") == 0 and result.get("timeouts") == 0
                and result.get("achieved_per_s") is not None
                and result["achieved_per_s"] >= 0.95 * result["expected_per_s"])

    @classmethod
    def precheck(cls, bootstrap: str, args: Any) -> None:
        plan(args.members, args.groups, "x")

    @classmethod
    def run_one(cls, name: str, bootstrap: str, args: Any, rep: Reporter) -> dict[str, Any]:
        return measure(name, bootstrap, args, rep)

    @classmethod
    def run_cluster(cls, args: Any, rep: Reporter) -> dict[str, Any]:
        plan(args.members, args.groups, "x")
        args = argparse.Namespace(**vars(args))
        args.kcoord_set = ["group.initial.rebalance.delay.ms=0", *args.kcoord_set]
        return super().run_cluster(args, rep)

    @classmethod
    def drive(cls, cluster: LocalCluster, args: Any, rep: Reporter) -> dict[str, Any]:
        pids = [cluster.pid(i) for i in range(len(cluster.layout))]
        return measure("kcoord", cluster.bootstrap, args, rep, pids=pids, leave=False)
