"""DataLog: segments, index, retention, reopen, torn tails, idempotent sequences."""

from __future__ import annotations

import os

import pytest

from replication.data_log import DataLog, OffsetOutOfRangeError, SeqResult
from replication.record_batch import (
    InvalidBatchError,
    assign_offsets,
    build_batch,
    iter_batches,
    iter_records,
    split_batches,
)


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def put(log: DataLog, n: int = 1, *, ts: int = 1000, size: int = 10, pid: int = -1, epoch: int = -1,
        seq: int = -1) -> int:
    """Append one batch of ``n`` records the way the leader does; returns its base offset."""
    batch = build_batch([(b"k", b"x" * size)] * n, timestamp=ts, producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq)
    base = log.log_end_offset
    log.append(assign_offsets(batch, base, 1))
    return base


def offsets(data: bytes) -> list[int]:
    return [r.offset for r in iter_records(data)]


def test_record_batch_roundtrip_and_crc() -> None:
    batch = build_batch([(b"a", b"1"), (None, b"2"), (b"c", None)], timestamps=[5, 6, 9])
    (hdr, raw), = split_batches(batch)
    assert hdr.records_count == 3 and hdr.last_offset_delta == 2 and hdr.max_timestamp == 9
    moved = assign_offsets(raw, 42, 7)
    (hdr2, _), = split_batches(moved)  # CRC still valid
    assert hdr2.base_offset == 42 and hdr2.partition_leader_epoch == 7
    recs = list(iter_records(moved))
    assert [(r.offset, r.timestamp, r.key, r.value) for r in recs] == [
        (42, 5, b"a", b"1"), (43, 6, None, b"2"), (44, 9, b"c", None)]
    corrupt = bytearray(moved)
    corrupt[-1] ^= 0xFF
    with pytest.raises(InvalidBatchError):
        split_batches(bytes(corrupt))
    with pytest.raises(InvalidBatchError):
        split_batches(moved[:-3])


def test_append_read_and_offsets(tmp_path) -> None:
    log = DataLog(str(tmp_path / "p"))
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert put(log, 3) == 0
    assert put(log, 2) == 3
    assert log.log_end_offset == log.high_watermark == 5
    assert offsets(log.read(0, 1 << 20)) == [0, 1, 2, 3, 4]
    # reading from the middle of a batch returns the whole batch containing it
    assert offsets(log.read(1, 1 << 20)) == [0, 1, 2, 3, 4]
    assert offsets(log.read(3, 1 << 20)) == [3, 4]
    assert log.read(5, 1 << 20) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6, 100)
    with pytest.raises(ValueError):
        log.append(build_batch([(b"k", b"v")], base_offset=99))


def test_max_bytes_returns_at_least_one_batch(tmp_path) -> None:
    log = DataLog(str(tmp_path / "p"))
    for _ in range(5):
        put(log, 1, size=500)
    one = log.read(0, 10)  # smaller than a batch: still one whole batch
    assert offsets(one) == [0]
    assert log.read(0, 10, min_one=False) == b""
    two = log.read(0, len(one) * 2 + 1)
    assert offsets(two) == [0, 1]
    assert offsets(log.read(0, 1 << 20, upper=3)) == [0, 1, 2]


def test_segment_roll_index_and_fetch_across_segments(tmp_path) -> None:
    log = DataLog(str(tmp_path / "p"), segment_bytes=2048, index_interval_bytes=256)
    for i in range(60):
        put(log, 2, ts=1000 + i, size=50)
    assert log.segment_count > 5
    files = sorted(os.listdir(tmp_path / "p"))
    assert "00000000000000000000.log" in files and any(f.endswith(".index") for f in files)
    assert all(os.path.getsize(tmp_path / "p" / f) <= 2048 for f in files if f.endswith(".log"))
    everything = offsets(log.read(0, 1 << 30))
    assert everything == list(range(120))
    # a fetch in the middle of a later segment starts at the right batch
    assert offsets(log.read(77, 300))[0] == 76
    # across a segment boundary
    got = offsets(log.read(30, 2000))
    assert got[0] == 30 and got == list(range(30, 30 + len(got))) and len(got) > 4
    # by timestamp: first record with ts >= 1030 is in the 31st batch (offset 60)
    assert log.offset_for_timestamp(1030) == (1030, 60)
    assert log.offset_for_timestamp(99999) is None
    assert log.max_timestamp() == (1059, 118)


