"""Fetch (1) v4–12 (consumer fetches; no fetch sessions: session_id 0 = full fetches)
and ListOffsets (2) v1–11.

Isolation: a read_committed Fetch (isolation level 1) reads up to the partition's last stable
offset and is told the aborted transactions its data overlaps (the consumer drops their
batches); a read_uncommitted one reads up to the high watermark and gets no list. Every
answer carries the LSO. ListOffsets LATEST answers the LSO for read_committed.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode
from kio.static.primitive import Records

from cluster.apis.common import ZERO, mk, resp_mod, to_ms, version_of
from cluster.data_plane import OffsetOutOfRangeError
from cluster.dispatch import RequestContext
from cluster.security.authorizer import Operation, ResourceType
from cluster.services import Identity, Placement, Registers
from replication.data_log import ReadPlan


class Needs(Registers, Placement, Identity, Protocol):
    """What this module uses of its node (``cluster.services``)."""


FETCH_KEY = 1
LIST_OFFSETS_KEY = 2
EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4  # KIP-405: the first offset on local disk (all of it: no tiered storage here)
LATEST_TIERED = -5  # the last offset in tiered storage: none
EARLIEST_PENDING_UPLOAD = -6  # the first offset not yet uploaded to tiered storage: none
# each special timestamp from the ListOffsets version that introduced it; before that version, or
# an unknown one, is UNSUPPORTED_VERSION (Kafka 4.4's answer)
SPECIAL_FROM = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                EARLIEST_PENDING_UPLOAD: 11}


def epoch_error(current: int | None, leader_epoch: int) -> ErrorCode | None:
    if current is None or current < 0 or leader_epoch < 0 or current == leader_epoch:
        return None
    return ErrorCode.fenced_leader_epoch if current < leader_epoch else ErrorCode.unknown_leader_epoch


def _pdata(m: Any, index: int, code: ErrorCode, *, hw: int = -1, lso: int = -1, log_start: int = -1,
           records: bytes = b"", aborted: list[tuple[int, int]] | None = None) -> Any:
    if aborted is None and code is not ErrorCode.none:
        aborted = []  # Kafka's error partitions carry an empty list (its schema's default), not null
    return mk(m.PartitionData, partition_index=index, error_code=code, high_watermark=hw, last_stable_offset=lso,
              log_start_offset=log_start, preferred_read_replica=-1, records=Records(records),
              aborted_transactions=None if aborted is None else tuple(
                  mk(m.AbortedTransaction, producer_id=pid, first_offset=first) for pid, first in aborted))


# A read planned at more bytes than this runs on a worker thread, so one large fetch never holds
# the event loop (a page-cache read of 1 MiB costs well under a millisecond).
READ_INLINE_MAX = 1 << 20


@dataclass(slots=True)
class _Pending:
    """A partition's answer waiting for its bytes: the read was planned, not yet executed."""

    index: int
    hw: int
    lso: int
    log_start: int
    plan: ReadPlan | None
    aborted: list[tuple[int, int]] | None  # read_committed: the aborted transactions in range


@dataclass(slots=True)
class _Pass:
    topics: list[tuple[str, list[Any]]]  # per topic: ready PartitionData or _Pending, in request order
    planned: int
    any_error: bool
    parts: list[Any]

    def plans(self) -> list[ReadPlan]:
        return [p.plan for _t, items in self.topics for p in items if isinstance(p, _Pending) and p.plan is not None]

    def close(self) -> None:
        for plan in self.plans():
            plan.close()


