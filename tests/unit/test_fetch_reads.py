"""Fetch reads are planned under a partition's lock and executed without it: the Raft apply
thread (which appends under that lock) is never kept waiting by a disk read, and a large
Fetch reads on a worker thread, not on the event loop."""

from __future__ import annotations

import asyncio
import datetime
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import replication.data_log as data_log_mod
from cluster.apis import fetch as fetch_api
from cluster.data_plane import DataPartition
from cluster.dispatch import RequestContext
from cluster.security.access import AccessControl
from replication.data_log import DataLog
from tests.unit.test_data_log import offsets, put


class WatchedReads:
    """Every positional read of a segment: (thread name, whether another thread could take the
    watched log's lock meanwhile)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bool]] = []
        self.log: DataLog | None = None
        self.real = data_log_mod._pread

    def lock_is_free(self) -> bool:
        log, free = self.log, [False]
        if log is None:
            return False

        def probe() -> None:
            if log.lock.acquire(timeout=2):
                free[0] = True
                log.lock.release()
        t = threading.Thread(target=probe)
        t.start()
        t.join()
        return free[0]

    def __call__(self, fd: int, n: int, pos: int) -> bytes:
        self.seen.append((threading.current_thread().name, self.lock_is_free()))
        return self.real(fd, n, pos)


@pytest.fixture
def watched_reads(monkeypatch: pytest.MonkeyPatch) -> WatchedReads:
    w = WatchedReads()
    monkeypatch.setattr(data_log_mod, "_pread", w)
    return w


def test_a_read_does_not_hold_the_log_lock(tmp_path: Path, watched_reads: WatchedReads) -> None:
    log = DataLog(str(tmp_path), segment_bytes=4000)
    for _ in range(30):
        put(log, 3, size=100)
    watched_reads.log = log
    got = log.read(0, 1 << 20)
    assert offsets(got) == list(range(90))
    assert len(watched_reads.seen) == log.segment_count > 1  # one pread per segment...
    assert all(free for _name, free in watched_reads.seen)  # ...none with the lock held


def test_a_planned_read_survives_its_segments_being_deleted(tmp_path: Path) -> None:
    log = DataLog(str(tmp_path), segment_bytes=2000, retention_bytes=0)
    for _ in range(20):
        put(log, 2, size=100)
    plan = log.plan_read(0, 1 << 20)
    assert log.enforce_retention() > 0  # the planned segments are gone from disk...
    assert log.log_start_offset > 0
    assert offsets(plan.execute()) == list(range(40))  # ...and the read still gets their bytes


def test_a_read_stops_at_whole_batches_and_returns_one_oversized_first_batch(tmp_path: Path) -> None:
    log = DataLog(str(tmp_path))
    for _ in range(5):
        put(log, 1, size=1000)
    one = len(log.read(0, 1 << 20)) // 5
    assert offsets(log.read(0, 2 * one + 10)) == [0, 1]
    assert offsets(log.read(1, 10)) == [1]  # min_one: the first batch whole
    assert log.read(1, 10, min_one=False) == b""
    assert offsets(log.read(0, 1 << 20, upper=3)) == [0, 1, 2]


def _fetch_request(max_bytes: int) -> Any:
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

    return FetchRequest(
        cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(milliseconds=0), min_bytes=1,
        max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(FetchTopic(topic="t", partitions=(FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=max_bytes),)),),
        forgotten_topics_data=(), rack_id="")


def _fetch(part: DataPartition, max_bytes: int) -> bytes:
    node = SimpleNamespace(config=SimpleNamespace(fetch_max_bytes=50 << 20, fetch_max_wait_cap_ms=500),
                           access=AccessControl(False, [], False, frozenset),
                           topology=SimpleNamespace(
                               partition=lambda topic, p: part if (topic, p) == ("t", 0) else None))
    ctx = RequestContext(api_key=1, api_version=12, correlation_id=1, client_id="c", client_host="/127.0.0.1",
                         node=node)
    resp = asyncio.run(fetch_api.handle_fetch(ctx, _fetch_request(max_bytes)))
    p = resp.responses[0].partitions[0]
    assert p.error_code == 0
    return bytes(p.records)


def test_a_large_fetch_reads_off_the_event_loop(tmp_path: Path, watched_reads: WatchedReads) -> None:
    log = DataLog(str(tmp_path))
    for _ in range(40):
        put(log, 10, size=10_000)  # 4 MB
    part = DataPartition("t", 0, str(tmp_path), log)
    loop_thread = threading.current_thread().name
    small = _fetch(part, 50_000)
    assert offsets(small)[:1] == [0] and len(small) <= 50_000 + 101_000
    assert watched_reads.seen[-1][0] == loop_thread  # small reads stay inline: a thread hop costs more
    big = _fetch(part, 10 << 20)
    assert offsets(big) == list(range(400))
    assert watched_reads.seen[-1][0] != loop_thread
    log.close()
