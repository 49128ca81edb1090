"""Bytes of the consumer group records, as Kafka writes them: a key is an int16 record type and
a version-0 struct with int16-length strings; a value is an int16 version (0) and a flexible
struct (compact strings and arrays, a tagged-field section closing every struct)."""

from __future__ import annotations

import struct

from . import records as r

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


class ConsumerRecordError(ValueError):
    pass


# ---------------------------------------------------------------------------------------- writing

def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _cstr(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode("utf-8")
    return _uvarint(len(b) + 1) + b


def _carray(items: list[bytes]) -> bytes:
    return _uvarint(len(items) + 1) + b"".join(items)


def _tags(tagged: dict[int, bytes]) -> bytes:
    """A tagged-field section: the fields that differ from their defaults, by tag."""
    return _uvarint(len(tagged)) + b"".join(_uvarint(t) + _uvarint(len(v)) + v for t, v in sorted(tagged.items()))


def _topic_partitions(tp: r.TopicPartitions, with_epochs: bool = True) -> bytes:
    """A topic's partitions (and, in a current assignment, their assignment epochs: a tagged field
    written, as Kafka does, when it is not the empty default; None is written as a null array)."""
    if len(tp.topic_id) != 16:
        raise ConsumerRecordError("a topic id is 16 bytes")
    tagged = {}
    if with_epochs and tp.assignment_epochs != ():
        epochs = tp.assignment_epochs
        tagged[0] = b"\x00" if epochs is None else _carray([_I32.pack(e) for e in epochs])
    return tp.topic_id + _carray([_I32.pack(p) for p in tp.partitions]) + _tags(tagged)


def encode_key(key: r.ConsumerGroupKey) -> bytes:
    g = key.group.encode("utf-8")
    out = _I16.pack(key.record_type) + _I16.pack(len(g)) + g
    if isinstance(key, r.MemberKey):
        m = key.member_id.encode("utf-8")
        out += _I16.pack(len(m)) + m
    return out


def encode_value(value: r.ConsumerGroupValue) -> bytes:
    head = _I16.pack(0)
    if isinstance(value, r.GroupEpochValue):
        return head + _I32.pack(value.epoch) + _tags({0: _I64.pack(value.metadata_hash)} if value.metadata_hash else {})
    if isinstance(value, r.TargetEpochValue):
        ts = value.assignment_timestamp
        return head + _I32.pack(value.assignment_epoch) + _tags({0: _I64.pack(ts)} if ts else {})
    if isinstance(value, r.TargetMemberValue):
        return head + _carray([_topic_partitions(tp, with_epochs=False) for tp in value.partitions]) + _tags({})
    if isinstance(value, r.CurrentAssignmentValue):
        return (head + _I32.pack(value.member_epoch) + _I32.pack(value.previous_member_epoch)
                + struct.pack(">b", value.state) + _carray([_topic_partitions(tp) for tp in value.assigned])
                + _carray([_topic_partitions(tp) for tp in value.pending_revocation]) + _tags({}))
    v = value
    tagged = {}
    if v.classic is not None:
        protocols = [_cstr(p.name) + _uvarint(len(p.metadata) + 1) + p.metadata + _tags({})
                     for p in v.classic.supported_protocols]
        # a nullable struct starts with a presence byte (1; a null one is not written: tagged, default null)
        tagged[0] = b"\x01" + _I32.pack(v.classic.session_timeout_ms) + _carray(protocols) + _tags({})
    return (head + _cstr(v.instance_id) + _cstr(v.rack_id) + _cstr(v.client_id) + _cstr(v.client_host)
            + _carray([_cstr(t) for t in sorted(v.subscribed_topic_names)]) + _cstr(v.subscribed_topic_regex)
            + _I32.pack(v.rebalance_timeout_ms) + _cstr(v.server_assignor) + _tags(tagged))


# ---------------------------------------------------------------------------------------- reading

class _In:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ConsumerRecordError("record truncated")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def i8(self) -> int:
        return int(struct.unpack(">b", self.take(1))[0])

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise ConsumerRecordError("varint too long")

    def short_str(self) -> str:
        return self.take(self.i16()).decode("utf-8")

    def cstr(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self.take(n).decode("utf-8")

    def cstr_required(self) -> str:
        s = self.cstr()
        if s is None:
            raise ConsumerRecordError("null where a string is required")
        return s

    def count(self) -> int:
        return max(self.uvarint() - 1, 0)

    def tags(self) -> dict[int, bytes]:
        return {self.uvarint(): self.take(self.uvarint()) for _ in range(self.uvarint())}

    def done(self) -> None:
        if self.pos != len(self.data):
            raise ConsumerRecordError(f"{len(self.data) - self.pos} trailing byte(s)")


def _read_topic_partitions(i: _In) -> r.TopicPartitions:
    topic_id = i.take(16)
    partitions = tuple(i.i32() for _ in range(i.count()))
    epochs: tuple[int, ...] | None = ()
    raw = i.tags().get(0)
    if raw is not None:
        t = _In(raw)
        n = t.uvarint() - 1
        epochs = None if n < 0 else tuple(t.i32() for _ in range(n))
    return r.TopicPartitions(topic_id, partitions, epochs)


def decode_key(data: bytes) -> r.ConsumerGroupKey:
    i = _In(data)
    kind = i.i16()
    group = i.short_str()
    if kind in (r.GROUP_METADATA, r.TARGET_METADATA):
        key: r.ConsumerGroupKey = r.GroupKey(kind, group)
    elif kind in (r.MEMBER_METADATA, r.TARGET_MEMBER, r.CURRENT_ASSIGNMENT):
        key = r.MemberKey(kind, group, i.short_str())
    else:
        raise ConsumerRecordError(f"record type {kind} is not a consumer group record")
    i.done()
    return key


def decode_value(record_type: int, data: bytes) -> r.ConsumerGroupValue:
    i = _In(data)
    if i.i16() != 0:
        raise ConsumerRecordError("unknown value version")
    value: r.ConsumerGroupValue
    if record_type == r.GROUP_METADATA:
        epoch = i.i32()
        raw = i.tags().get(0)
        value = r.GroupEpochValue(epoch, int(_I64.unpack(raw)[0]) if raw else 0)
    elif record_type == r.TARGET_METADATA:
        epoch = i.i32()
        raw = i.tags().get(0)
        value = r.TargetEpochValue(epoch, int(_I64.unpack(raw)[0]) if raw else 0)
    elif record_type == r.TARGET_MEMBER:
        value = r.TargetMemberValue(tuple(_read_topic_partitions(i) for _ in range(i.count())))
        i.tags()
    elif record_type == r.CURRENT_ASSIGNMENT:
        member_epoch, previous, state = i.i32(), i.i32(), i.i8()
        assigned = tuple(_read_topic_partitions(i) for _ in range(i.count()))
        pending = tuple(_read_topic_partitions(i) for _ in range(i.count()))
        i.tags()
        value = r.CurrentAssignmentValue(member_epoch, previous, state, assigned, pending)
    elif record_type == r.MEMBER_METADATA:
        instance_id, rack_id, client_id, client_host = i.cstr(), i.cstr(), i.cstr_required(), i.cstr_required()
        names = tuple(i.cstr_required() for _ in range(i.count()))
        regex, timeout, assignor = i.cstr(), i.i32(), i.cstr()
        classic = None
        raw = i.tags().get(0)
        if raw is not None:
            c = _In(raw)
            if c.i8() < 0:
                raise ConsumerRecordError("a null ClassicMemberMetadata written as a tagged field")
            session_timeout = c.i32()
            protocols = []
            for _ in range(c.count()):
                name = c.cstr_required()
                metadata = c.take(max(c.uvarint() - 1, 0))
                c.tags()
                protocols.append(r.ClassicProtocol(name, metadata))
            c.tags()
            classic = r.ClassicMemberMetadata(session_timeout, tuple(protocols))
        value = r.MemberMetadataValue(instance_id, rack_id, client_id, client_host, names, regex, timeout, assignor,
                                      classic)
    else:
        raise ConsumerRecordError(f"record type {record_type} is not a consumer group record")
    i.done()
    return value
