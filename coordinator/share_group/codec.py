"""Bytes of the share group records, as Kafka writes them: a key is an int16 record type and a
version-0 struct with int16-length strings; a value is an int16 version (0) and a flexible struct
(compact strings and arrays, a tagged-field section closing every struct)."""

from __future__ import annotations

import struct

from coordinator.binary import Reader, RecordDecodeError
from coordinator.consumer_group.codec import carray, cstr, tagged_fields

from . import records as r

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


class ShareRecordError(RecordDecodeError):
    pass


def _topic_id(tid: bytes) -> bytes:
    if len(tid) != 16:
        raise ShareRecordError("a topic id is 16 bytes")
    return tid


def _partitions(tp: r.SharePartitions) -> bytes:
    return _topic_id(tp.topic_id) + carray([_I32.pack(p) for p in tp.partitions]) + tagged_fields({})


def _state_topic(t: r.StateTopic, with_partitions: bool) -> bytes:
    parts = carray([_I32.pack(p) for p in t.partitions]) if with_partitions else b""
    return _topic_id(t.topic_id) + cstr(t.name) + parts + tagged_fields({})


def encode_key(key: r.ShareKey) -> bytes:
    g = key.group.encode("utf-8")
    out = _I16.pack(key.record_type) + _I16.pack(len(g)) + g
    if isinstance(key, r.ShareStateKey):
        return out + _topic_id(key.topic_id) + _I32.pack(key.partition)
    if isinstance(key, r.ShareMemberKey):
        m = key.member_id.encode("utf-8")
        out += _I16.pack(len(m)) + m
    return out


def encode_value(value: r.ShareValue) -> bytes:
    head = _I16.pack(0)
    if isinstance(value, r.ShareEpochValue):
        return head + _I32.pack(value.epoch) + _I64.pack(value.metadata_hash) + tagged_fields({})
    if isinstance(value, r.ShareTargetEpochValue):
        ts = value.assignment_timestamp
        return head + _I32.pack(value.assignment_epoch) + tagged_fields({0: _I64.pack(ts)} if ts else {})
    if isinstance(value, r.ShareTargetMemberValue):
        return head + carray([_partitions(tp) for tp in value.partitions]) + tagged_fields({})
    if isinstance(value, r.ShareAssignmentValue):
        return (head + _I32.pack(value.member_epoch) + _I32.pack(value.previous_member_epoch)
                + struct.pack(">b", value.state) + carray([_partitions(tp) for tp in value.assigned])
                + tagged_fields({}))
    if isinstance(value, r.SharePartitionState):
        dcc = value.delivery_complete_count
        return (head + _I32.pack(value.snapshot_epoch) + _I32.pack(value.state_epoch) + _I32.pack(value.leader_epoch)
                + _I64.pack(value.start_offset) + _I64.pack(value.create_timestamp)
                + _I64.pack(value.write_timestamp)
                + carray([_I64.pack(b.first_offset) + _I64.pack(b.last_offset) + struct.pack(">bh", b.delivery_state,
                                                                                            b.delivery_count)
                          + tagged_fields({}) for b in value.batches])
                + tagged_fields({0: _I32.pack(dcc)} if dcc != -1 else {}))
    if isinstance(value, r.ShareStateValue):
        return (head + carray([_state_topic(t, True) for t in value.initializing])
                + carray([_state_topic(t, True) for t in value.initialized])
                + carray([_state_topic(t, False) for t in value.deleting]) + tagged_fields({}))
    v = value
    return (head + cstr(v.rack_id) + cstr(v.client_id) + cstr(v.client_host)
            + carray([cstr(t) for t in sorted(v.subscribed_topic_names)]) + tagged_fields({}))


def _read_partitions(i: Reader) -> r.SharePartitions:
    topic_id = i.take(16)
    partitions = tuple(i.int32() for _ in range(i.array_len(True)))
    i.tags()
    return r.SharePartitions(topic_id, partitions)


def _read_state_topic(i: Reader, with_partitions: bool) -> r.StateTopic:
    topic_id, name = i.take(16), i.string(True)
    partitions = tuple(i.int32() for _ in range(i.array_len(True))) if with_partitions else ()
    i.tags()
    return r.StateTopic(topic_id, name, partitions)


def decode_key(data: bytes) -> r.ShareKey:
    i = Reader(data)
    kind = i.int16()
    group = i.string(False)
    if kind == r.SHARE_STATE:
        key: r.ShareKey = r.ShareStateKey(group, i.take(16), i.int32())
    elif kind in r.GROUP_TYPES:
        key = r.ShareGroupKey(kind, group)
    elif kind in r.MEMBER_TYPES:
        key = r.ShareMemberKey(kind, group, i.string(False))
    else:
        raise ShareRecordError(f"record type {kind} is not a share group record")
    i.done()
    return key


def decode_value(record_type: int, data: bytes) -> r.ShareValue:
    i = Reader(data)
    if i.int16() != 0:
        raise ShareRecordError("unknown value version")
    value: r.ShareValue
    if record_type == r.GROUP_METADATA:
        value = r.ShareEpochValue(i.int32(), i.int64())
        i.tags()
    elif record_type == r.TARGET_METADATA:
        epoch = i.int32()
        raw = i.tags().get(0)
        value = r.ShareTargetEpochValue(epoch, int(_I64.unpack(raw)[0]) if raw else 0)
    elif record_type == r.TARGET_MEMBER:
        value = r.ShareTargetMemberValue(tuple(_read_partitions(i) for _ in range(i.array_len(True))))
        i.tags()
    elif record_type == r.CURRENT_ASSIGNMENT:
        epoch, previous, state = i.int32(), i.int32(), i.int8()
        assigned = tuple(_read_partitions(i) for _ in range(i.array_len(True)))
        i.tags()
        value = r.ShareAssignmentValue(epoch, previous, state, assigned)
    elif record_type == r.SHARE_STATE:
        snapshot_epoch, state_epoch, leader_epoch = i.int32(), i.int32(), i.int32()
        start, created, written = i.int64(), i.int64(), i.int64()
        batches = []
        for _ in range(i.array_len(True)):
            batches.append(r.StateBatch(i.int64(), i.int64(), i.int8(), i.int16()))
            i.tags()
        raw = i.tags().get(0)
        value = r.SharePartitionState(snapshot_epoch, state_epoch, leader_epoch, start, created, written,
                                      tuple(batches), int(_I32.unpack(raw)[0]) if raw else -1)
    elif record_type == r.STATE_PARTITIONS:
        initializing = tuple(_read_state_topic(i, True) for _ in range(i.array_len(True)))
        initialized = tuple(_read_state_topic(i, True) for _ in range(i.array_len(True)))
        deleting = tuple(_read_state_topic(i, False) for _ in range(i.array_len(True)))
        i.tags()
        value = r.ShareStateValue(initializing, initialized, deleting)
    elif record_type == r.MEMBER_METADATA:
        rack_id, client_id, client_host = i.nstring(True), i.string(True), i.string(True)
        names = tuple(i.string(True) for _ in range(i.array_len(True)))
        i.tags()
        value = r.ShareMemberValue(rack_id, client_id, client_host, names)
    else:
        raise ShareRecordError(f"record type {record_type} is not a share group record")
    i.done()
    return value