def _collect(node: Needs, request: Any, m: Any, denied: frozenset[str], room: int) -> _Pass:
    """One pass over the requested partitions: errors answered, reads planned (under each log's
    lock, briefly) but not executed. ``planned`` bounds the bytes the reads return. A topic the
    principal may not READ (``denied``) answers 29 and does not cut a long poll short. ``room`` is
    what the server's memory budget has left for answers: clients that do not read theirs cannot
    make the node hold a full Fetch each (the first batch is returned whatever it says)."""
    remaining = min(max(int(request.max_bytes), 0), node.config.fetch_max_bytes, room)  # the broker's cap wins
    committed = int(getattr(request, "isolation_level", 0)) == 1
    out = _Pass([], 0, False, [])
    for t in request.topics:
        pds: list[Any] = []
        if t.topic in denied:
            out.topics.append((t.topic, [_pdata(m, p.partition, ErrorCode.topic_authorization_failed)
                                         for p in t.partitions]))
            continue
        for p in t.partitions:
            part = node.topology.partition(t.topic, p.partition)
            if part is None:
                pds.append(_pdata(m, p.partition, ErrorCode.unknown_topic_or_partition))
                out.any_error = True
                continue
            if not part.serves_reads:
                pds.append(_pdata(m, p.partition, ErrorCode.not_leader_or_follower))
                out.any_error = True
                continue
            out.parts.append(part)
            data = part.data
            err = epoch_error(getattr(p, "current_leader_epoch", None), part.reported_epoch)
            if err is not None:
                pds.append(_pdata(m, p.partition, err))
                out.any_error = True
                continue
            hw = data.high_watermark
            lso = part.last_stable_offset()
            end = lso if committed else hw
            try:
                limit = min(int(p.partition_max_bytes), remaining)
                if p.fetch_offset < data.log_start_offset or p.fetch_offset > data.log_end_offset:
                    raise OffsetOutOfRangeError(p.fetch_offset)
                plan = None
                if p.fetch_offset < end and (limit > 0 or out.planned == 0):
                    plan = part.plan_read(p.fetch_offset, max(limit, 0), min_one=out.planned == 0,
                                          upper=end if committed else None)
            except OffsetOutOfRangeError:
                pds.append(_pdata(m, p.partition, ErrorCode.offset_out_of_range, hw=hw, lso=lso,
                                  log_start=data.log_start_offset))
                out.any_error = True
                continue
            if plan is not None:
                out.planned += plan.size
                remaining = max(remaining - plan.size, 0)
            aborted = data.txns.aborted_between(p.fetch_offset, end) if committed else None
            pds.append(_Pending(p.partition, hw, lso, data.log_start_offset, plan, aborted))
        out.topics.append((t.topic, pds))
    return out


def _execute(plans: list[ReadPlan]) -> list[bytes]:
    done: list[bytes] = []
    try:
        for plan in plans:
            done.append(plan.execute())
    finally:
        for plan in plans[len(done):]:
            plan.close()
    return done


async def _answer(found: _Pass, m: Any) -> tuple[Any, ...]:
    """Execute the planned reads (off the event loop when large) and build the topic responses."""
    plans = found.plans()
    if found.planned > READ_INLINE_MAX:
        data = await asyncio.get_running_loop().run_in_executor(None, _execute, plans)
    else:
        data = _execute(plans)
    read = dict(zip(map(id, plans), data, strict=True))
    topics = []
    for topic, items in found.topics:
        pds = [p if not isinstance(p, _Pending) else
               _pdata(m, p.index, ErrorCode.none, hw=p.hw, lso=p.lso, log_start=p.log_start,
                      records=read[id(p.plan)] if p.plan is not None else b"", aborted=p.aborted)
               for p in items]
        topics.append(mk(m.FetchableTopicResponse, topic=topic, partitions=tuple(pds)))
    return tuple(topics)


