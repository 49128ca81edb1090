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
from kio.serial.readers import read_unsigned_varint

API_VERSIONS_KEY = 18

__all__ = ["API_VERSIONS_KEY", "CodecError", "ErrorCode", "HeartbeatWire", "RequestHeader", "decode_body",
           "decode_header", "decode_heartbeat", "encode_heartbeat_response", "encode_offset_commit_response",
           "encode_response", "request_schema", "response_schema"]

_HDR = struct.Struct(">hhi")
_HDR_ID = struct.Struct(">hhih")  # the header's fixed part and the client id's length


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
    api_key, api_version, correlation_id, size = _HDR_ID.unpack_from(frame, 0)
    pos = _HDR_ID.size
    client_id: str | None = None
    if size >= 0:  # a nullable int16-length string: -1 is null
        if pos + size > len(frame):
            raise CodecError("bad client id: runs past the frame")
        try:
            client_id = frame[pos:pos + size].decode()
        except UnicodeDecodeError as e:
            raise CodecError(f"bad client id: {e}") from None
        pos += size
    elif size != -1:
        raise CodecError(f"bad client id: length {size}")
    schema = request_schema(api_key, api_version)
    if schema is not None and schema.__flexible__:
        try:
            pos = _skip_tagged_fields(frame, pos)
        except CodecError:
            raise
        except Exception as e:  # noqa: BLE001
            raise CodecError(f"bad header tagged fields: {e}") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def decode_body(header: RequestHeader, frame: bytes) -> Any:
    schema = request_schema(header.api_key, header.api_version)
    if schema is None:
        raise CodecError(f"no schema for api_key={header.api_key} version={header.api_version}")
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


def _string(frame: bytes, pos: int, flexible: bool, nullable: bool) -> tuple[str | None, int]:
    if flexible:
        n, used = read_unsigned_varint(frame, pos)
        pos += used
        size = n - 1
    else:
        if pos + 2 > len(frame):
            raise CodecError("string length runs past the frame")
        (size,) = _I16.unpack_from(frame, pos)
        pos += 2
    if size < 0:
        if nullable and size == -1:
            return None, pos
        raise CodecError("null or negative length for a non-nullable string")
    if pos + size > len(frame):
        raise CodecError("string runs past the frame")
    try:
        return frame[pos:pos + size].decode(), pos + size
    except UnicodeDecodeError as e:
        raise CodecError(f"string is not UTF-8: {e}") from None


def decode_heartbeat(header: RequestHeader, frame: bytes) -> HeartbeatWire:
    try:
        return _decode_heartbeat(header, frame)
    except CodecError:
        raise
    except Exception as e:  # noqa: BLE001 - kio's varint reader raises its own errors at the end
        raise CodecError(f"cannot parse HeartbeatRequest v{header.api_version}: {type(e).__name__}: {e}") from None


def _decode_heartbeat(header: RequestHeader, frame: bytes) -> HeartbeatWire:
    v = header.api_version
    flexible = v >= 4
    pos = header.body_offset
    group_id, pos = _string(frame, pos, flexible, False)
    if pos + 4 > len(frame):
        raise CodecError("generation_id runs past the frame")
    (generation,) = _I32.unpack_from(frame, pos)
    member_id, pos = _string(frame, pos + 4, flexible, False)
    instance_id = None
    if v >= 3:
        instance_id, pos = _string(frame, pos, flexible, True)
    if flexible:
        _skip_tagged_fields(frame, pos)
    return HeartbeatWire(group_id or "", generation, member_id or "", instance_id)


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


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_PARTITION_RESULT = struct.Struct(">ih")


def encode_offset_commit_response(version: int, correlation_id: int,
                                  topics: list[tuple[str, list[tuple[int, int]]]]) -> bytes:
    """``topics``: (name, [(partition, error code), ...]) in response order."""
    flexible = version >= 8
    parts = [_I32.pack(correlation_id)]
    if flexible:
        parts.append(b"\0")  # response header v1: no tagged fields
    if version >= 3:
        parts.append(_I32.pack(0))  # throttle_time_ms
    parts.append(_uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics)))
    for name, partitions in topics:
        b = name.encode()
        parts.append(_uvarint(len(b) + 1) + b if flexible else _I16.pack(len(b)) + b)
        parts.append(_uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions)))
        tail = b"\0" if flexible else b""
        parts.extend(_PARTITION_RESULT.pack(p, code) + tail for p, code in partitions)
        if flexible:
            parts.append(b"\0")  # the topic's tagged fields
    if flexible:
        parts.append(b"\0")
    body = b"".join(parts)
    return _I32.pack(len(body)) + body
