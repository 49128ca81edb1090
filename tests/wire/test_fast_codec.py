"""Heartbeat and the OffsetCommit response are coded without kio: byte for byte what kio would do."""

from __future__ import annotations

import datetime
import io
import struct

import pytest
from kio.serial import entity_writer

from cluster.codec import (
    CodecError,
    ErrorCode,
    HeartbeatWire,
    decode_header,
    decode_heartbeat,
    encode_heartbeat_response,
    encode_offset_commit_response,
    encode_response,
    request_schema,
    response_schema,
)


def frame_of(version: int, **fields: object) -> bytes:
    schema = request_schema(12, version)
    assert schema is not None
    buf = io.BytesIO()
    entity_writer(schema)(buf, schema(**fields))
    header = struct.pack(">hhih", 12, version, 41, 6) + b"client" + (b"\0" if version >= 4 else b"")
    return header + buf.getvalue()


@pytest.mark.parametrize("version", range(5))
@pytest.mark.parametrize("instance", [None, "static-é-1"])
def test_decode_matches_kio(version: int, instance: str | None) -> None:
    fields: dict[str, object] = {"group_id": "grüppe", "generation_id": -7, "member_id": "m-" + "x" * 300}
    if version >= 3:
        fields["group_instance_id"] = instance
    got = decode_heartbeat(decode_header(frame := frame_of(version, **fields)), frame)
    assert got == HeartbeatWire("grüppe", -7, "m-" + "x" * 300, instance if version >= 3 else None)


@pytest.mark.parametrize("version", range(5))
@pytest.mark.parametrize("code", [ErrorCode.none, ErrorCode.rebalance_in_progress, ErrorCode.unknown_member_id])
def test_encode_matches_kio(version: int, code: ErrorCode) -> None:
    schema = response_schema(12, version)
    assert schema is not None
    fields: dict[str, object] = {"error_code": code}
    if "throttle_time" in schema.__dataclass_fields__:
        fields["throttle_time"] = datetime.timedelta(0)
    assert encode_heartbeat_response(version, 123456, code.value) == encode_response(12, 123456, schema(**fields))


@pytest.mark.parametrize("version", [0, 3, 4])
def test_truncated_bodies_are_codec_errors(version: int) -> None:
    fields: dict[str, object] = {"group_id": "g", "generation_id": 1, "member_id": "m"}
    if version >= 3:
        fields["group_instance_id"] = "i"
    frame = frame_of(version, **fields)
    header = decode_header(frame)
    for cut in range(header.body_offset, len(frame) - (1 if version >= 4 else 0)):
        with pytest.raises(CodecError):
            decode_heartbeat(header, frame[:cut])


@pytest.mark.parametrize("version", range(2, 10))
@pytest.mark.parametrize("topics", [[], [("t", [])], [("töpic", [(0, 0), (7, 27)]), ("other", [(3, 3)])]])
def test_offset_commit_response_matches_kio(version: int, topics: list[tuple[str, list[tuple[int, int]]]]) -> None:
    schema = response_schema(8, version)
    assert schema is not None
    mod = __import__(schema.__module__, fromlist=["x"])
    fields: dict[str, object] = {"topics": tuple(
        mod.OffsetCommitResponseTopic(name=name, partitions=tuple(
            mod.OffsetCommitResponsePartition(partition_index=p, error_code=ErrorCode(code)) for p, code in parts))
        for name, parts in topics)}
    if "throttle_time" in schema.__dataclass_fields__:
        fields["throttle_time"] = datetime.timedelta(0)
    assert encode_offset_commit_response(version, 99, topics) == encode_response(8, 99, schema(**fields))