def test_reopen_after_restart(tmp_path) -> None:
    d = str(tmp_path / "p")
    log = DataLog(d, segment_bytes=1024, index_interval_bytes=128)
    for _ in range(40):
        put(log, 3, size=20)
    before = log.read(0, 1 << 30)
    log.close()
    log2 = DataLog(d, segment_bytes=1024, index_interval_bytes=128)
    assert log2.log_end_offset == 120 and log2.log_start_offset == 0
    assert log2.read(0, 1 << 30) == before
    assert put(log2, 1) == 120
    assert offsets(log2.read(119, 1 << 20)) == [117, 118, 119, 120]


def test_torn_tail_is_truncated(tmp_path) -> None:
    d = tmp_path / "p"
    log = DataLog(str(d))
    for _ in range(10):
        put(log, 1)
    good_size = os.path.getsize(d / "00000000000000000000.log")
    log.close()
    # a crash mid-write leaves half a batch behind
    half = assign_offsets(build_batch([(b"k", b"y" * 100)]), 10, 1)[:50]
    with open(d / "00000000000000000000.log", "ab") as fh:
        fh.write(half)
    log2 = DataLog(str(d))
    assert log2.log_end_offset == 10
    assert os.path.getsize(d / "00000000000000000000.log") == good_size
    assert put(log2, 1) == 10
    assert offsets(log2.read(0, 1 << 20)) == list(range(11))
    log2.close()
    # a full-length batch with a bad CRC at the tail is also dropped
    bad = bytearray(assign_offsets(build_batch([(b"k", b"z")]), 11, 1))
    bad[-1] ^= 0x55
    with open(d / "00000000000000000000.log", "ab") as fh:
        fh.write(bytes(bad))
    assert DataLog(str(d)).log_end_offset == 11


def test_retention_by_bytes(tmp_path) -> None:
    log = DataLog(str(tmp_path / "p"), segment_bytes=1024, retention_bytes=3000, retention_ms=-1)
    for _ in range(50):
        put(log, 1, size=100)
    total_before = log.size_bytes
    assert total_before > 3000
    deleted = log.enforce_retention()
    assert deleted > 0
    assert log.size_bytes <= 3000 + 1024 and log.size_bytes < total_before
    assert log.log_start_offset > 0 and log.log_end_offset == 50
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert offsets(log.read(log.log_start_offset, 1 << 20))[0] == log.log_start_offset
    assert len(os.listdir(tmp_path / "p")) == 2 * log.segment_count + 2  # + producer.snapshot, leader-epochs-are-terms


def test_retention_by_time_with_injected_clock(tmp_path) -> None:
    clock = Clock(4_000)
    log = DataLog(str(tmp_path / "p"), segment_bytes=1024, retention_ms=5_000, clock=clock)
    for i in range(30):
        put(log, 1, ts=1_000 + i * 100, size=100)  # timestamps 1000..3900
    assert log.enforce_retention() == 0 and log.log_start_offset == 0  # nothing older than 5 s yet
    clock.now = 8_000
    log2 = DataLog(str(tmp_path / "q"), segment_bytes=1024, retention_ms=5_000, clock=clock)
    for i in range(30):
        put(log2, 1, ts=1_000 + i * 100, size=100)
    n_before = log2.segment_count
    assert log2.enforce_retention() > 0  # segments whose newest record is older than 3000 go
    assert log2.segment_count < n_before
    start = log2.log_start_offset
    assert 0 < start < 30
    first_kept = next(iter(iter_records(log2.read(start, 1 << 20))))
    assert first_kept.timestamp <= 3_000 + 100 * 10
    clock.now = 100_000  # everything expired: even the active segment is rolled and deleted
    log2.enforce_retention()
    assert log2.log_start_offset == log2.log_end_offset == 30
    assert put(log2, 1) == 30


