"""Reading Kafka's record encodings: fixed-width integers, int16- or varint-length strings and
arrays (non-flexible and flexible versions), tagged fields. Shared by the ``__consumer_offsets``
codecs (classic records in ``codec``, consumer group records in ``consumer_group.codec``)."""

from __future__ import annotations

import struct

_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


class RecordDecodeError(ValueError):
    pass


class Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordDecodeError("record truncated")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def int8(self) -> int:
        return int(_I8.unpack(self.take(1))[0])

    def int16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def int64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])

    def uvarint(self) -> int:
        shift = 0
        result = 0
        while True:
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise RecordDecodeError("varint too long")

    def string(self, flexible: bool) -> str:
        s = self.nstring(flexible)
        if s is None:
            raise RecordDecodeError("null where a string is required")
        return s

    def nstring(self, flexible: bool) -> str | None:
        n = self.uvarint() - 1 if flexible else self.int16()
        if n < 0:
            return None
        return self.take(n).decode("utf-8")

    def bytes_(self, flexible: bool) -> bytes:
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < 0:
            return b""
        return self.take(n)

    def array_len(self, flexible: bool) -> int:
        n = self.uvarint() - 1 if flexible else self.int32()
        return max(n, 0)

    def skip_tags(self, flexible: bool) -> None:
        if not flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def tags(self) -> dict[int, bytes]:
        """A flexible struct's tagged fields, by tag."""
        return {self.uvarint(): self.take(self.uvarint()) for _ in range(self.uvarint())}

    def done(self) -> None:
        if self.pos != len(self.data):
            raise RecordDecodeError(f"{len(self.data) - self.pos} trailing byte(s)")
