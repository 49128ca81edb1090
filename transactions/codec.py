"""Byte encoding of ``__transaction_state`` records, bit-compatible with Kafka's.

Key: int16 version 0, then the transactional id (int16-length string). Value: int16 version,
then the fields; written as v0 (what Kafka writes below transaction version 1) unless a
transaction version 2 field is set, then as v1 (flexible: compact encodings and Kafka's tagged
fields 0 PreviousProducerId, 1 NextProducerId, 2 ClientTransactionVersion; other tags are
skipped). A null value is a tombstone.
"""

from __future__ import annotations

import struct
from collections import defaultdict

from coordinator_common.varint import uvarint

from .records import TopicPartition, TxnRecord, TxnValue
from .state import TxnState


class TxnRecordDecodeError(ValueError):
    pass


_HEAD = struct.Struct(">qhib")  # producer id, epoch, timeout, state
_TIMES = struct.Struct(">qq")  # last update, start
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return _I16.pack(0) + _I16.pack(len(raw)) + raw


def encode_value(value: TxnValue | None) -> bytes | None:
    if value is None:
        return None
    if value.state is TxnState.EMPTY and value.partitions:
        raise ValueError("an Empty transaction has no partitions")  # Kafka refuses it too
    if value.previous_producer_id >= 0 or value.next_producer_id >= 0 or value.client_version > 0:
        return _encode_flexible(value)
    out = [_I16.pack(0), _HEAD.pack(value.producer_id, value.producer_epoch, value.timeout_ms, value.state)]
    if value.state is TxnState.EMPTY:
        out.append(_I32.pack(-1))
    else:
        by_topic = _by_topic(value.partitions)
        out.append(_I32.pack(len(by_topic)))
        for topic, parts in by_topic.items():
            raw = topic.encode()
            out += [_I16.pack(len(raw)), raw, _I32.pack(len(parts)), struct.pack(f">{len(parts)}i", *parts)]
    out.append(_TIMES.pack(value.last_update_ms, value.start_ms))
    return b"".join(out)


def _encode_flexible(value: TxnValue) -> bytes:
    out = [_I16.pack(1), _HEAD.pack(value.producer_id, value.producer_epoch, value.timeout_ms, value.state)]
    if value.state is TxnState.EMPTY:
        out.append(uvarint(0))  # null
    else:
        by_topic = _by_topic(value.partitions)
        out.append(uvarint(len(by_topic) + 1))
        for topic, parts in by_topic.items():
            raw = topic.encode()
            out += [uvarint(len(raw) + 1), raw, uvarint(len(parts) + 1), struct.pack(f">{len(parts)}i", *parts),
                    uvarint(0)]
    out.append(_TIMES.pack(value.last_update_ms, value.start_ms))
    tags = [(tag, raw) for tag, raw, default in (
        (0, _I64.pack(value.previous_producer_id), value.previous_producer_id == -1),
        (1, _I64.pack(value.next_producer_id), value.next_producer_id == -1),
        (2, _I16.pack(value.client_version), value.client_version == 0)) if not default]
    out.append(uvarint(len(tags)))
    for tag, raw in tags:
        out += [uvarint(tag), uvarint(len(raw)), raw]
    return b"".join(out)


def _by_topic(partitions: frozenset[TopicPartition]) -> dict[str, list[int]]:
    """Partitions grouped by topic, as the record lists them (sorted)."""
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, p in sorted(partitions):
        by_topic[topic].append(p)
    return by_topic


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
    tags = r.tags() if flexible else {}
    previous, following = (_I64.unpack(tags[t])[0] if len(tags.get(t, b"")) == 8 else -1 for t in (0, 1))
    version = _I16.unpack(tags[2])[0] if len(tags.get(2, b"")) == 2 else 0
    return TxnValue(pid, epoch, timeout, state, frozenset(parts) if state is not TxnState.EMPTY else frozenset(),
                    last_update, start, previous, following, version)


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
        self.tags()

    def tags(self) -> dict[int, bytes]:
        found = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            found[tag] = self._take(self.uvarint())
        return found