def test_idempotent_sequences(tmp_path) -> None:
    d = str(tmp_path / "p")
    log = DataLog(d)
    pid, ep = 7, 0
    seq = 0
    bases = []
    for _ in range(6):
        assert log.check_sequence(pid, ep, seq, seq + 1).result is SeqResult.OK
        bases.append(put(log, 2, pid=pid, epoch=ep, seq=seq))
        seq += 2
    # exact resend of one of the last 5 batches → duplicate with its original offset
    chk = log.check_sequence(pid, ep, 8, 9)
    assert chk.result is SeqResult.DUPLICATE and chk.base_offset == bases[4]
    # the oldest (6th from last) batch is out of the window → duplicate sequence error
    assert log.check_sequence(pid, ep, 0, 1).result is SeqResult.DUPLICATE_SEQUENCE
    # a gap → out of order
    assert log.check_sequence(pid, ep, 14, 15).result is SeqResult.OUT_OF_ORDER
    # the next in sequence is fine
    assert log.check_sequence(pid, ep, 12, 13).result is SeqResult.OK
    # an older epoch is fenced; a new epoch must start at 0
    assert log.check_sequence(pid, ep - 1, 12, 13).result is SeqResult.FENCED
    assert log.check_sequence(pid, ep + 1, 5, 5).result is SeqResult.OUT_OF_ORDER
    assert log.check_sequence(pid, ep + 1, 0, 0).result is SeqResult.OK
    # other producers are independent
    assert log.check_sequence(8, 0, 3, 3).result is SeqResult.OK
    # state survives a clean restart and a crash (replayed from the log)
    log.close()
    log2 = DataLog(d)
    chk = log2.check_sequence(pid, ep, 10, 11)
    assert chk.result is SeqResult.DUPLICATE and chk.base_offset == bases[5]
    os.remove(os.path.join(d, "producer.snapshot"))
    log3 = DataLog(d)
    assert log3.check_sequence(pid, ep, 14, 15).result is SeqResult.OUT_OF_ORDER
    assert log3.check_sequence(pid, ep, 12, 13).result is SeqResult.OK


def test_iter_batches_positions() -> None:
    a = assign_offsets(build_batch([(b"k", b"v")]), 0, 1)
    b = assign_offsets(build_batch([(b"k", b"v"), (b"k", b"w")]), 1, 1)
    got = [(pos, h.base_offset, h.records_count) for pos, h in iter_batches(a + b)]
    assert got == [(0, 0, 1), (len(a), 1, 2)]


def test_idle_producers_expire_and_their_next_batch_is_a_new_producers(tmp_path) -> None:
    """producer.id.expiration.ms: a producer whose last batch is older than the expiry is
    forgotten (its memory freed); one that wrote within it is kept."""
    clock = Clock(now=10_000)
    log = DataLog(str(tmp_path), clock=clock)
    put(log, 2, ts=10_000, pid=7, epoch=0, seq=0)
    put(log, 2, ts=15_000, pid=8, epoch=0, seq=0)
    assert log.check_sequence(7, 0, 5, 5).result is SeqResult.OUT_OF_ORDER  # a gap: known producer
    clock.now = 10_000 + 9_999
    assert log.expire_producers(10_000) == 0
    clock.now = 10_000 + 10_000
    assert log.expire_producers(10_000) == 1  # 7 went idle at 10 s; 8 wrote at 15 s
    assert log.check_sequence(7, 0, 5, 5).result is SeqResult.OK
    assert log.check_sequence(8, 0, 5, 5).result is SeqResult.OUT_OF_ORDER
    log.close()
    reopened = DataLog(str(tmp_path), clock=clock)  # the expiry is in the producer snapshot too
    assert set(reopened.producer_state.producers) == {8}
    reopened.close()


