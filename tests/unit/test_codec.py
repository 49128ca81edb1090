"""Byte format of ``__consumer_offsets`` records, checked against Kafka's layouts (reference §3.1, §3.2)."""

from __future__ import annotations

import msgpack
import pytest

from coordinator.codec import (
    RecordDecodeError,
    UnknownRecordType,
    decode_batch,
    decode_record,
    encode_batch,
    encode_key,
    encode_value,
)
from coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    empty_group_record,
)


def i16(v: int) -> bytes:
    return v.to_bytes(2, "big", signed=True)


def i32(v: int) -> bytes:
    return v.to_bytes(4, "big", signed=True)


def i64(v: int) -> bytes:
    return v.to_bytes(8, "big", signed=True)


def s(v: str) -> bytes:
    b = v.encode()
    return i16(len(b)) + b


def cs(v: str | None) -> bytes:
    """A compact (flexible) string: unsigned varint length+1 (all test strings are < 127 bytes)."""
    if v is None:
        return b"\x00"
    b = v.encode()
    return bytes([len(b) + 1]) + b


OFFSET_KEY = Record(OffsetCommitKey("g", "t", 2), None)


def test_offset_commit_key_bytes() -> None:
    """GroupCoordinatorRecordSerdeTest: OffsetCommitKey is record type 1"""
    assert encode_key(OFFSET_KEY) == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x02"


def test_group_metadata_key_bytes() -> None:
    """GroupCoordinatorRecordSerdeTest: GroupMetadataKey is record type 2"""
    assert encode_key(Record(GroupMetadataKey("my-group"), None)) == b"\x00\x02\x00\x08my-group"


def test_offset_commit_value_v3_bytes() -> None:
    """testNewOffsetCommitRecord: value v3 without an expire timestamp"""
    rec = Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(100, 5, "meta", 1_000))
    assert encode_value(rec) == i16(3) + i64(100) + i32(5) + s("meta") + i64(1_000)
    assert encode_value(rec).hex() == "0003" "0000000000000064" "00000005" "00046d657461" "00000000000003e8"


def test_offset_commit_value_v1_bytes_with_expire_timestamp() -> None:
    """testNewOffsetCommitRecordWithExpireTimestamp: value v1 (no leader epoch)"""
    rec = Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(100, 7, "", 1_000, 2_000))
    assert encode_value(rec) == i16(1) + i64(100) + s("") + i64(1_000) + i64(2_000)
    assert decode_record(encode_key(rec), encode_value(rec)).value == OffsetCommitValue(100, -1, "", 1_000, 2_000)


def test_offset_commit_value_utf8_metadata_length_is_bytes() -> None:
    """testNewOffsetCommitRecord: string length prefix counts UTF-8 bytes"""
    rec = Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, -1, "é", 0))
    assert encode_value(rec) == i16(3) + i64(1) + i32(-1) + b"\x00\x02\xc3\xa9" + i64(0)


MEMBER = MemberMetadata("m", None, "c", "/h", 300, 100, b"\x01", b"\x02")
GROUP = GroupMetadataValue("consumer", 1, "range", "m", 5, (MEMBER,))


def test_group_metadata_value_v3_bytes() -> None:
    """testNewGroupMetadataRecord: value v3"""
    rec = Record(GroupMetadataKey("g"), GROUP)
    expected = (i16(3) + s("consumer") + i32(1) + s("range") + s("m") + i64(5) + i32(1)
                + s("m") + i16(-1) + s("c") + s("/h") + i32(300) + i32(100)
                + i32(1) + b"\x01" + i32(1) + b"\x02")
    assert encode_value(rec) == expected


def test_group_metadata_value_v3_static_member_bytes() -> None:
    """testNewGroupMetadataRecord: groupInstanceId is a nullable string (v3+)"""
    member = MemberMetadata("m", "inst", "c", "/h", 300, 100, b"", b"")
    rec = Record(GroupMetadataKey("g"), GroupMetadataValue("consumer", 1, "range", "m", 5, (member,)))
    member_bytes = s("m") + s("inst") + s("c") + s("/h") + i32(300) + i32(100) + i32(0) + i32(0)
    assert encode_value(rec).endswith(i32(1) + member_bytes)
    assert decode_record(encode_key(rec), encode_value(rec)).value == rec.value


