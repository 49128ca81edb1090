"""A Fetch waiting for data is answered early when another request queues behind it on the same
connection (responses leave in order), so a FindCoordinator or Metadata is not held for the
Fetch's whole max_wait (cluster.dispatch.LongPolls)."""

from __future__ import annotations

import datetime
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from tests.cluster.harness import NodeProcess
from tests.cluster.test_data_plane import _fetch_raw, create_topic
from tests.wire.raw import RawConn

pytestmark = pytest.mark.cluster

WAIT_MS = 20_000


def _read(c: RawConn, api_key: int, version: int, corr: int) -> Any:
    """The next response on ``c``, which must answer request ``corr`` (RawConn.response expects
    the last request's answer; here two are outstanding)."""
    frame = c.recv_frame()
    assert frame is not None
    assert struct.unpack_from(">i", frame, 0)[0] == corr
    cls = load_response_schema(api_key, version)
    obj, _ = entity_reader(cls)(frame, 4 + (1 if cls.__flexible__ else 0))
    return obj


def test_a_request_behind_a_long_poll_cuts_it_short_and_order_holds(tmp_path: Path) -> None:
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
    from kio.schema.metadata.v12.request import MetadataRequest

    node = NodeProcess(tmp_path).start()  # fetch_max_wait_cap_ms: 30 s
    try:
        create_topic(node.bootstrap, "quiet", 1)
        c = RawConn(node.bootstrap)
        started = time.monotonic()
        alone = _fetch_raw(c, "quiet", 0, max_wait_ms=1_000)  # nothing behind it: waits its time
        assert alone.error_code == 0 and not alone.records
        assert time.monotonic() - started >= 0.9
        started = time.monotonic()
        c.request(1, 12, FetchRequest(
            cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(milliseconds=WAIT_MS), min_bytes=1,
            max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
            topics=(FetchTopic(topic="quiet", partitions=(FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                partition_max_bytes=1 << 20),)),),
            forgotten_topics_data=(), rack_id=""))
        time.sleep(0.2)  # the Fetch is waiting now
        c.request(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                         include_topic_authorized_operations=False))
        fetched = _read(c, 1, 12, c.corr - 1)  # first, as it was asked first
        assert fetched.responses[0].partitions[0].error_code == 0
        assert not fetched.responses[0].partitions[0].records
        meta = _read(c, 3, 12, c.corr)
        assert [b.node_id for b in meta.brokers] == [0]
        took = time.monotonic() - started
        assert took < WAIT_MS / 1000 / 2, f"the Metadata waited {took:.1f}s behind the Fetch"
        c.close()
    finally:
        node.kill()
