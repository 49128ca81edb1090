"""Producer batches are checked as Kafka's LogValidator checks them, before they get offsets."""

from __future__ import annotations

import asyncio
import gzip
import struct
import tracemalloc
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from replication.batch_validator import (
    BATCH_INFLATE_CAP,
    InflateBudget,
    validate_batch,
    validate_batch_async,
)
from replication.record_batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    BatchHeader,
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


def _gzip_batch(compressed: bytes, count: int = 1) -> tuple[BatchHeader, bytes]:
    """A batch of ``count`` records whose records section is ``compressed`` (gzip)."""
    plain = build_batch([(None, b"x")] * count)
    ((hdr, raw),) = split_batches(_set(plain[:HEADER_SIZE] + compressed, ">h", ATTRIBUTES_OFFSET, 1))
    return hdr, raw


def _zeros_gzipped(size: int) -> bytes:
    """``size`` zero bytes as gzip, compressed a MiB at a time (never all in memory)."""
    deflater = zlib.compressobj(1, zlib.DEFLATED, 31)
    mib = bytes(1 << 20)
    return b"".join([deflater.compress(mib) for _ in range(size >> 20)] + [deflater.flush()])


def test_a_gzip_bomb_stops_inflating_at_the_absolute_cap_whatever_the_topic_allows() -> None:
    """128 MiB of zeros (0.6 MiB gzipped) under a topic whose max.message.bytes is 2^31 - 1: its
    16-fold bound (32 GiB) used to be the only one, and the whole bomb was inflated at once."""
    hdr, raw = _gzip_batch(_zeros_gzipped(128 << 20))
    tracemalloc.start()
    try:
        verdict = validate_batch(hdr, raw, 2**31 - 1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    kind, message = verdict or ("", "")
    assert kind == "invalid" and f"more than {BATCH_INFLATE_CAP} bytes" in message
    assert peak < BATCH_INFLATE_CAP + (16 << 20), f"{peak >> 20} MiB held while inflating"


def test_the_gzip_batches_of_one_produce_request_share_a_bound() -> None:
    records = build_batch([(None, b"v" * 1000)] * 600)[HEADER_SIZE:]  # ~0.6 MB inflated
    hdr, raw = _gzip_batch(gzip.compress(records), 600)
    budget = InflateBudget(1 << 20)
    assert validate_batch(hdr, raw, MAX, budget) is None
    kind, message = validate_batch(hdr, raw, MAX, budget) or ("", "")
    assert kind == "invalid" and "of this produce request" in message
    assert budget.left < 0  # the second stopped one step past what was left
    assert validate_batch(hdr, raw, MAX) is None  # without a request's budget: only the batch's own bounds


def test_a_small_batch_is_validated_on_the_loop_without_a_pause() -> None:
    ((hdr, raw),) = split_batches(build_batch([(b"k", b"v")] * 10))
    coro = validate_batch_async(hdr, raw, MAX)
    try:
        coro.send(None)
    except StopIteration as done:
        assert done.value is None
    else:
        coro.close()
        raise AssertionError("a small batch waited for the worker thread")


def test_a_large_validation_leaves_the_event_loop_free() -> None:
    """~0.9 MB of one-byte records takes ~0.3 s to read in Python: meanwhile the loop (which
    also drives Raft) keeps running its callbacks."""
    ((hdr, raw),) = split_batches(build_batch([(None, None)] * 100_000))

    async def main() -> None:
        task = asyncio.ensure_future(validate_batch_async(hdr, raw, MAX))
        ran_during: list[bool] = []
        asyncio.get_running_loop().call_soon(lambda: ran_during.append(not task.done()))
        assert await task is None
        assert ran_during == [True]

    asyncio.run(main())