def test_empty_group_metadata_value_bytes() -> None:
    """testNewEmptyGroupMetadataRecord"""
    assert encode_value(empty_group_record("g")) == i16(3) + s("") + i32(0) + i16(-1) + i16(-1) + i64(-1) + i32(0)


def test_tombstones() -> None:
    """testNewGroupMetadataTombstoneRecord / testNewOffsetCommitTombstoneRecord"""
    for rec in (Record(GroupMetadataKey("g"), None), OFFSET_KEY):
        assert encode_value(rec) is None
        decoded = decode_record(encode_key(rec), None)
        assert decoded == rec and decoded.is_tombstone


def test_read_offset_commit_key_type_0() -> None:
    """GroupCoordinatorRecordSerdeTest: key type 0 is also an OffsetCommitKey"""
    key = i16(0) + s("g") + s("t") + i32(9)
    value = i16(3) + i64(1) + i32(-1) + s("") + i64(0)
    assert decode_record(key, value) == Record(OffsetCommitKey("g", "t", 9), OffsetCommitValue(1, -1, "", 0))


@pytest.mark.parametrize("version", [0, 2])
def test_read_offset_commit_value_v0_v2(version: int) -> None:
    """testDeserializeOffsetCommitValue (v0/v2: offset, metadata, commitTimestamp)"""
    value = i16(version) + i64(42) + s("md") + i64(123)
    assert decode_record(encode_key(OFFSET_KEY), value).value == OffsetCommitValue(42, -1, "md", 123, -1)


def test_read_offset_commit_value_v4_flexible() -> None:
    """testDeserializeOffsetCommitValue (v4 flexible: compact string, tagged fields)"""
    value = i16(4) + i64(42) + i32(3) + cs("md") + i64(123) + b"\x00"
    assert decode_record(encode_key(OFFSET_KEY), value).value == OffsetCommitValue(42, 3, "md", 123, -1)
    # An unknown tagged field (tag 5, two bytes) is skipped.
    tagged = i16(4) + i64(42) + i32(3) + cs("md") + i64(123) + b"\x01\x05\x02\xab\xcd"
    assert decode_record(encode_key(OFFSET_KEY), tagged).value == OffsetCommitValue(42, 3, "md", 123, -1)


def _v0_member() -> bytes:
    return s("m") + s("c") + s("/h") + i32(100) + i32(1) + b"\x01" + i32(1) + b"\x02"


def test_read_group_metadata_value_v0() -> None:
    """testDeserializeGroupMetadataValue (v0: no rebalance timeout, timestamp or instance id)"""
    value = i16(0) + s("consumer") + i32(1) + s("range") + s("m") + i32(1) + _v0_member()
    got = decode_record(i16(2) + s("g"), value).value
    assert got == GroupMetadataValue("consumer", 1, "range", "m", -1,
                                     (MemberMetadata("m", None, "c", "/h", -1, 100, b"\x01", b"\x02"),))


def test_read_group_metadata_value_v1_v2() -> None:
    """testDeserializeGroupMetadataValue (v1 adds rebalanceTimeout, v2 currentStateTimestamp)"""
    member_v1 = s("m") + s("c") + s("/h") + i32(300) + i32(100) + i32(1) + b"\x01" + i32(1) + b"\x02"
    v1 = i16(1) + s("consumer") + i32(1) + s("range") + s("m") + i32(1) + member_v1
    v2 = i16(2) + s("consumer") + i32(1) + s("range") + s("m") + i64(5) + i32(1) + member_v1
    assert decode_record(i16(2) + s("g"), v1).value == GroupMetadataValue("consumer", 1, "range", "m", -1, (MEMBER,))
    assert decode_record(i16(2) + s("g"), v2).value == GROUP


