"""Random valid request bodies for any kio request schema, and request frames.

Values are drawn from a seeded ``random.Random``: small and boundary integers, short strings
(often the same few names, so requests meet each other's state), arrays of 0-3 items, present
or absent optional values and tagged fields. Bodies are encoded with kio, so each one is a
request a real client could have sent before it is mutated.
"""

from __future__ import annotations

import datetime
import io
import random
import struct
import uuid
from dataclasses import fields
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

_INT_RANGES = {"int8": 7, "uint8": 8, "int16": 15, "uint16": 16, "int32": 31, "uint32": 32, "int64": 63,
               "uint64": 64}
NAMES = ("fuzz", "fuzz-topic", "fuzz-group", "a", "")


def _int(rng: random.Random, kafka_type: str) -> int:
    bits = _INT_RANGES[kafka_type]
    signed = not kafka_type.startswith("u")
    lo, hi = (-(1 << bits), (1 << bits) - 1) if signed else (0, (1 << bits) - 1)
    pick = rng.random()
    if pick < 0.5:
        return rng.randint(max(lo, -1), min(hi, 3))
    if pick < 0.7:
        return rng.choice((lo, hi))
    return rng.randint(lo, hi)


def _primitive(rng: random.Random, kafka_type: str) -> Any:
    if kafka_type in _INT_RANGES:
        return _int(rng, kafka_type)
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "float64":
        return rng.choice((0.0, 1.5, -1.0))
    if kafka_type == "string":
        return rng.choice(NAMES) if rng.random() < 0.8 else "".join(rng.choices("abcxyz-_.", k=rng.randint(0, 40)))
    if kafka_type in ("bytes", "records"):
        return rng.randbytes(rng.choice((0, 1, 8, 61, 200)))
    if kafka_type == "uuid":
        return uuid.UUID(int=rng.choice((0, 1, rng.getrandbits(128))))
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=rng.choice((0, 1, 100, 5000, 30000)))
    if kafka_type == "datetime_i64":
        return datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
    raise TypeError(kafka_type)


def _value(rng: random.Random, f: Any, depth: int) -> Any:
    cls = classify_field(f)
    if isinstance(cls, EntityField | EntityTupleField):
        return random_entity(rng, cls.type_, depth + 1)
    return _primitive(rng, get_schema_field_type(f))


def random_entity(rng: random.Random, entity: type[Any], depth: int = 0) -> Any:
    values: dict[str, Any] = {}
    for f in fields(entity):
        if is_optional(f) and get_field_tag(f) is None and rng.random() < 0.1:
            values[f.name] = None
        elif classify_field(f).is_array:
            values[f.name] = tuple(_value(rng, f, depth) for _ in range(rng.randint(0, 3 if depth < 2 else 1)))
        else:
            values[f.name] = _value(rng, f, depth)
    return entity(**values)


_EXAMPLE = {"int8": 1, "uint8": 1, "int16": 1, "uint16": 1, "int32": 1, "uint32": 1, "int64": 1, "uint64": 1,
            "float64": 1.5, "bool": True, "string": "ab", "bytes": b"xy", "records": b""}


def example_entity(entity: type[Any]) -> Any:
    """A fixed valid instance: every array has two items, every optional value and tagged
    field is present (so every count and length field of the schema is in its encoding)."""
    values: dict[str, Any] = {}
    for f in fields(entity):
        cls = classify_field(f)
        if isinstance(cls, EntityField | EntityTupleField):
            item = example_entity(cls.type_)
        else:
            kafka_type = get_schema_field_type(f)
            item = _EXAMPLE[kafka_type] if kafka_type in _EXAMPLE else _primitive(random.Random(0), kafka_type)
        values[f.name] = (item, item) if cls.is_array else item
    return entity(**values)


def sweep(api_key: int, version: int) -> list[bytes]:
    """The huge-count trick at every byte of the example body: header + body per request, each
    with the largest count its encoding can claim written at one offset."""
    schema = load_request_schema(api_key, version)
    head = header(api_key, version, 1, flexible=schema.__flexible__)
    body = encode_body(example_entity(schema))
    out = []
    for junk in ((b"\xff\xff\xff\xff\x0f", b"\x7f\xff") if schema.__flexible__ else (b"\x7f\xff\xff\xff", b"\x7f\xff")):
        for i in range(len(body)):
            out.append(head + body[:i] + junk + body[i + len(junk):])
    return out


def encode_body(obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


def header(api_key: int, version: int, correlation_id: int, *, flexible: bool, client_id: str = "fuzz") -> bytes:
    raw = client_id.encode()
    out = struct.pack(">hhih", api_key, version, correlation_id, len(raw)) + raw
    return out + b"\x00" if flexible else out


def random_request(rng: random.Random, api_key: int, version: int, correlation_id: int) -> bytes:
    """Header and body of one valid request (no size prefix)."""
    schema = load_request_schema(api_key, version)
    for _ in range(20):
        try:
            body = encode_body(random_entity(rng, schema))
            break
        except Exception:  # noqa: BLE001 - a drawn value out of a field's range: draw again
            continue
    else:
        body = b""
    return header(api_key, version, correlation_id, flexible=schema.__flexible__) + body
