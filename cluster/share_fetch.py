"""Share fetching on a partition leader (KIP-932): ShareFetch (78) and ShareAcknowledge (79) v1-2,
share sessions, the leader's share partitions (``coordinator.share_group.partition``) and their
persistence, plus the two share-state APIs other nodes' leaders call: ReadShareGroupState (84) v0
and WriteShareGroupState (85) v1.

A share partition is loaded from the share state its group's coordinator keeps (read at this
leader's epoch, which fences earlier leaders' writes); every acknowledgement, release and lock
expiry is written there before it is answered, and undone in memory if that write fails. The
coordinator is asked directly when it is this node, over the wire otherwise. Sessions, like
Kafka's, are per (group, member) on each leader: epoch 0 opens one (no acknowledgements then), -1
closes it (releasing what the member still holds), any other epoch must be the expected one.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as KErr
from kio.static.primitive import Records

from cluster.apis.common import ZERO, mk, req_mod, resp_mod, to_ms, version_of
from cluster.apis.groups import GroupApi
from cluster.data_plane import DataPartition
from cluster.dispatch import RequestContext
from cluster.peer_client import PeerClient, PeerRequestError
from cluster.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from cluster.security.tls import peer_context
from cluster.services import Catalog, Guarded, Identity, Placement, Registers
from coordinator import commands as c
from coordinator.errors import ErrorCode
from coordinator.partitioner import partition_for
from coordinator.share_group.partition import RENEW, SharePartition, Undo
from coordinator.share_group.records import SharePartitionState, StateBatch
from replication.record_batch import iter_batches

log = logging.getLogger("kcoord.share_fetch")

SHARE_FETCH, SHARE_ACKNOWLEDGE, READ_STATE, WRITE_STATE = 78, 79, 84, 85
CONTROL_BATCH = 0x20  # attributes bit: a transaction marker, never delivered
LOCK_MS = 30_000  # group.share.record.lock.duration.ms
DELIVERY_LIMIT = 5  # group.share.delivery.count.limit
MAX_RECORD_LOCKS = 2000  # group.share.partition.max.record.locks
EXPIRY_TICK_S = 0.1
MAX_SESSIONS = 2000  # group.share.max.share.sessions
SESSION_IDLE_S = 60.0  # a session unused this long gives way to a new one when the cache is full
MAX_SESSION_PARTITIONS = 10_000
COORDINATOR_MOVING = frozenset({int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                                int(ErrorCode.NOT_COORDINATOR)})


class Needs(Registers, Placement, Identity, Catalog, Guarded, Protocol):
    """What this module uses of its node (``cluster.services``)."""


Key = tuple[str, str, int]  # (group, topic id hex, partition)


@dataclass
class Session:
    epoch: int
    partitions: dict[tuple[str, int], None] = field(default_factory=dict)  # (topic id hex, partition), in order
    used_s: float = field(default_factory=time.monotonic)


@dataclass
class Loaded:
    sp: SharePartition
    leader_epoch: int
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one write at a time, in order


class StateError(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or str(code))
        self.code = code


class ShareFetchApi:
    def __init__(self, node: Needs, groups: GroupApi) -> None:
        self.node = node
        self.groups = groups
        self.sessions: dict[tuple[str, str], Session] = {}
        self.loaded: dict[Key, Loaded] = {}
        self._loading: dict[Key, asyncio.Task[Loaded]] = {}
        self.peers = PeerClient(f"kcoord-{node.node_id}-share-state", ssl_context=peer_context(node.config))
        self._expiry: asyncio.Task[None] | None = None

    # ---------------------------------------------------------------- share state at the coordinator

    async def _state(self, group: str, topic: str, partition: int, leader_epoch: int,
                     write: c.ShareStateWrite | None) -> c.ShareStateResponse:
        leader = self.node.topology.offsets_leader(partition_for(group, self.node.offsets_partitions))
        if leader is None:
            raise StateError(int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        if leader.node_id == self.node.node_id:
            resp: c.ShareStateResponse = await self.groups.call(
                group, c.ShareStateRequest(group, topic, partition, leader_epoch, write))
            return resp
        try:
            if write is None:
                m = req_mod(READ_STATE, 0)
                r = await self.peers.request(leader.host, leader.port, READ_STATE, 0, mk(
                    m.ReadShareGroupStateRequest, group_id=group, topics=(mk(
                        m.ReadStateData, topic_id=uuid.UUID(hex=topic), partitions=(mk(
                            m.PartitionData, partition=partition, leader_epoch=leader_epoch),)),)))
                p = r.results[0].partitions[0]
                state = None
                if int(p.error_code) == 0:
                    state = SharePartitionState(0, int(p.state_epoch), leader_epoch, int(p.start_offset), 0, 0, tuple(
                        StateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state),
                                   int(b.delivery_count)) for b in p.state_batches))
                return c.ShareStateResponse(_code(int(p.error_code)), p.error_message, state)
            m = req_mod(WRITE_STATE, 1)
            r = await self.peers.request(leader.host, leader.port, WRITE_STATE, 1, mk(
                m.WriteShareGroupStateRequest, group_id=group, topics=(mk(
                    m.WriteStateData, topic_id=uuid.UUID(hex=topic), partitions=(mk(
                        m.PartitionData, partition=partition, state_epoch=0, leader_epoch=leader_epoch,
                        start_offset=write.start_offset, delivery_complete_count=write.delivery_complete_count,
                        state_batches=tuple(mk(m.StateBatch, first_offset=b.first_offset, last_offset=b.last_offset,
                                               delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                                            for b in write.batches)),)),)))
            p = r.results[0].partitions[0]
            return c.ShareStateResponse(_code(int(p.error_code)), p.error_message)
        except PeerRequestError as e:
            raise StateError(int(ErrorCode.COORDINATOR_NOT_AVAILABLE), str(e)) from e

    async def _load(self, key: Key, part: DataPartition) -> Loaded:
        """The share partition, loaded once per leadership; concurrent requests share one load,
        which runs as a task of its own (a requester that goes away does not cancel it)."""
        epoch = max(part.leader_term, 0)
        have = self.loaded.get(key)
        if have is not None and have.leader_epoch == epoch:
            return have
        task = self._loading.get(key)
        if task is None:
            task = self._loading[key] = asyncio.ensure_future(self._read_state(key, part, epoch))
            task.add_done_callback(lambda t: (self._loading.pop(key, None), t.cancelled() or t.exception()))
        return await asyncio.shield(task)

    async def _read_state(self, key: Key, part: DataPartition, epoch: int) -> Loaded:
        group, topic, partition = key
        resp = await self._state(group, topic, partition, epoch, None)
        if resp.error is not ErrorCode.NONE or resp.state is None:
            raise StateError(int(resp.error), resp.message)
        start = resp.state.start_offset
        if start < 0:  # share.auto.offset.reset: latest unless the group says earliest
            reset = self.node.metadata.group_configs.get(group, {}).get("share.auto.offset.reset", "latest")
            start = part.data.log_start_offset if reset == "earliest" else part.data.high_watermark
            fixed = await self._state(group, topic, partition, epoch, c.ShareStateWrite(start, ()))
            if fixed.error is not ErrorCode.NONE:
                raise StateError(int(fixed.error), fixed.message)
        done = Loaded(SharePartition.loaded(start, resp.state.batches, LOCK_MS, DELIVERY_LIMIT, MAX_RECORD_LOCKS),
                      epoch)
        self.loaded[key] = done
        log.info("event=share_partition_loaded group=%s topic_id=%s partition=%d start=%d leader_epoch=%d",
                 group, topic, partition, start, epoch)
        return done

    async def _persist(self, key: Key, loaded: Loaded, undo: Undo, changed: Iterable[int]) -> int:
        """Write what changed; undo it in memory when the write fails. Returns the error code."""
        sp = loaded.sp
        write = c.ShareStateWrite(sp.start, sp.state_batches(changed), sp.done_count())
        try:
            resp = await self._state(key[0], key[1], key[2], loaded.leader_epoch, write)
            code = int(resp.error)
        except StateError as e:
            code = e.code
        except Exception as e:  # noqa: BLE001 - whatever failed, the change was not stored
            log.warning("event=share_state_write_failed group=%s topic_id=%s partition=%d error=%r", *key, str(e))
            code = int(ErrorCode.UNKNOWN_SERVER_ERROR)
        if code != 0:
            sp.rollback(undo)
            if code in (int(ErrorCode.FENCED_LEADER_EPOCH), int(ErrorCode.INVALID_REQUEST)) \
                    and self.loaded.get(key) is loaded:
                # another leader took over, or the group's state is gone: load again when asked
                del self.loaded[key]
        return code

    # ---------------------------------------------------------------- lock expiry

    async def start(self) -> None:
        self._expiry = asyncio.ensure_future(self._expire_loop())

    async def stop(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        self.peers.close()

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(EXPIRY_TICK_S)
            now = self.node_now()
            for key, loaded in list(self.loaded.items()):
                deadline = loaded.sp.next_deadline()
                if deadline is None or deadline > now:
                    continue
                try:
                    async with loaded.lock:
                        undo = loaded.sp.snapshot()
                        released = loaded.sp.release(loaded.sp.expired(self.node_now()))
                        if released:
                            await self._persist(key, loaded, undo, released)
                except Exception as e:  # noqa: BLE001 - logged; the next tick tries again
                    log.warning("event=share_lock_expiry_failed group=%s topic_id=%s partition=%d error=%r",
                                key[0], key[1], key[2], str(e))

    @staticmethod
    def node_now() -> int:
        return int(time.time() * 1000)

    # ---------------------------------------------------------------- acknowledgements

    async def _acknowledge(self, group: str, member: str, topic: str, partition: int, batches: Any,
                           renew: bool) -> tuple[int, str | None]:
        """A member's acknowledgement batches of one partition: all applied or none, in one write
        (Kafka validates them all first too). RENEW only where the request says it holds some."""
        key = (group, topic, partition)
        part = self._leading(topic, partition)
        if isinstance(part, int):
            return part, None
        try:
            loaded = await self._load(key, part)
        except StateError as e:
            return e.code, str(e)
        async with loaded.lock:
            sp = loaded.sp
            undo = sp.snapshot()
            changed: list[int] = []
            for b in batches:
                types = [int(t) for t in b.acknowledge_types]
                if RENEW in types and not renew:
                    sp.rollback(undo)
                    return int(ErrorCode.INVALID_REQUEST), None
                code, done = sp.acknowledge(member, int(b.first_offset), int(b.last_offset), types,
                                               self.node_now())
                if code is not ErrorCode.NONE:
                    sp.rollback(undo)
                    return int(code), None
                changed.extend(done)
            if changed:
                written = await self._persist(key, loaded, undo, changed)
                if written != 0:
                    return written, None
        return 0, None

    def _leading(self, topic: str, partition: int) -> DataPartition | int:
        name = self._name(topic)
        if name is None:
            return int(ErrorCode.UNKNOWN_TOPIC_ID)
        part = self.node.topology.partition(name, partition)
        if part is None:
            return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not part.is_leader:
            for key in [k for k in self.loaded if k[1:] == (topic, partition)]:
                del self.loaded[key]  # another node leads it now: it loads the state from the coordinator
            return int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return part

    def _name(self, topic: str) -> str | None:
        meta = self.node.metadata.by_id(uuid.UUID(hex=topic))
        return meta.name if meta is not None and not meta.internal else None

    def _evict_idle(self) -> bool:
        """Make room for a session: drop the longest unused one if it has been idle a while (its
        member's records go back as their locks run out). Whether one went."""
        oldest = min(self.sessions.items(), key=lambda kv: kv[1].used_s, default=None)
        if oldest is None or time.monotonic() - oldest[1].used_s < SESSION_IDLE_S:
            return False
        del self.sessions[oldest[0]]
        return True

    def _release_member(self, group: str, member: str) -> None:
        """A closed session: the member's acquired records go back (written by the expiry loop's
        next pass, as their locks are made due now)."""
        for (g, _t, _p), loaded in self.loaded.items():
            if g == group:
                for o in loaded.sp.acquired_by(member):
                    loaded.sp.records[o].deadline_ms = 0

    # ---------------------------------------------------------------- ShareFetch

    async def share_fetch(self, ctx: RequestContext, req: Any) -> Any:
        m = resp_mod(SHARE_FETCH, version_of(req))
        bad = _refused(ctx, req)
        if bad is not None:
            return _fetch_error(req, bad[0])  # Kafka's error answer carries no message
        group, member, epoch = req.group_id, req.member_id, int(req.share_session_epoch)
        wanted = [(t.topic_id.hex, int(p.partition_index), p.acknowledgement_batches)
                  for t in req.topics if t.topic_id is not None for p in t.partitions]
        has_acks = any(acks for _t, _p, acks in wanted)
        skey = (group, member)
        session = self.sessions.get(skey)
        if epoch == 0:
            if has_acks:
                return _fetch_error(req, KErr.invalid_request)
            if session is None and len(self.sessions) >= MAX_SESSIONS and not self._evict_idle():
                return _fetch_error(req, KErr.share_session_limit_reached)
            session = self.sessions[skey] = Session(1, dict.fromkeys((t, p) for t, p, _ in wanted))
            full = True
        elif session is None:
            return _fetch_error(req, KErr.share_session_not_found)
        elif epoch == -1:
            full = False
        elif epoch != session.epoch:
            return _fetch_error(req, KErr.invalid_share_session_epoch)
        else:
            full = False
            session.epoch = _next_epoch(session.epoch)
            for f in req.forgotten_topics_data:
                for p in f.partitions:
                    if f.topic_id is not None:
                        session.partitions.pop((f.topic_id.hex, int(p)), None)
            for t, p, _ in wanted:
                session.partitions[(t, p)] = None
        if len(session.partitions) > MAX_SESSION_PARTITIONS:
            self.sessions.pop(skey, None)
            return _fetch_error(req, KErr.invalid_request, f"A share session holds at most {MAX_SESSION_PARTITIONS} "
                                                           "partitions.")
        session.used_s = time.monotonic()
        denied = {t for t, _p, _ in wanted if not self._may_read(ctx, t)}
        acks: dict[tuple[str, int], int] = {}
        for t, p, batches in wanted:
            if batches and t not in denied:
                acks[(t, p)], _ = await self._acknowledge(group, member, t, p, batches,
                                                          bool(getattr(req, "is_renew_ack", False)))
        if epoch == -1:
            self.sessions.pop(skey, None)
            self._release_member(group, member)
            parts = _parts(m, [(t, p) for t, p, _ in wanted], acks, {}, {})
            return _fetch_response(m, parts)
        max_wait = min(max(to_ms(req.max_wait), 0), self.node.config.fetch_max_wait_cap_ms) / 1000
        deadline = time.monotonic() + max_wait
        max_records = max(int(req.max_records), 1)
        budget = min(max(int(req.max_bytes), 0), self.node.config.fetch_max_bytes, ctx.room())
        targets = [tp for tp in session.partitions if tp[0] not in denied]
        while True:
            errors: dict[tuple[str, int], int] = {(t, p): int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                                                  for t, p in session.partitions if t in denied}
            got, waiters = await self._fetch_once(group, member, targets, max_records, budget, errors)
            left = deadline - time.monotonic()
            if got or errors or left <= 0 or not waiters or ctx.long_polls.behind():
                break
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            for part in waiters:
                part.add_waiter(fut)
            ctx.long_polls.add(fut)
            try:
                await asyncio.wait_for(fut, min(left, 0.5))  # also wakes for locks expiring meanwhile
            except TimeoutError:
                pass
            finally:
                ctx.long_polls.discard(fut)
                for part in waiters:
                    part.remove_waiter(fut)
        shown = [(t, p) for t, p in session.partitions
                 if full or (t, p) in got or (t, p) in errors or (t, p) in acks]
        return _fetch_response(m, _parts(m, shown, acks, errors, got))

    def _may_read(self, ctx: RequestContext, topic: str) -> bool:
        name = self._name(topic)
        return name is None or ctx.allowed(Operation.READ, ResourceType.TOPIC, name)

    async def _fetch_once(self, group: str, member: str, targets: list[tuple[str, int]], max_records: int,
                          budget: int, errors: dict[tuple[str, int], int]
                          ) -> tuple[dict[tuple[str, int], tuple[bytes, list[Any]]], list[DataPartition]]:
        got: dict[tuple[str, int], tuple[bytes, list[Any]]] = {}
        waiters: list[DataPartition] = []
        for t, p in targets:
            if max_records <= 0 or budget <= 0:
                break
            part = self._leading(t, p)
            if isinstance(part, int):
                errors[(t, p)] = part
                continue
            key = (group, t, p)
            try:
                loaded = await self._load(key, part)
            except StateError as e:
                if e.code in COORDINATOR_MOVING:
                    waiters.append(part)  # as Kafka's persister retries: no data yet, not an error
                    continue
                # what Kafka's share consumer takes for these: look the leader up again, or go on
                errors[(t, p)] = int(ErrorCode.NOT_LEADER_OR_FOLLOWER) if e.code == int(
                    ErrorCode.FENCED_LEADER_EPOCH) else int(ErrorCode.UNKNOWN_SERVER_ERROR)
                log.info("event=share_partition_load_failed group=%s topic_id=%s partition=%d error=%d message=%r",
                         group, t, p, e.code, str(e))
                continue
            async with loaded.lock:  # not while an acknowledgement's write is in flight
                sp = loaded.sp
                if part.data.log_start_offset > sp.start:
                    sp.below_log_start(part.data.log_start_offset)
                start = sp.fetch_from()
                hw = part.data.high_watermark
                if start >= hw or (sp.room() == 0 and start >= sp.end):
                    waiters.append(part)
                    continue
                data = part.plan_read(start, budget, min_one=True).execute()
                present: list[int] = []
                upto = start - 1
                for _pos, h in iter_batches(data, verify_crc=False):
                    if h.last_offset >= hw:
                        break
                    upto = h.last_offset
                    if not h.attributes & CONTROL_BATCH:
                        present.extend(range(max(h.base_offset, start), h.last_offset + 1))
                acquired = sp.acquire(member, present, upto, max_records, self.node_now(), first=start)
            if not acquired:
                waiters.append(part)
                continue
            max_records -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
            budget -= len(data)
            got[(t, p)] = (data, acquired)
        return got, waiters

    # ---------------------------------------------------------------- ShareAcknowledge

    async def share_acknowledge(self, ctx: RequestContext, req: Any) -> Any:
        m = resp_mod(SHARE_ACKNOWLEDGE, version_of(req))
        bad = _refused(ctx, req)
        if bad is not None:
            return _ack_error(req, bad[0])
        group, member, epoch = req.group_id, req.member_id, int(req.share_session_epoch)
        skey = (group, member)
        session = self.sessions.get(skey)
        if epoch == 0:
            return _ack_error(req, KErr.invalid_share_session_epoch)
        if session is None:
            return _ack_error(req, KErr.share_session_not_found)
        if epoch != -1:
            if epoch != session.epoch:
                return _ack_error(req, KErr.invalid_share_session_epoch)
            session.epoch = _next_epoch(session.epoch)
        session.used_s = time.monotonic()
        results: dict[str, list[Any]] = {}
        for t in req.topics:
            if t.topic_id is None:
                continue
            for p in t.partitions:
                tid = t.topic_id.hex
                code = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED) if not self._may_read(ctx, tid) else (
                    await self._acknowledge(group, member, tid, int(p.partition_index), p.acknowledgement_batches,
                                            bool(getattr(req, "is_renew_ack", False))))[0]
                results.setdefault(tid, []).append(mk(
                    m.PartitionData, partition_index=p.partition_index, error_code=KErr(code), error_message=None,
                    current_leader=mk(m.LeaderIdAndEpoch, leader_id=-1, leader_epoch=-1)))
        if epoch == -1:
            self.sessions.pop(skey, None)
            self._release_member(group, member)
        return mk(m.ShareAcknowledgeResponse, throttle_time=ZERO, error_code=KErr.none, error_message=None,
                  acquisition_lock_timeout=datetime.timedelta(milliseconds=LOCK_MS), node_endpoints=(),
                  responses=tuple(mk(m.ShareAcknowledgeTopicResponse, topic_id=uuid.UUID(hex=t), partitions=tuple(ps))
                                  for t, ps in results.items()))

    # ---------------------------------------------------------------- 84, 85 (other leaders)

    async def read_state(self, ctx: RequestContext, req: Any) -> Any:
        m = resp_mod(READ_STATE, version_of(req))
        t, p = req.topics[0], req.topics[0].partitions[0]
        resp: c.ShareStateResponse = await self.groups.call(req.group_id, c.ShareStateRequest(
            req.group_id, t.topic_id.hex if t.topic_id else "", int(p.partition), int(p.leader_epoch)))
        s = resp.state
        return mk(m.ReadShareGroupStateResponse, results=(mk(m.ReadStateResult, topic_id=t.topic_id, partitions=(mk(
            m.PartitionResult, partition=p.partition, error_code=KErr(int(resp.error)), error_message=resp.message,
            state_epoch=s.state_epoch if s else -1, start_offset=s.start_offset if s else -1,
            state_batches=tuple(mk(m.StateBatch, first_offset=b.first_offset, last_offset=b.last_offset,
                                   delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                                for b in (s.batches if s else ()))),)),))

    async def write_state(self, ctx: RequestContext, req: Any) -> Any:
        m = resp_mod(WRITE_STATE, version_of(req))
        t, p = req.topics[0], req.topics[0].partitions[0]
        write = c.ShareStateWrite(int(p.start_offset), tuple(
            StateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state), int(b.delivery_count))
            for b in p.state_batches), int(getattr(p, "delivery_complete_count", -1)))
        resp: c.ShareStateResponse = await self.groups.call(req.group_id, c.ShareStateRequest(
            req.group_id, t.topic_id.hex if t.topic_id else "", int(p.partition), int(p.leader_epoch), write))
        return mk(m.WriteShareGroupStateResponse, results=(mk(m.WriteStateResult, topic_id=t.topic_id, partitions=(mk(
            m.PartitionResult, partition=p.partition, error_code=KErr(int(resp.error)), error_message=resp.message),)),))