def test_read_group_metadata_value_v4_flexible() -> None:
    """testDeserializeGroupMetadataValue (v4 flexible: compact fields, member and top-level tags)"""
    member = (cs("m") + cs(None) + cs("c") + cs("/h") + i32(300) + i32(100)
              + b"\x02\x01" + b"\x02\x02" + b"\x00")
    value = (i16(4) + cs("consumer") + i32(1) + cs("range") + cs("m") + i64(5)
             + b"\x02" + member + b"\x01\x00\x01\xff")
    assert decode_record(i16(2) + s("g"), value).value == GROUP
    null_protocol = i16(4) + cs("") + i32(0) + cs(None) + cs(None) + i64(-1) + b"\x01" + b"\x00"
    assert decode_record(i16(2) + s("g"), null_protocol).value == GroupMetadataValue("", 0, None, None, -1, ())


def test_round_trip_written_records() -> None:
    """GroupCoordinatorRecordSerdeTest: serialize then deserialize gives the same record"""
    records = [
        Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, 2, "x", 3)),
        Record(OffsetCommitKey("g", "t", 1), OffsetCommitValue(1, -1, "x", 3, 4)),
        Record(GroupMetadataKey("g"), GROUP),
        empty_group_record("g2"),
        Record(GroupMetadataKey("g"), None),
    ]
    for r in records:
        assert decode_record(encode_key(r), encode_value(r)) == r
    assert decode_batch(encode_batch(records)) == records


def test_unknown_record_type() -> None:
    """testDeserializeWithInvalidRecordType / loader skips unknown record types"""
    with pytest.raises(UnknownRecordType):  # 3 and 5-8: consumer groups (KIP-848), 10-15: share groups (KIP-932)
        decode_record(i16(99) + s("g"), i16(0) + i32(1))
    known = Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, -1, "", 0))
    payload = msgpack.packb([[i16(99) + s("g"), i16(0) + i32(1)], [encode_key(known), encode_value(known)],
                             [i16(250) + s("g"), None]], use_bin_type=True)
    assert decode_batch(payload) == [known]


def test_unsupported_value_version_and_truncation_fail() -> None:
    """testReplayWithUnsupportedVersion / testDeserializeWithInvalidValueBytes"""
    with pytest.raises(RecordDecodeError):
        decode_record(encode_key(OFFSET_KEY), i16(5) + i64(1) + s("") + i64(0))
    with pytest.raises(RecordDecodeError):
        decode_record(i16(2) + s("g"), i16(5) + s(""))
    with pytest.raises(RecordDecodeError):
        decode_record(encode_key(OFFSET_KEY), i16(3) + i64(1))
    with pytest.raises(RecordDecodeError):
        decode_record(i16(1) + s("g"), None)
    with pytest.raises(RecordDecodeError):
        decode_batch(b"\xc1")
    # A truncated entry is an error, not a silently skipped record.
    truncated = msgpack.packb([[encode_key(OFFSET_KEY), i16(3) + i64(1)]], use_bin_type=True)
    with pytest.raises(RecordDecodeError):
        decode_batch(truncated)


def test_every_cut_of_an_offset_commit_record_fails_cleanly() -> None:
    """Offset commits are read with precompiled structs: any truncation, or a null string where
    Kafka requires one, is still a RecordDecodeError (never a struct or index error)."""
    rec = Record(OffsetCommitKey("grüppe", "topic-ß", 7), OffsetCommitValue(42, 5, "méta", 1700, -1))
    key, value = encode_key(rec), encode_value(rec)
    assert value is not None and decode_record(key, value) == rec
    for cut in range(len(key)):
        with pytest.raises(RecordDecodeError):
            decode_record(key[:cut], value)
    for cut in range(2, len(value)):
        with pytest.raises(RecordDecodeError):
            decode_record(key, value[:cut])
    with pytest.raises(RecordDecodeError):
        decode_record(i16(1) + i16(-1) + s("t") + i32(0), value)  # null group
    with pytest.raises(RecordDecodeError):
        decode_record(key, i16(3) + i64(1) + i32(0) + i16(-1) + i64(0))  # null metadata