async def handle_fetch(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    m = resp_mod(FETCH_KEY, ctx.api_version)
    max_wait = min(max(to_ms(request.max_wait), 0), node.config.fetch_max_wait_cap_ms) / 1000
    deadline = time.monotonic() + max_wait
    min_bytes = max(int(request.min_bytes), 0)
    loop = asyncio.get_running_loop()
    denied = frozenset(t.topic for t in request.topics if not ctx.allowed(Operation.READ, ResourceType.TOPIC, t.topic))
    while True:
        found = _collect(node, request, m, denied, ctx.room())
        total = found.planned
        left = deadline - time.monotonic()
        if (total >= min_bytes or total > 0 and min_bytes <= 1 or found.any_error or left <= 0 or not found.parts
                or ctx.long_polls.behind()):
            break
        found.close()
        fut: asyncio.Future[None] = loop.create_future()
        for part in found.parts:
            part.add_waiter(fut)
        ctx.long_polls.add(fut)  # woken too when another request queues behind this one
        try:
            await asyncio.wait_for(fut, left)
        except TimeoutError:
            pass
        finally:
            ctx.long_polls.discard(fut)
            for part in found.parts:
                part.remove_waiter(fut)
    topics = await _answer(found, m)
    return mk(m.FetchResponse, throttle_time=ZERO, error_code=ErrorCode.none, session_id=0, responses=topics)


def build_fetch_error(request: Any, code: ErrorCode) -> Any:
    m = resp_mod(FETCH_KEY, version_of(request))
    return mk(m.FetchResponse, throttle_time=ZERO, error_code=code, session_id=0, responses=tuple(
        mk(m.FetchableTopicResponse, topic=t.topic, partitions=tuple(_pdata(m, p.partition, code)
                                                                     for p in t.partitions))
        for t in request.topics))


def _lo_part(m: Any, index: int, code: ErrorCode, ts: int = -1, offset: int = -1, epoch: int = -1) -> Any:
    return mk(m.ListOffsetsPartitionResponse, partition_index=index, error_code=code, timestamp=ts, offset=offset,
              leader_epoch=epoch, old_style_offsets=())


async def handle_list_offsets(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    version = ctx.api_version
    m = resp_mod(LIST_OFFSETS_KEY, version)
    committed = int(getattr(request, "isolation_level", 0)) == 1
    seen = Counter((t.name, int(p.partition_index)) for t in request.topics for p in t.partitions)
    answered: set[tuple[str, int]] = set()
    topics = []
    for t in request.topics:
        parts = []
        if not ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t.name):
            topics.append(mk(m.ListOffsetsTopicResponse, name=t.name, partitions=tuple(
                _lo_part(m, p.partition_index, ErrorCode.topic_authorization_failed) for p in t.partitions)))
            continue
        for p in t.partitions:
            if seen[(t.name, int(p.partition_index))] > 1:  # asked twice: answered once, INVALID_REQUEST (Kafka's)
                if (t.name, int(p.partition_index)) not in answered:
                    answered.add((t.name, int(p.partition_index)))
                    parts.append(_lo_part(m, p.partition_index, ErrorCode.invalid_request))
                continue
            part = node.topology.partition(t.name, p.partition_index)
            if part is None:
                parts.append(_lo_part(m, p.partition_index, ErrorCode.unknown_topic_or_partition))
                continue
            if not part.serves_reads:
                parts.append(_lo_part(m, p.partition_index, ErrorCode.not_leader_or_follower))
                continue
            err = epoch_error(getattr(p, "current_leader_epoch", None), part.reported_epoch)
            if err is not None:
                parts.append(_lo_part(m, p.partition_index, err))
                continue
            data = part.data
            epoch = part.reported_epoch  # LATEST: the leader's own (Kafka's latest epoch)
            ts = int(p.timestamp)
            # what a consumer of this isolation level can read: lookups by timestamp stop there too
            latest = part.last_stable_offset() if committed else data.high_watermark
            if ts < 0 and SPECIAL_FROM.get(ts, 1 << 15) > version:
                parts.append(_lo_part(m, p.partition_index, ErrorCode.unsupported_version))
            elif ts == LATEST:
                parts.append(_lo_part(m, p.partition_index, ErrorCode.none, -1, latest, epoch))
            elif ts in (EARLIEST, EARLIEST_LOCAL):
                start = data.log_start_offset
                parts.append(_lo_part(m, p.partition_index, ErrorCode.none, -1, start, part.epoch_at(start)))
            elif ts == MAX_TIMESTAMP:
                found = data.max_timestamp()
                if found is None or found[1] >= latest:
                    parts.append(_lo_part(m, p.partition_index, ErrorCode.none, -1, -1, -1))
                else:
                    parts.append(_lo_part(m, p.partition_index, ErrorCode.none, found[0], found[1],
                                          part.epoch_at(found[1])))
            elif ts in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
                parts.append(_lo_part(m, p.partition_index, ErrorCode.none, -1, -1, -1))
            else:
                hit = data.offset_for_timestamp(ts)
                if hit is None or hit[1] >= latest:
                    parts.append(_lo_part(m, p.partition_index, ErrorCode.none, -1, -1, -1))
                else:
                    parts.append(_lo_part(m, p.partition_index, ErrorCode.none, hit[0], hit[1], part.epoch_at(hit[1])))
        topics.append(mk(m.ListOffsetsTopicResponse, name=t.name, partitions=tuple(parts)))
    return mk(m.ListOffsetsResponse, throttle_time=ZERO, topics=tuple(topics))


def build_list_offsets_error(request: Any, code: ErrorCode) -> Any:
    m = resp_mod(LIST_OFFSETS_KEY, version_of(request))
    return mk(m.ListOffsetsResponse, throttle_time=ZERO, topics=tuple(
        mk(m.ListOffsetsTopicResponse, name=t.name,
           partitions=tuple(_lo_part(m, p.partition_index, code) for p in t.partitions))
        for t in request.topics))


def register(node: Needs) -> None:
    node.registry.register(FETCH_KEY, 4, 12, handle_fetch, error_response=build_fetch_error)
    node.registry.register(LIST_OFFSETS_KEY, 1, 11, handle_list_offsets, error_response=build_list_offsets_error)
