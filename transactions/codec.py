"""Byte encoding of ``__transaction_state`` records, bit-compatible with Kafka's.

Key: int16 version 0, then the transactional id (int16-length string). Value: int16 version,
then the fields; written as v0 (what Kafka writes below transaction version 1), read as v0
or v1 (flexible: compact encodings and tagged fields, whose tags are skipped). A null value
is a tombstone.
"""

from __future__ import annotations

import struct
from collections import defaultdict

from .records import TopicPartition, TxnRecord, TxnValue
from .state import TxnState


class TxnRecordDecodeError(ValueError):
    pass


_HEAD = struct.Struct(">qhib")  # producer id, epoch, timeout, state
_TIMES = struct.Struct(">qq")  # last update, start
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return _I16.pack(0) + _I16.pack(len(raw)) + raw


def encode_value(value: TxnValue | None) -> bytes | None:
    if value is None:
        return None
    if value.state is TxnState.EMPTY and value.partitions:
        raise ValueError("an Empty transaction has no partitions")  # Kafka refuses it too
    out = [_I16.pack(0), _HEAD.pack(value.producer_id, value.producer_epoch, value.timeout_ms, value.state)]
    if value.state is TxnState.EMPTY:
        out.append(_I32.pack(-1))
    else:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, p in sorted(value.partitions):
            by_topic[topic].append(p)
        out.append(_I32.pack(len(by_topic)))
        for topic, parts in by_topic.items():
            raw = topic.encode()
            out += [_I16.pack(len(raw)), raw, _I32.pack(len(parts)), struct.pack(f">{len(parts)}i", *parts)]
    out.append(_TIMES.pack(value.last_update_ms, value.start_ms))
    return b"".join(out)


def encode(record: TxnRecord) -> tuple[bytes, bytes | None]:
    return encode_key(record.transactional_id), encode_value(record.value)


def decode(key: bytes, value: bytes | None) -> TxnRecord:
    try:
        r = _Reader(key)
        if r.i16() != 0:
            raise TxnRecordDecodeError("unknown __transaction_state key version")
        tid = r.string()
        return TxnRecord(tid, None if value is None else _decode_value(value))
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as e:
        raise TxnRecordDecodeError(str(e)) from e


def _decode_value(data: bytes) -> TxnValue:
    r = _Reader(data)
    version = r.i16()
    if version not in (0, 1):
        raise TxnRecordDecodeError(f"unknown __transaction_state value version {version}")
    flexible = version == 1
    pid, epoch, timeout, state_id = _HEAD.unpack_from(data, r.pos)
    r.pos += _HEAD.size
    state = TxnState(state_id)
    n = r.uvarint() - 1 if flexible else r.i32()
    parts: set[TopicPartition] = set()
    for _ in range(max(n, 0)):
        topic = r.compact_string() if flexible else r.string()
        count = r.uvarint() - 1 if flexible else r.i32()
        for _ in range(max(count, 0)):
            parts.add((topic, r.i32()))
        if flexible:
            r.skip_tags()
    last_update, start = _TIMES.unpack_from(data, r.pos)
    r.pos += _TIMES.size
    if flexible:
        r.skip_tags()  # previous/next producer id, client transaction version: not used at TV1
    return TxnValue(pid, epoch, timeout, state, frozenset(parts) if state is not TxnState.EMPTY else frozenset(),
                    last_update, start)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def i16(self) -> int:
        (v,) = _I16.unpack_from(self.data, self.pos)
        self.pos += 2
        return int(v)

    def i32(self) -> int:
        (v,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(v)

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TxnRecordDecodeError("truncated record")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def string(self) -> str:
        return self._take(self.i16()).decode()

    def compact_string(self) -> str:
        return self._take(self.uvarint() - 1).decode()

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise TxnRecordDecodeError("varint too long")

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())
