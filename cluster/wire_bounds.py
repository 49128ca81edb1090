"""Bounds check of a request body before kio reads it.

kio's native reader sizes an array from its count field before reading any element, so a
20-byte frame that claims 0xFFFFFFFF topics makes it allocate tens of gigabytes and the
process dies. This module walks a body by its schema without building anything and rejects
any array count, string or bytes length, or tagged field that cannot fit in the bytes left
of the frame (or of its tagged field). kio is only asked to decode bodies that pass.

Each schema is compiled once into a tree of small check functions ``(buf, pos, end) ->
pos``; a check raises ``BoundsError`` and never reads past ``end``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

Check = Callable[[bytes, int, int, list[int]], int]  # (buf, pos, end, items_left) -> pos


class BoundsError(Exception):
    """The body claims more than the frame holds, or is cut short."""


_FIXED = {
    "int8": 1, "uint8": 1, "bool": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4, "uint32": 4,
    "timedelta_i32": 4, "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end:
            raise BoundsError("varint runs past the end")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise BoundsError("varint longer than 5 bytes")


def _fixed(size: int) -> Check:
    def check(buf: bytes, pos: int, end: int, items: list[int]) -> int:
        pos += size
        if pos > end:
            raise BoundsError(f"{size}-byte field runs past the end")
        return pos

    return check


def _null(nullable: bool, what: str) -> None:
    if not nullable:  # kio would hand the handler a None where the schema promises a value
        raise BoundsError(f"null {what} in a non-nullable field")


def _sized(width: int, nullable: bool) -> Check:
    """A string/bytes with a signed legacy length prefix (int16 or int32); -1 = null."""
    unpack = (_I16 if width == 2 else _I32).unpack_from

    def check(buf: bytes, pos: int, end: int, items: list[int]) -> int:
        if pos + width > end:
            raise BoundsError("length runs past the end")
        n: int = unpack(buf, pos)[0]
        pos += width
        if n < 0:
            if n < -1:
                raise BoundsError(f"negative length {n}")
            _null(nullable, "string or bytes")
            return pos
        if n > end - pos:
            raise BoundsError(f"length {n} larger than the {end - pos} bytes left")
        return pos + n

    return check


def _compact_sized(nullable: bool) -> Check:
    def check(buf: bytes, pos: int, end: int, items: list[int]) -> int:
        n, pos = _uvarint(buf, pos, end)
        if n == 0:
            _null(nullable, "string or bytes")
            return pos
        n -= 1
        if n > end - pos:
            raise BoundsError(f"length {n} larger than the {end - pos} bytes left")
        return pos + n

    return check


def _array(item: Check, item_min: int, flexible: bool, nullable: bool) -> Check:
    per_item = max(item_min, 1)  # an empty item still may not be claimed a billion times

    def check(buf: bytes, pos: int, end: int, items: list[int]) -> int:
        if flexible:
            n, pos = _uvarint(buf, pos, end)
            n -= 1
        else:
            if pos + 4 > end:
                raise BoundsError("array count runs past the end")
            (n,) = _I32.unpack_from(buf, pos)
            pos += 4
            if n < -1:
                raise BoundsError(f"negative array count {n}")
        if n < 0:
            _null(nullable, "array")
            return pos
        if n == 0:
            return pos
        if n * per_item > end - pos:
            raise BoundsError(f"array of {n} items cannot fit in the {end - pos} bytes left")
        items[0] -= n
        if items[0] < 0:
            raise BoundsError("more array items in one request than request_max_array_items allows")
        if item_min > 0 and item_min == _fixed_size(item):
            return pos + n * item_min
        for _ in range(n):
            pos = item(buf, pos, end, items)
        return pos

    return check


def _fixed_size(check: Check) -> int:
    size: int = getattr(check, "fixed_size", -1)
    return size


def _primitive(kafka_type: str, flexible: bool, nullable: bool) -> tuple[Check, int]:
    size = _FIXED.get(kafka_type)
    if size is not None:
        check = _fixed(size)
        check.fixed_size = size  # type: ignore[attr-defined]
        return check, size
    if kafka_type == "string":
        return (_compact_sized(nullable), 1) if flexible else (_sized(2, nullable), 2)
    if kafka_type in ("bytes", "records"):
        return (_compact_sized(nullable), 1) if flexible else (_sized(4, nullable), 4)
    raise TypeError(f"no bounds check for kafka type {kafka_type!r}")


def _nullable_entity(inner: Check) -> Check:
    def check(buf: bytes, pos: int, end: int, items: list[int]) -> int:
        if pos >= end:
            raise BoundsError("struct marker runs past the end")
        marker = buf[pos]
        pos += 1
        return pos if marker == 0xFF else inner(buf, pos, end, items)

    return check


def _field(f: Any, flexible: bool, is_tag: bool) -> tuple[Check, int]:
    cls = classify_field(f)
    nullable = is_tag or is_optional(f)  # kio reads a tagged field's value as it comes
    if isinstance(cls, PrimitiveField | PrimitiveTupleField):
        # in a primitive array, nullability is the array's, never its items'
        item, item_min = _primitive(get_schema_field_type(f), flexible, nullable and not cls.is_array)
    else:
        assert isinstance(cls, EntityField | EntityTupleField)
        item, item_min = entity_check(cls.type_)
        if isinstance(cls, EntityField) and not is_tag and nullable:
            return _nullable_entity(item), 1
    if cls.is_array:
        return _array(item, item_min, flexible, nullable), (1 if flexible else 4)
    return item, item_min


_compiled: dict[type[Any], tuple[Check, int]] = {}


def entity_check(entity: type[Any]) -> tuple[Check, int]:
    """The check of one schema (request body or nested struct) and its smallest encoding."""
    done = _compiled.get(entity)
    if done is None:
        done = _compiled[entity] = _compile(entity)
    return done


def _compile(entity: type[Any]) -> tuple[Check, int]:
    flexible = bool(entity.__flexible__)
    plain: list[Check] = []
    tagged: dict[int, Check] = {}
    minimum = 1 if flexible else 0
    for f in fields(entity):
        tag = get_field_tag(f)
        check, least = _field(f, flexible, tag is not None)
        if tag is None:
            plain.append(check)
            minimum += least
        else:
            tagged[int(tag)] = check

    def check_entity(buf: bytes, pos: int, end: int, items: list[int]) -> int:
        for c in plain:
            pos = c(buf, pos, end, items)
        if not flexible:
            return pos
        count, pos = _uvarint(buf, pos, end)
        if count * 2 > end - pos:  # a tag and a size are at least one byte each
            raise BoundsError(f"{count} tagged fields cannot fit in the {end - pos} bytes left")
        for _ in range(count):
            tag, pos = _uvarint(buf, pos, end)
            size, pos = _uvarint(buf, pos, end)
            if size > end - pos:
                raise BoundsError(f"tagged field {tag} of {size} bytes runs past the end")
            known = tagged.get(tag)
            if known is not None:
                known(buf, pos, pos + size, items)  # kio reads known tags: bound them by their size
            pos += size
        return pos

    return check_entity, minimum


def check_body(schema: type[Any], frame: bytes, offset: int, max_items: int = 1 << 62) -> None:
    """Raise ``BoundsError`` unless ``frame[offset:]`` can be read as ``schema`` without any
    count or length claiming more than is there, and with at most ``max_items`` array items
    in all (every item costs loop time to decode and answer, whatever its size)."""
    check, _ = entity_check(schema)
    check(frame, offset, len(frame), [max_items])
