"""The kio-backed wire codec: request headers, request bodies, responses.

Request header v1 = apiKey int16, apiVersion int16, correlationId int32, clientId
(nullable, int16 length — also in v2); v2 (flexible API versions) adds a tagged-field
section. Response header v0 = correlationId; v1 (flexible) adds tagged fields, except
ApiVersions, whose responses always use header v0 (KIP-511).
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import (
    read_compact_string,
    read_compact_string_nullable,
    read_int32,
    read_legacy_string,
    read_nullable_legacy_string,
    read_unsigned_varint,
)

from cluster.wire_bounds import BoundsError, check_body
from coordinator_common.varint import uvarint

API_VERSIONS_KEY = 18

__all__ = ["API_VERSIONS_KEY", "CodecError", "ErrorCode", "HeartbeatWire", "RequestHeader", "decode_body",
           "decode_header", "decode_heartbeat", "encode_heartbeat_response", "encode_offset_commit_response",
           "encode_response", "request_schema", "response_schema"]

_HDR = struct.Struct(">hhi")


class CodecError(Exception):
    """A request that cannot be decoded: the connection is closed."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the body starts in the frame (-1 if the header is not complete)


@cache
def request_schema(api_key: int, api_version: int) -> type[Any] | None:
    try:
        return load_request_schema(api_key, api_version)
    except Exception:  # noqa: BLE001 - unknown key or version
        return None


@cache
def response_schema(api_key: int, api_version: int) -> type[Any] | None:
    try:
        return load_response_schema(api_key, api_version)
    except Exception:  # noqa: BLE001
        return None


def _skip_tagged_fields(buf: bytes, pos: int) -> int:
    count, n = read_unsigned_varint(buf, pos)
    pos += n
    for _ in range(count):
        _tag, n = read_unsigned_varint(buf, pos)
        pos += n
        size, n = read_unsigned_varint(buf, pos)
        pos += n + size
    if pos > len(buf):
        raise CodecError("tagged fields run past the frame")
    return pos


def decode_header(frame: bytes) -> RequestHeader:
    """Decode the request header; the tagged section is skipped when the version is flexible."""
    if len(frame) < _HDR.size + 2:
        raise CodecError(f"frame of {len(frame)} bytes is too short for a request header")
    api_key, api_version, correlation_id = _HDR.unpack_from(frame, 0)
    try:
        client_id, n = read_nullable_legacy_string(frame, _HDR.size)
    except Exception as e:  # noqa: BLE001
        raise CodecError(f"bad client id: {e}") from None
    pos = _HDR.size + n
    schema = request_schema(api_key, api_version)
    if schema is not None and schema.__flexible__:
        try:
            pos = _skip_tagged_fields(frame, pos)
        except CodecError:
            raise
        except Exception as e:  # noqa: BLE001
            raise CodecError(f"bad header tagged fields: {e}") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def decode_body(header: RequestHeader, frame: bytes, max_items: int = 1 << 62) -> Any:
    """The request body, read by kio once ``check_body`` found every count and length within
    the frame and at most ``max_items`` array items in all."""
    schema = request_schema(header.api_key, header.api_version)
    if schema is None:
        raise CodecError(f"no schema for api_key={header.api_key} version={header.api_version}")
    try:
        check_body(schema, frame, header.body_offset, max_items)  # kio sizes arrays from their counts
    except BoundsError as e:
        raise CodecError(f"{schema.__name__} v{header.api_version}: {e}") from None
    try:
        obj, size = entity_reader(schema)(frame, header.body_offset)
    except Exception as e:  # noqa: BLE001 - kio raises several error types
        raise CodecError(f"cannot parse {schema.__name__} v{header.api_version}: {type(e).__name__}: {e}") from None
    if header.body_offset + size > len(frame):
        raise CodecError("request body runs past the frame")
    return obj


