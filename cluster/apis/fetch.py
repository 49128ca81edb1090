"""Fetch (1) v4–12 (consumer fetches; no fetch sessions: session_id 0 = full fetches)
and ListOffsets (2) v1–7."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import Records

from cluster.apis.common import ZERO, mk, resp_mod, to_ms, version_of
from cluster.data_plane import OffsetOutOfRangeError
from cluster.dispatch import RequestContext

FETCH_KEY = 1
LIST_OFFSETS_KEY = 2
EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3


def _epoch_error(current: int | None, leader_epoch: int) -> ErrorCode | None:
    if current is None or current < 0 or leader_epoch < 0 or current == leader_epoch:
        return None
    return ErrorCode.fenced_leader_epoch if current < leader_epoch else ErrorCode.unknown_leader_epoch


def _pdata(m: Any, index: int, code: ErrorCode, *, hw: int = -1, lso: int = -1, log_start: int = -1,
           records: bytes = b"") -> Any:
    return mk(m.PartitionData, partition_index=index, error_code=code, high_watermark=hw, last_stable_offset=lso,
              log_start_offset=log_start, aborted_transactions=None, preferred_read_replica=-1,
              records=Records(records))


def _collect(node: Any, request: Any, m: Any) -> tuple[list[Any], int, bool, list[Any]]:
    """One pass over the requested partitions. Returns (topics, bytes, any_error, partitions)."""
    remaining = min(max(int(request.max_bytes), 0), node.config.fetch_max_bytes)  # the broker's cap wins
    total = 0
    any_error = False
    parts_seen = []
    topics = []
    for t in request.topics:
        pds = []
        for p in t.partitions:
            part = node.partition(t.topic, p.partition)
            if part is None:
                pds.append(_pdata(m, p.partition, ErrorCode.unknown_topic_or_partition))
                any_error = True
                continue
            if not part.is_leader:
                pds.append(_pdata(m, p.partition, ErrorCode.not_leader_or_follower))
                any_error = True
                continue
            parts_seen.append(part)
            data = part.data
            err = _epoch_error(getattr(p, "current_leader_epoch", None), part.reported_epoch)
            if err is not None:
                pds.append(_pdata(m, p.partition, err))
                any_error = True
                continue
            hw = data.high_watermark
            try:
                limit = min(int(p.partition_max_bytes), remaining)
                records = b""
                if p.fetch_offset < data.log_start_offset or p.fetch_offset > data.log_end_offset:
                    raise OffsetOutOfRangeError(p.fetch_offset)
                if p.fetch_offset < hw and (limit > 0 or total == 0):
                    records = part.read(p.fetch_offset, max(limit, 0), min_one=total == 0)
            except OffsetOutOfRangeError:
                pds.append(_pdata(m, p.partition, ErrorCode.offset_out_of_range, hw=hw, lso=hw,
                                  log_start=data.log_start_offset))
                any_error = True
                continue
            total += len(records)
            remaining = max(remaining - len(records), 0)
            pds.append(_pdata(m, p.partition, ErrorCode.none, hw=hw, lso=hw, log_start=data.log_start_offset,
                              records=records))
        topics.append(mk(m.FetchableTopicResponse, topic=t.topic, partitions=tuple(pds)))
    return topics, total, any_error, parts_seen


async def handle_fetch(ctx: RequestContext, request: Any) -> Any:
    node = ctx.node
    m = resp_mod(FETCH_KEY, ctx.api_version)
    max_wait = min(max(to_ms(request.max_wait), 0), node.config.fetch_max_wait_cap_ms) / 1000
    deadline = time.monotonic() + max_wait
    min_bytes = max(int(request.min_bytes), 0)
    loop = asyncio.get_running_loop()
    while True:
        topics, total, any_error, parts = _collect(node, request, m)
        left = deadline - time.monotonic()
        if total >= min_bytes or total > 0 and min_bytes <= 1 or any_error or left <= 0 or not parts:
            break
        fut: asyncio.Future[None] = loop.create_future()
        for part in parts:
            part.add_waiter(fut)
        try:
            await asyncio.wait_for(fut, left)
        except TimeoutError:
            pass
        finally:
            for part in parts:
                part.remove_waiter(fut)
    return mk(m.FetchResponse, throttle_time=ZERO, error_code=ErrorCode.none, session_id=0, responses=tuple(topics))


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
    node = ctx.node
    m = resp_mod(LIST_OFFSETS_KEY, ctx.api_version)
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            part = node.partition(t.name, p.partition_index)
            if part is None:
                parts.append(_lo_part(m, p.partition_index, ErrorCode.unknown_topic_or_partition))
                continue
            if not part.is_leader:
                parts.append(_lo_part(m, p.partition_index, ErrorCode.not_leader_or_follower))
                continue
            err = _epoch_error(getattr(p, "current_leader_epoch", None), part.reported_epoch)
            if err is not None:
                parts.append(_lo_part(m, p.partition_index, err))
                continue
            data = part.data
            epoch = part.reported_epoch
            ts = int(p.timestamp)
            if ts == LATEST:
                parts.append(_lo_part(m, p.partition_index, ErrorCode.none, -1, data.high_watermark, epoch))
            elif ts == EARLIEST:
                parts.append(_lo_part(m, p.partition_index, ErrorCode.none, -1, data.log_start_offset, epoch))
            elif ts == MAX_TIMESTAMP:
                found = data.max_timestamp()
                if found is None:
                    parts.append(_lo_part(m, p.partition_index, ErrorCode.none, -1, -1, -1))
                else:
                    parts.append(_lo_part(m, p.partition_index, ErrorCode.none, found[0], found[1], epoch))
            elif ts < 0:
                parts.append(_lo_part(m, p.partition_index, ErrorCode.invalid_request))
            else:
                hit = data.offset_for_timestamp(ts)
                if hit is None:
                    parts.append(_lo_part(m, p.partition_index, ErrorCode.none, -1, -1, -1))
                else:
                    parts.append(_lo_part(m, p.partition_index, ErrorCode.none, hit[0], hit[1], epoch))
        topics.append(mk(m.ListOffsetsTopicResponse, name=t.name, partitions=tuple(parts)))
    return mk(m.ListOffsetsResponse, throttle_time=ZERO, topics=tuple(topics))


def build_list_offsets_error(request: Any, code: ErrorCode) -> Any:
    m = resp_mod(LIST_OFFSETS_KEY, version_of(request))
    return mk(m.ListOffsetsResponse, throttle_time=ZERO, topics=tuple(
        mk(m.ListOffsetsTopicResponse, name=t.name,
           partitions=tuple(_lo_part(m, p.partition_index, code) for p in t.partitions))
        for t in request.topics))


def register(node: Any) -> None:
    node.registry.register(FETCH_KEY, 4, 12, handle_fetch, error_response=build_fetch_error)
    node.registry.register(LIST_OFFSETS_KEY, 1, 7, handle_list_offsets, error_response=build_list_offsets_error)
