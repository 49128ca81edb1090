"""Byte encoding of coordinator records, bit-compatible with Kafka's ``__consumer_offsets``.

Keys: int16 record type (1 = offset commit, 2 = group metadata; 0 also read as offset
commit) then the key struct. Values: int16 version then the struct; written as v3
(offset commit v1 when an expire timestamp is present); read v0-v4, v4 being flexible.
A Raft entry holds a batch of records, framed with msgpack.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import msgpack

from .binary import Reader as _Reader
from .binary import RecordDecodeError as RecordDecodeError  # raised by decode_record and decode_batch
from .consumer_group import codec as consumer_codec
from .consumer_group import records as consumer_records
from .records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    TxnMarkerKey,
    TxnMarkerValue,
)
from .share_group import codec as share_codec
from .share_group import records as share_records

CONSUMER_GROUP_TYPES = frozenset({consumer_records.GROUP_METADATA, consumer_records.MEMBER_METADATA,
                                  consumer_records.TARGET_METADATA, consumer_records.TARGET_MEMBER,
                                  consumer_records.CURRENT_ASSIGNMENT})


class UnknownRecordType(RecordDecodeError):
    """A record type this coordinator does not know; loaders skip it, as Kafka does."""


# Offset commits are nearly every record written and read (followers decode each one into
# their pre-replayed image), so they are packed and unpacked with precompiled structs rather
# than field by field; other records go through _Writer/_Reader.
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_OFFSET_V3_HEAD = struct.Struct(">hqi")  # version 3, offset, leader epoch
_OFFSET_KEY_TYPE = _I16.pack(1)


def _short_string(v: str) -> bytes:
    b = v.encode("utf-8")
    return _I16.pack(len(b)) + b


class _Writer:
    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def int32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def int64(self, v: int) -> None:
        self.parts.append(_I64.pack(v))

    def string(self, v: str) -> None:
        self.parts.append(_short_string(v))

    def nstring(self, v: str | None) -> None:
        if v is None:
            self.int16(-1)
        else:
            self.string(v)

    def bytes_(self, v: bytes) -> None:
        self.int32(len(v))
        self.parts.append(v)

    def done(self) -> bytes:
        return b"".join(self.parts)


def encode_key(record: Record) -> bytes:
    key = record.key
    if isinstance(key, consumer_records.GroupKey | consumer_records.MemberKey):
        return consumer_codec.encode_key(key)
    if isinstance(key, share_records.ShareKey):
        return share_codec.encode_key(key)
    if isinstance(key, OffsetCommitKey):
        return b"".join((_OFFSET_KEY_TYPE, _short_string(key.group), _short_string(key.topic),
                         _I32.pack(key.partition)))
    assert isinstance(key, GroupMetadataKey), "a transaction marker is not a keyed record"
    w = _Writer()
    w.int16(2)
    w.string(key.group)
    return w.done()


def encode_value(record: Record) -> bytes | None:
    value = record.value
    if value is None:
        return None
    if isinstance(value, share_records.ShareValue):
        return share_codec.encode_value(value)
    if not isinstance(value, OffsetCommitValue | GroupMetadataValue | TxnMarkerValue):
        return consumer_codec.encode_value(value)
    w = _Writer()
    if isinstance(value, OffsetCommitValue):
        if value.expire_timestamp != -1:
            w.int16(1)
            w.int64(value.offset)
            w.string(value.metadata)
            w.int64(value.commit_timestamp)
            w.int64(value.expire_timestamp)
            return w.done()
        return b"".join((_OFFSET_V3_HEAD.pack(3, value.offset, value.leader_epoch), _short_string(value.metadata),
                         _I64.pack(value.commit_timestamp)))
    assert isinstance(value, GroupMetadataValue), "a transaction marker is not a keyed record"
    w.int16(3)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.nstring(value.protocol)
    w.nstring(value.leader)
    w.int64(value.current_state_timestamp)
    w.int32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.nstring(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.done()


def decode_record(key: bytes, value: bytes | None) -> Record:
    if len(key) >= 2 and key[0] == 0 and key[1] in (0, 1):
        offset_key = _decode_offset_key(key)
        if value is None:
            return Record(offset_key, None)
        if len(value) >= 2 and value[0] == 0 and value[1] == 3:
            return Record(offset_key, _decode_offset_value_v3(value))
        return Record(offset_key, _decode_offset_value(value))
    r = _Reader(key)
    record_type = r.int16()
    if record_type in (0, 1):
        k: OffsetCommitKey | GroupMetadataKey = OffsetCommitKey(
            r.string(False), r.string(False), r.int32()
        )
    elif record_type == 2:
        k = GroupMetadataKey(r.string(False))
    elif record_type in CONSUMER_GROUP_TYPES:
        ck = consumer_codec.decode_key(key)  # its errors are RecordDecodeErrors
        return Record(ck, None if value is None else consumer_codec.decode_value(ck.record_type, value))
    elif record_type in share_records.TYPES:
        sk = share_codec.decode_key(key)
        return Record(sk, None if value is None else share_codec.decode_value(sk.record_type, value))
    else:
        raise UnknownRecordType(f"unknown coordinator record type {record_type}")
    if value is None:
        return Record(k, None)
    if isinstance(k, OffsetCommitKey):
        return Record(k, _decode_offset_value(value))
    return Record(k, _decode_group_value(value))


def _short_string_at(data: bytes, pos: int) -> tuple[str, int]:
    """A non-null int16-length string at ``pos`` and the position after it."""
    (n,) = _I16.unpack_from(data, pos)
    end = pos + 2 + n
    if n < 0:
        raise RecordDecodeError("null where a string is required")
    if end > len(data):
        raise RecordDecodeError("record truncated")
    return data[pos + 2:end].decode("utf-8"), end


def _decode_offset_key(key: bytes) -> OffsetCommitKey:
    try:
        group, pos = _short_string_at(key, 2)
        topic, pos = _short_string_at(key, pos)
        (partition,) = _I32.unpack_from(key, pos)
    except struct.error:
        raise RecordDecodeError("record truncated") from None
    return OffsetCommitKey(group, topic, partition)


def _decode_offset_value_v3(data: bytes) -> OffsetCommitValue:
    try:
        _, offset, leader_epoch = _OFFSET_V3_HEAD.unpack_from(data, 0)
        metadata, pos = _short_string_at(data, _OFFSET_V3_HEAD.size)
        (commit_ts,) = _I64.unpack_from(data, pos)
    except struct.error:
        raise RecordDecodeError("record truncated") from None
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_ts, -1)


def _decode_offset_value(data: bytes) -> OffsetCommitValue:
    r = _Reader(data)
    version = r.int16()
    if not 0 <= version <= 4:
        raise RecordDecodeError(f"unsupported offset commit value version {version}")
    flexible = version >= 4
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string(flexible)
    commit_ts = r.int64()
    expire_ts = r.int64() if version == 1 else -1
    r.skip_tags(flexible)
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_ts, expire_ts)


def _decode_group_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data)
    version = r.int16()
    if not 0 <= version <= 4:
        raise RecordDecodeError(f"unsupported group metadata value version {version}")
    fx = version >= 4
    protocol_type = r.string(fx)
    generation = r.int32()
    protocol = r.nstring(fx)
    leader = r.nstring(fx)
    state_ts = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len(fx)):
        member_id = r.string(fx)
        instance_id = r.nstring(fx) if version >= 3 else None
        client_id = r.string(fx)
        client_host = r.string(fx)
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        subscription = r.bytes_(fx)
        assignment = r.bytes_(fx)
        r.skip_tags(fx)
        members.append(
            MemberMetadata(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    r.skip_tags(fx)
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


def _item(r: Record) -> Any:
    """A record as an entry holds it: [key, value], [key, value, producer id] for an offset
    committed in a transaction, or a map for a transaction marker (Kafka's control batch)."""
    if isinstance(r.key, TxnMarkerKey):
        assert isinstance(r.value, TxnMarkerValue)
        return {"marker": r.key.producer_id, "commit": r.value.commit, "epoch": r.value.coordinator_epoch,
                "producer_epoch": r.value.producer_epoch}
    if r.producer_id >= 0:
        return [encode_key(r), encode_value(r), r.producer_id, r.producer_epoch]
    return [encode_key(r), encode_value(r)]


def encode_batch(records: Sequence[Record], unknown: Sequence[Any] = ()) -> bytes:
    """One replicated entry: the records of one or many requests, in order (then ``unknown``:
    records of types this build does not know, as ``decode_batch`` kept them)."""
    packed: bytes = msgpack.packb([*(_item(r) for r in records), *unknown], use_bin_type=True)
    return packed


def record_size(record: Record) -> int:
    """The bytes ``record`` takes in an entry."""
    return len(msgpack.packb(_item(record), use_bin_type=True))


class EntryTooLarge(ValueError):
    """One record alone is larger than a replicated entry may be."""


def _array_header(n: int) -> bytes:
    if n <= 15:
        return bytes([0x90 | n])
    if n <= 0xFFFF:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def encode_batches(records: Sequence[Record], max_bytes: int) -> list[tuple[bytes, int]]:
    """The records as entries of at most ``max_bytes`` each, in order: ``(payload, records in
    it)``. One entry, as ``encode_batch``, unless they do not fit; a record that cannot fit in
    any entry raises ``EntryTooLarge`` (the coordinator's size limits keep that from happening)."""
    whole = encode_batch(records)
    if len(whole) <= max_bytes:
        return [(whole, len(records))]
    room = max_bytes - 5  # the largest array header
    out: list[tuple[bytes, int]] = []
    items: list[bytes] = []
    size = 0
    for r in records:
        item: bytes = msgpack.packb(_item(r), use_bin_type=True)
        if len(item) > room:
            raise EntryTooLarge(f"a record of {len(item)} bytes cannot fit in an entry of {max_bytes}")
        if size + len(item) > room:
            out.append((_array_header(len(items)) + b"".join(items), len(items)))
            items, size = [], 0
        items.append(item)
        size += len(item)
    if items:
        out.append((_array_header(len(items)) + b"".join(items), len(items)))
    return out


def decode_batch(payload: bytes, unknown: list[Any] | None = None) -> list[Record]:
    """Decode an entry, skipping record types this version does not know (a later release wrote
    them); appended to ``unknown`` as they are, when given (compaction keeps them)."""
    try:
        items = msgpack.unpackb(payload, raw=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise RecordDecodeError(f"undecodable entry: {exc}") from exc
    out: list[Record] = []
    try:
        for item in items:
            if isinstance(item, dict):
                out.append(Record(TxnMarkerKey(int(item["marker"])), TxnMarkerValue(
                    bool(item["commit"]), int(item["epoch"]), int(item.get("producer_epoch", -1)))))
                continue
            key, value, *rest = item
            try:
                record = decode_record(key, value)
            except UnknownRecordType:
                if unknown is not None:
                    unknown.append(item)
                continue
            out.append(Record(record.key, record.value, int(rest[0]), int(rest[1]) if len(rest) > 1 else -1)
                       if rest else record)
    except (TypeError, ValueError, KeyError) as exc:
        raise RecordDecodeError(f"undecodable entry: {exc}") from exc
    return out