def encode_response(api_key: int, correlation_id: int, response: Any) -> bytes:
    """Encode header + body and the 4-byte size prefix."""
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    buf.write(struct.pack(">i", correlation_id))
    if type(response).__flexible__ and api_key != API_VERSIONS_KEY:
        buf.write(b"\0")  # empty tagged-field section (response header v1)
    entity_writer(type(response))(buf, response)
    data = buf.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


# ---------------------------------------------------------------- Heartbeat without kio
# The one request every member sends every few seconds: with tens of thousands of members its
# generic decode and encode were a sixth of a node's work. Its schema is small and fixed:
# group_id, generation_id, member_id (v0-v4), group_instance_id (v3+); v4 is flexible
# (compact strings, tagged fields). Response: [throttle_time_ms (v1+)], error_code.

HEARTBEAT_KEY = 12
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_HB_RESPONSE = struct.Struct(">iih")  # correlation id, throttle time, error code


@dataclass(frozen=True, slots=True)
class HeartbeatWire:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


def decode_heartbeat(header: RequestHeader, frame: bytes) -> HeartbeatWire:
    try:
        return _decode_heartbeat(header, frame)
    except CodecError:
        raise
    except Exception as e:  # noqa: BLE001 - kio's varint reader raises its own errors at the end
        raise CodecError(f"cannot parse HeartbeatRequest v{header.api_version}: {type(e).__name__}: {e}") from None


def _decode_heartbeat(header: RequestHeader, frame: bytes) -> HeartbeatWire:
    # kio's primitive readers (compiled), not its generic entity reader
    v = header.api_version
    string = read_compact_string if v >= 4 else read_legacy_string
    pos = header.body_offset
    group_id, n = string(frame, pos)
    pos += n
    generation, n = read_int32(frame, pos)
    pos += n
    member_id, n = string(frame, pos)
    pos += n
    instance_id = None
    if v >= 3:
        instance_id, n = (read_compact_string_nullable if v >= 4 else read_nullable_legacy_string)(frame, pos)
        pos += n
    if v >= 4:
        _skip_tagged_fields(frame, pos)
    return HeartbeatWire(group_id, generation, member_id, instance_id)


def encode_heartbeat_response(version: int, correlation_id: int, error_code: int) -> bytes:
    if version == 0:
        return _I32.pack(6) + _I32.pack(correlation_id) + _I16.pack(error_code)
    if version < 4:
        return _I32.pack(_HB_RESPONSE.size) + _HB_RESPONSE.pack(correlation_id, 0, error_code)
    # flexible: response header v1 (tagged fields) and an empty tagged-field section at the end
    return (_I32.pack(_HB_RESPONSE.size + 2) + _I32.pack(correlation_id) + b"\0"
            + _HB_RESPONSE.pack(0, 0, error_code)[4:] + b"\0")


# ---------------------------------------------------------------- OffsetCommit response without kio
# Topics, each with partitions and their error codes; throttle time from v3; v8+ flexible.


_PARTITION_RESULT = struct.Struct(">ih")


def encode_offset_commit_response(version: int, correlation_id: int,
                                  topics: list[tuple[str | bytes, list[tuple[int, int]]]]) -> bytes:
    """``topics``: (name, [(partition, error code), ...]) in response order; from v10 the topic
    is its 16-byte id."""
    flexible = version >= 8
    parts = [_I32.pack(correlation_id)]
    if flexible:
        parts.append(b"\0")  # response header v1: no tagged fields
    if version >= 3:
        parts.append(_I32.pack(0))  # throttle_time_ms
    parts.append(uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics)))
    for name, partitions in topics:
        if isinstance(name, bytes):
            parts.append(name)  # v10: the topic id
        else:
            b = name.encode()
            parts.append(uvarint(len(b) + 1) + b if flexible else _I16.pack(len(b)) + b)
        parts.append(uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions)))
        tail = b"\0" if flexible else b""
        parts.extend(_PARTITION_RESULT.pack(p, code) + tail for p, code in partitions)
        if flexible:
            parts.append(b"\0")  # the topic's tagged fields
    if flexible:
        parts.append(b"\0")
    body = b"".join(parts)
    return _I32.pack(len(body)) + body
