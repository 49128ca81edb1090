"""Bytes of the consumer group records, as Kafka writes them: a key is an int16 record type and
a version-0 struct with int16-length strings; a value is an int16 version (0) and a flexible
struct (compact strings and arrays, a tagged-field section closing every struct)."""

from __future__ import annotations

import struct

from coordinator.binary import Reader, RecordDecodeError
from coordinator_common.varint import uvarint

from . import records as r

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


class ConsumerRecordError(RecordDecodeError):
    pass


# ---------------------------------------------------------------------------------------- writing

def cstr(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode("utf-8")
    return uvarint(len(b) + 1) + b


def carray(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def tagged_fields(tagged: dict[int, bytes]) -> bytes:
    """A tagged-field section: the fields that differ from their defaults, by tag."""
    return uvarint(len(tagged)) + b"".join(uvarint(t) + uvarint(len(v)) + v for t, v in sorted(tagged.items()))


def _topic_partitions(tp: r.TopicPartitions, with_epochs: bool = True) -> bytes:
    """A topic's partitions (and, in a current assignment, their assignment epochs: a tagged field
    written, as Kafka does, when it is not the empty default; None is written as a null array)."""
    if len(tp.topic_id) != 16:
        raise ConsumerRecordError("a topic id is 16 bytes")
    tagged = {}
    if with_epochs and tp.assignment_epochs != ():
        epochs = tp.assignment_epochs
        tagged[0] = b"\x00" if epochs is None else carray([_I32.pack(e) for e in epochs])
    return tp.topic_id + carray([_I32.pack(p) for p in tp.partitions]) + tagged_fields(tagged)


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
        return head + _I32.pack(value.epoch) + tagged_fields({0: _I64.pack(value.metadata_hash)} if value.metadata_hash else {})
    if isinstance(value, r.TargetEpochValue):
        ts = value.assignment_timestamp
        return head + _I32.pack(value.assignment_epoch) + tagged_fields({0: _I64.pack(ts)} if ts else {})
    if isinstance(value, r.TargetMemberValue):
        return head + carray([_topic_partitions(tp, with_epochs=False) for tp in value.partitions]) + tagged_fields({})
    if isinstance(value, r.CurrentAssignmentValue):
        return (head + _I32.pack(value.member_epoch) + _I32.pack(value.previous_member_epoch)
                + struct.pack(">b", value.state) + carray([_topic_partitions(tp) for tp in value.assigned])
                + carray([_topic_partitions(tp) for tp in value.pending_revocation]) + tagged_fields({}))
    v = value
    tagged = {}
    if v.classic is not None:
        protocols = [cstr(p.name) + uvarint(len(p.metadata) + 1) + p.metadata + tagged_fields({})
                     for p in v.classic.supported_protocols]
        # a nullable struct starts with a presence byte (1; a null one is not written: tagged, default null)
        tagged[0] = b"\x01" + _I32.pack(v.classic.session_timeout_ms) + carray(protocols) + tagged_fields({})
    return (head + cstr(v.instance_id) + cstr(v.rack_id) + cstr(v.client_id) + cstr(v.client_host)
            + carray([cstr(t) for t in sorted(v.subscribed_topic_names)]) + cstr(v.subscribed_topic_regex)
            + _I32.pack(v.rebalance_timeout_ms) + cstr(v.server_assignor) + tagged_fields(tagged))


# ---------------------------------------------------------------------------------------- reading

def _read_topic_partitions(i: Reader) -> r.TopicPartitions:
    topic_id = i.take(16)
    partitions = tuple(i.int32() for _ in range(i.array_len(True)))
    epochs: tuple[int, ...] | None = ()
    raw = i.tags().get(0)
    if raw is not None:
        t = Reader(raw)
        n = t.uvarint() - 1
        epochs = None if n < 0 else tuple(t.int32() for _ in range(n))
    return r.TopicPartitions(topic_id, partitions, epochs)


def decode_key(data: bytes) -> r.ConsumerGroupKey:
    i = Reader(data)
    kind = i.int16()
    group = i.string(False)
    if kind in (r.GROUP_METADATA, r.TARGET_METADATA):
        key: r.ConsumerGroupKey = r.GroupKey(kind, group)
    elif kind in (r.MEMBER_METADATA, r.TARGET_MEMBER, r.CURRENT_ASSIGNMENT):
        key = r.MemberKey(kind, group, i.string(False))
    else:
        raise ConsumerRecordError(f"record type {kind} is not a consumer group record")
    i.done()
    return key


def decode_value(record_type: int, data: bytes) -> r.ConsumerGroupValue:
    i = Reader(data)
    if i.int16() != 0:
        raise ConsumerRecordError("unknown value version")
    value: r.ConsumerGroupValue
    if record_type == r.GROUP_METADATA:
        epoch = i.int32()
        raw = i.tags().get(0)
        value = r.GroupEpochValue(epoch, int(_I64.unpack(raw)[0]) if raw else 0)
    elif record_type == r.TARGET_METADATA:
        epoch = i.int32()
        raw = i.tags().get(0)
        value = r.TargetEpochValue(epoch, int(_I64.unpack(raw)[0]) if raw else 0)
    elif record_type == r.TARGET_MEMBER:
        value = r.TargetMemberValue(tuple(_read_topic_partitions(i) for _ in range(i.array_len(True))))
        i.tags()
    elif record_type == r.CURRENT_ASSIGNMENT:
        member_epoch, previous, state = i.int32(), i.int32(), i.int8()
        assigned = tuple(_read_topic_partitions(i) for _ in range(i.array_len(True)))
        pending = tuple(_read_topic_partitions(i) for _ in range(i.array_len(True)))
        i.tags()
        value = r.CurrentAssignmentValue(member_epoch, previous, state, assigned, pending)
    elif record_type == r.MEMBER_METADATA:
        instance_id, rack_id, client_id, client_host = i.nstring(True), i.nstring(True), i.string(True), i.string(True)
        names = tuple(i.string(True) for _ in range(i.array_len(True)))
        regex, timeout, assignor = i.nstring(True), i.int32(), i.nstring(True)
        classic = None
        raw = i.tags().get(0)
        if raw is not None:
            c = Reader(raw)
            if c.int8() < 0:
                raise ConsumerRecordError("a null ClassicMemberMetadata written as a tagged field")
            session_timeout = c.int32()
            protocols = []
            for _ in range(c.array_len(True)):
                name = c.string(True)
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