def _parts(m: Any, shown: list[tuple[str, int]], acks: dict[tuple[str, int], int], errors: dict[tuple[str, int], int],
           got: dict[tuple[str, int], tuple[bytes, list[Any]]]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for t, p in shown:
        data, acquired = got.get((t, p), (b"", []))
        out.setdefault(t, []).append(mk(
            m.PartitionData, partition_index=p, error_code=KErr(errors.get((t, p), 0)), error_message=None,
            acknowledge_error_code=KErr(acks.get((t, p), 0)), acknowledge_error_message=None,
            current_leader=mk(m.LeaderIdAndEpoch, leader_id=-1, leader_epoch=-1), records=Records(data),
            acquired_records=tuple(mk(m.AcquiredRecords, first_offset=a.first_offset, last_offset=a.last_offset,
                                      delivery_count=a.delivery_count) for a in acquired)))
    return out


def _fetch_response(m: Any, parts: dict[str, list[Any]]) -> Any:
    return mk(m.ShareFetchResponse, throttle_time=ZERO, error_code=KErr.none, error_message=None,
              acquisition_lock_timeout=datetime.timedelta(milliseconds=LOCK_MS), node_endpoints=(),
              responses=tuple(mk(m.ShareFetchableTopicResponse, topic_id=uuid.UUID(hex=t), partitions=tuple(ps))
                              for t, ps in parts.items()))


def _code(value: int) -> ErrorCode:
    """Another node's error code as the coordinator's (one it does not name: unknown)."""
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _next_epoch(epoch: int) -> int:
    return epoch + 1 if epoch < 2**31 - 1 else 1


def _refused(ctx: RequestContext, req: Any) -> tuple[KErr, str | None] | None:
    """KafkaApis's checks of a ShareFetch or ShareAcknowledge, in its order."""
    if req.group_id is None:
        return KErr.invalid_request, "Invalid group id in the request."
    if not ctx.allowed(Operation.READ, ResourceType.GROUP, req.group_id):
        return KErr.group_authorization_failed, None
    if not req.member_id or len(req.member_id) > 36:
        return KErr.invalid_request, "Invalid member id in the request."
    return None


def _fetch_error(req: Any, code: Any, message: str | None = None) -> Any:
    m = resp_mod(SHARE_FETCH, version_of(req))
    return mk(m.ShareFetchResponse, throttle_time=ZERO, error_code=code, error_message=message,
              acquisition_lock_timeout=ZERO, responses=(), node_endpoints=())


def _ack_error(req: Any, code: Any, message: str | None = None) -> Any:
    m = resp_mod(SHARE_ACKNOWLEDGE, version_of(req))
    return mk(m.ShareAcknowledgeResponse, throttle_time=ZERO, error_code=code, error_message=message,
              acquisition_lock_timeout=ZERO, responses=(), node_endpoints=())


def _state_error(api_key: int) -> Any:
    def build(req: Any, code: Any) -> Any:
        m = resp_mod(api_key, version_of(req))
        if api_key == READ_STATE:
            return mk(m.ReadShareGroupStateResponse, results=tuple(mk(m.ReadStateResult, topic_id=t.topic_id, partitions=tuple(
                mk(m.PartitionResult, partition=p.partition, error_code=code, error_message=None, state_epoch=-1,
                   start_offset=-1, state_batches=()) for p in t.partitions)) for t in req.topics))
        return mk(m.WriteShareGroupStateResponse, results=tuple(mk(m.WriteStateResult, topic_id=t.topic_id, partitions=tuple(
            mk(m.PartitionResult, partition=p.partition, error_code=code, error_message=None)
            for p in t.partitions)) for t in req.topics))
    return build


def _cluster_action(ctx: RequestContext, req: Any) -> KErr | None:
    """Another node's leader: CLUSTER_ACTION on the cluster, as Kafka's share-state APIs ask."""
    return None if ctx.allowed(Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME) \
        else KErr.cluster_authorization_failed


def _one_partition(req: Any) -> bool:
    return len(req.topics) == 1 and len(req.topics[0].partitions) == 1 and req.topics[0].topic_id is not None


def register(node: Needs, groups: GroupApi, enabled: bool) -> ShareFetchApi:
    api = ShareFetchApi(node, groups)

    def gated(handler: Any, error: Any) -> Any:
        async def serve(ctx: RequestContext, req: Any) -> Any:
            if not enabled:
                return error(req, KErr.unsupported_version)
            return await handler(ctx, req)
        return serve

    def state(handler: Any, api_key: int) -> Any:
        async def serve(ctx: RequestContext, req: Any) -> Any:
            if not enabled:
                return _state_error(api_key)(req, KErr.unsupported_version)
            if not _one_partition(req):  # Kafka's persister sends one partition per request
                return _state_error(api_key)(req, KErr.invalid_request)
            return await handler(ctx, req)
        return serve

    node.registry.register(SHARE_FETCH, 1, 2, gated(api.share_fetch, _fetch_error), error_response=_fetch_error)
    node.registry.register(SHARE_ACKNOWLEDGE, 1, 2, gated(api.share_acknowledge, _ack_error),
                           error_response=_ack_error)
    node.registry.register(READ_STATE, 0, 0, state(api.read_state, READ_STATE), error_response=_state_error(READ_STATE),
                           authorize=_cluster_action)
    node.registry.register(WRITE_STATE, 1, 1, state(api.write_state, WRITE_STATE),
                           error_response=_state_error(WRITE_STATE), authorize=_cluster_action)
    return api