def _sixty_batches(tmp_path):
    """A log of 60 small batches, never closed (as a node that lost power left it), and its bytes."""
    d = tmp_path / "p"
    log = DataLog(str(d), index_interval_bytes=128)
    for _ in range(60):
        put(log, 2, size=20)
    return d, log.read(0, 1 << 30)


def test_after_a_power_loss_no_batch_under_the_index_is_trusted_unchecked(tmp_path) -> None:
    """Without a clean close, a segment's pages may not have reached the disk while its index's
    did: here the log keeps its length but its last 2 KiB are zeros, under index entries. Every
    batch is checked on open: the log ends at the last whole batch and serves no zeros."""
    d, good = _sixty_batches(tmp_path)
    path = d / "00000000000000000000.log"
    size = os.path.getsize(path)
    # the node loses power: no close, and the log's last 2 KiB never reached the disk
    with open(path, "r+b") as fh:
        fh.seek(size - 2048)
        fh.write(b"\0" * 2048)
    log2 = DataLog(str(d), index_interval_bytes=128)
    kept = log2.read(0, 1 << 30)
    assert 0 < len(kept) <= size - 2048 and good.startswith(kept)  # a prefix of what was written, no zeros
    assert offsets(kept) == list(range(log2.log_end_offset))
    assert put(log2, 1) == log2.log_end_offset - 1  # appends continue from the last whole batch
    end = log2.log_end_offset
    log2.close()
    # after a clean close the index is trusted again, and the log reads the same
    log3 = DataLog(str(d), index_interval_bytes=128)
    assert log3.log_end_offset == end and offsets(log3.read(0, 1 << 30)) == list(range(end))


def test_after_a_power_loss_a_hole_ends_the_log_even_with_valid_batches_after_it(tmp_path) -> None:
    """Unsynced pages reach the disk in any order: a page in the middle may be zeros while later
    ones hold whole batches. After an unclean stop the log ends at the hole (as Kafka recovers a
    segment), instead of refusing to start as it does for a clean log damaged in the middle."""
    d, good = _sixty_batches(tmp_path)
    path = d / "00000000000000000000.log"
    middle = [pos for pos, _hdr in iter_batches(good)][30]
    with open(path, "r+b") as fh:  # zeros in the 31st batch's records; whole batches after it
        fh.seek(middle + 64)
        fh.write(b"\0" * 8)
    log2 = DataLog(str(d), index_interval_bytes=128)
    kept = log2.read(0, 1 << 30)
    assert kept == good[:middle]
    assert put(log2, 1) == log2.log_end_offset - 1


@pytest.mark.parametrize("codec", [0, 1, 4])
def test_max_timestamp_names_the_record_that_has_it(tmp_path, codec: int) -> None:
    """ListOffsets MAX_TIMESTAMP as Kafka 4.4 answers it: the offset of the (first) record with the
    largest timestamp, not its batch's start, in a compressed batch too; a LogAppendTime batch's
    records all have its time: its last offset."""
    from replication.record_batch import ATTR_TIMESTAMP_TYPE
    from tests.unit.test_cleanup_policy import _compressed

    log = DataLog(str(tmp_path / "p"))
    assert log.max_timestamp() is None
    put(log, 3, ts=500)
    batch = build_batch([(b"k", b"v")] * 4, timestamps=[1000, 1004, 1002, 1004])
    log.append(assign_offsets(_compressed(batch, codec) if codec else batch, log.log_end_offset, 1))
    assert log.max_timestamp() == (1004, 4)
    put(log, 2, ts=900)  # later, but not larger
    assert log.max_timestamp() == (1004, 4)
    appended = build_batch([(b"k", b"v")] * 3, timestamp=2000, attributes=ATTR_TIMESTAMP_TYPE)
    log.append(assign_offsets(appended, log.log_end_offset, 1))
    assert log.max_timestamp() == (2000, 11)
