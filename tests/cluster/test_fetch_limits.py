"""fetch.max.bytes: a Fetch asking for 2 GiB gets at most the broker's cap (plus one batch,
as Kafka returns at least one batch), and per-partition limits hold."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from replication.record_batch import build_batch
from tests.cluster.harness import NodeProcess
from tests.cluster.test_data_plane import _produce_raw, create_topic
from tests.wire.raw import RawConn

pytestmark = pytest.mark.cluster


def _fetch(c: RawConn, topic: str, max_bytes: int, partition_max_bytes: int) -> bytes:
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

    c.request(1, 12, FetchRequest(
        cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(milliseconds=0), min_bytes=1,
        max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=partition_max_bytes),)),),
        forgotten_topics_data=(), rack_id=""))
    part = c.response(1, 12).responses[0].partitions[0]
    assert part.error_code == 0
    return bytes(part.records)


def test_fetch_max_bytes_caps_a_huge_fetch(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path, settings={"fetch.max.bytes": 100_000}).start()
    try:
        bs = node.bootstrap
        create_topic(bs, "capped", 1)
        c = RawConn(bs)
        value = b"v" * 10_000
        for i in range(60):  # 60 batches of ~20 KB: 1.2 MB in the partition
            resp = _produce_raw(c, "capped", build_batch([(None, value), (None, value)], timestamp=i))
            assert resp.error_code == 0
        got = _fetch(c, "capped", max_bytes=2**31 - 1, partition_max_bytes=2**31 - 1)
        assert 0 < len(got) <= 100_000 + 21_000, len(got)  # the cap, or one batch past it
        small = _fetch(c, "capped", max_bytes=2**31 - 1, partition_max_bytes=30_000)
        assert 0 < len(small) <= 30_000 + 21_000, len(small)
        c.close()
    finally:
        node.kill()
