"""Valid example requests for any kio schema: every array has two items, every optional value
is present, every tagged field is set. Used to mutate real encodings (bounds and fuzz tests)."""

from __future__ import annotations

import datetime
import io
import uuid
from dataclasses import fields
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field, get_schema_field_type

_VALUES: dict[str, Any] = {
    "int8": 1, "uint8": 1, "int16": 1, "uint16": 1, "int32": 1, "uint32": 1, "int64": 1, "uint64": 1,
    "float64": 1.5, "bool": True, "string": "ab", "bytes": b"xy", "records": b"",
    "uuid": uuid.UUID(int=7), "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(milliseconds=5), "timedelta_i64": datetime.timedelta(milliseconds=5),
    "datetime_i64": datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
}


def example(entity: type[Any]) -> Any:
    values: dict[str, Any] = {}
    for f in fields(entity):
        cls = classify_field(f)
        if isinstance(cls, EntityField | EntityTupleField):
            item = example(cls.type_)
        else:
            item = _VALUES[get_schema_field_type(f)]
        values[f.name] = (item, item) if cls.is_array else item
    return entity(**values)


def encode(obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


def request_schemas(max_key: int = 100, max_version: int = 20) -> list[tuple[int, int, type[Any]]]:
    """Every request schema kio knows: ``(api_key, version, schema)``."""
    out = []
    for key in range(max_key):
        for version in range(max_version):
            try:
                out.append((key, version, load_request_schema(key, version)))
            except Exception:  # noqa: BLE001 - no such key or version
                continue
    return out
