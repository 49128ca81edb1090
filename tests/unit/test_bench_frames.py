"""The heartbeat load generator's hand-made ConsumerGroupHeartbeat v1 frames (bench/heartbeat.py),
checked against kio, the wire codec they stand in for: the request as the node reads it, and the
answers the node writes as the load generator reads them."""

from __future__ import annotations

import datetime
import struct
import uuid

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from bench.heartbeat import CLIENT_ID, consumer_heartbeat_v1, parse_consumer_heartbeat_v1
from cluster.codec import decode_body, decode_header, encode_response


def _decode(body: bytes) -> object:
    frame = struct.pack(">hhi", 68, 1, 7) + CLIENT_ID + body
    return decode_body(decode_header(frame), frame)


def test_a_join_and_a_heartbeat_read_by_kio() -> None:
    join = _decode(consumer_heartbeat_v1("g", "m-1", 0, 30000))
    assert (join.group_id, join.member_id, join.member_epoch) == ("g", "m-1", 0)  # type: ignore[attr-defined]
    assert join.subscribed_topic_names == () and join.topic_partitions == ()  # type: ignore[attr-defined]
    assert join.rebalance_timeout == datetime.timedelta(milliseconds=30000)  # type: ignore[attr-defined]
    beat = _decode(consumer_heartbeat_v1("g", "m-1", 12, -1))
    assert beat.member_epoch == 12 and beat.subscribed_topic_names is None  # type: ignore[attr-defined]
    assert beat.topic_partitions is None and beat.instance_id is None  # type: ignore[attr-defined]


def test_answers_written_by_kio_are_read() -> None:
    mod = load_payload_module(68, 1, EntityType.response)
    for message, member_id, epoch, error in ((None, "m-1", 5, ErrorCode.none),
                                             ("x" * 300, None, -1, ErrorCode.fenced_member_epoch)):
        resp = mod.ConsumerGroupHeartbeatResponse(
            throttle_time=datetime.timedelta(0), error_code=error, error_message=message, member_id=member_id,
            member_epoch=epoch, heartbeat_interval=datetime.timedelta(seconds=5),
            assignment=mod.Assignment(topic_partitions=(mod.TopicPartitions(topic_id=uuid.uuid4(), partitions=(1,)),)))
        frame = encode_response(68, 9, resp)
        assert parse_consumer_heartbeat_v1(frame, 8) == (error.value, epoch)
