"""Producer batches are checked as Kafka's LogValidator checks them, before they get offsets."""

from __future__ import annotations

import gzip
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from replication.batch_validator import validate_batch
from replication.record_batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    InvalidBatchError,
    build_batch,
    crc32c,
    parse_header,
    split_batches,
)

MAX = 1048588


def _fix(buf: bytearray) -> bytes:
    """Recompute batchLength and the CRC, as a hostile client that knows the format would."""
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


def _set(batch: bytes, fmt: str, offset: int, value: int) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(fmt, buf, offset, value)
    return _fix(buf)


LAST_OFFSET_DELTA, BASE_SEQUENCE, RECORDS_COUNT, BASE_OFFSET = 23, 53, 57, 0


def check(batch: bytes) -> tuple[str, str] | None:
    ((hdr, raw),) = split_batches(batch)  # magic, length and CRC hold for every batch here
    return validate_batch(hdr, raw, MAX)


def test_a_valid_batch_passes() -> None:
    assert check(build_batch([(b"k", b"v"), (None, b"x" * 300), (b"k2", None)])) is None
    assert check(build_batch([(None, b"v")], producer_id=7, producer_epoch=0, base_sequence=0)) is None


def test_negative_last_offset_delta_with_a_correct_crc_is_refused() -> None:
    """The hostile header of issue 12: it used to move the partition's log end backwards."""
    hostile = _set(build_batch([(None, b"a"), (None, b"b")]), ">i", LAST_OFFSET_DELTA, -3)
    split_batches(hostile)  # the CRC is right
    kind, message = check(hostile) or ("", "")
    assert kind == "invalid" and "lastOffsetDelta -3" in message


def test_offset_range_and_count_must_agree() -> None:
    two = build_batch([(None, b"a"), (None, b"b")])
    assert (check(_set(two, ">i", LAST_OFFSET_DELTA, 5)) or ("",))[0] == "invalid"
    assert (check(_set(two, ">i", RECORDS_COUNT, 0)) or ("",))[0] == "invalid"
    assert (check(_set(two, ">i", RECORDS_COUNT, 3)) or ("",))[0] == "invalid"  # delta 1 != 3 - 1
    assert (check(_set(two, ">q", BASE_OFFSET, 10)) or ("",))[0] == "invalid"


def test_records_must_be_what_the_header_says() -> None:
    two = bytearray(build_batch([(None, b"a"), (None, b"b")]))
    # the second record's offset delta (its 4th byte: length, attributes, ts delta, offset delta) 1 -> 3
    second = HEADER_SIZE + 1 + two[HEADER_SIZE] // 2
    assert two[second + 3] == 2  # zigzag(1)
    two[second + 3] = 6
    kind, message = check(_fix(two)) or ("", "")
    assert kind == "invalid" and "offset delta" in message
    longer = _set(build_batch([(None, b"a")]) + b"\x00\x00", ">i", LAST_OFFSET_DELTA, 0)
    assert (check(longer) or ("",))[0] == "corrupt"  # bytes after the records
    cut = bytearray(build_batch([(None, b"abcdef")]))[:-3]
    assert (check(_fix(cut)) or ("",))[0] == "corrupt"


def test_codec_producer_fields_and_size() -> None:
    one = build_batch([(None, b"a")])
    assert (check(_set(one, ">h", ATTRIBUTES_OFFSET, 7)) or ("",))[0] == "invalid"
    assert check(_set(one, ">i", BASE_SEQUENCE, 0)) is None  # without a producer id the sequence is ignored
    idempotent = build_batch([(None, b"a")], producer_id=7, producer_epoch=0, base_sequence=0)
    assert (check(_set(idempotent, ">i", BASE_SEQUENCE, -1)) or ("",))[0] == "invalid"
    big = build_batch([(None, b"x" * 2000)])
    ((hdr, raw),) = split_batches(big)
    assert (validate_batch(hdr, raw, 1000) or ("",))[0] == "too_large"


def test_gzip_records_are_looked_into() -> None:
    plain = build_batch([(None, b"a"), (None, b"b")])
    records = plain[HEADER_SIZE:]
    good = _set(plain[:HEADER_SIZE] + gzip.compress(records), ">h", ATTRIBUTES_OFFSET, 1)
    assert check(good) is None
    bad = _set(plain[:HEADER_SIZE] + b"not gzip at all", ">h", ATTRIBUTES_OFFSET, 1)
    assert (check(bad) or ("",))[0] == "corrupt"
    lying = _set(plain[:HEADER_SIZE] + gzip.compress(records[:-2]), ">h", ATTRIBUTES_OFFSET, 1)
    assert (check(lying) or ("",))[0] == "corrupt"


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=64), st.integers(min_value=12, max_value=120), st.integers(0, 3))
def test_any_mutation_is_answered_never_raised(junk: bytes, at: int, records: int) -> None:
    """Whatever bytes follow a correct CRC, validation returns a verdict (it never raises),
    and a batch it accepts has records_count records at consecutive offsets."""
    batch = bytearray(build_batch([(b"k", b"v" * i) for i in range(records + 1)]))
    batch[at:at + len(junk)] = junk
    try:
        raw = _fix(batch)
        ((hdr, raw_batch),) = split_batches(raw)
    except (InvalidBatchError, struct.error, ValueError):
        return
    verdict = validate_batch(hdr, raw_batch, MAX)
    if verdict is None:
        header = parse_header(raw_batch)
        assert header.last_offset_delta == header.records_count - 1 >= 0
