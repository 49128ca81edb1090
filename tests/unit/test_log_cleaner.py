"""Log compaction of a partition's batches (``replication/log_cleaner.py``): Kafka's
``LogCleanerTest`` cases, ported under their names to the cleaner's batches-in, batches-out form,
and a property test over random produces, tombstones, transactions and passes."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replication.codecs import inflate
from replication.log_cleaner import ATTR_DELETE_HORIZON, CleanStats, build_key_map, clean
from replication.record_batch import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    HEADER_SIZE,
    build_batch,
    crc32c,
    decode_body,
    iter_batches,
    parse_header,
)
from replication.txn_index import PartitionTxns, marker_record, read_marker

DAY = 86_400_000


@dataclass
class Log:
    """A partition's batches as the data log appends them, and what it tracks of them."""

    batches: list[bytes] = field(default_factory=list)
    txns: PartitionTxns = field(default_factory=PartitionTxns)
    last: dict[int, int] = field(default_factory=dict)  # producer id -> its last data batch's last offset
    seq: dict[int, int] = field(default_factory=dict)

    next_offset: int = 0  # where the next batch goes (a pass may remove the last batch: the log's end stays)

    @property
    def end(self) -> int:
        return self.next_offset

    def _add(self, batch: bytes) -> None:
        hdr = parse_header(batch)
        self.batches.append(batch)
        self.next_offset = hdr.next_offset
        self.txns.update(hdr, read_marker(batch)[0] if hdr.is_control else None)  # type: ignore[index]
        if hdr.producer_id >= 0 and not hdr.is_control:
            self.last[hdr.producer_id] = hdr.last_offset

    def put(self, *records: tuple[bytes | None, bytes | None], pid: int = -1, txn: bool = False, ts: int = 0) -> None:
        seq = self.seq.get(pid, 0) if pid >= 0 else -1
        if pid >= 0:
            self.seq[pid] = seq + len(records)
        self._add(build_batch(list(records), base_offset=self.end, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                              base_sequence=seq, timestamp=ts, attributes=ATTR_TRANSACTIONAL if txn else 0))

    def marker(self, pid: int, commit: bool, ts: int = 0) -> None:
        self._add(build_batch([marker_record(commit, 0)], base_offset=self.end, producer_id=pid, producer_epoch=0,
                              timestamp=ts, attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL))

    def clean(self, now: int, retention: int = DAY, capacity: int = 1 << 20) -> CleanStats:
        stats = CleanStats()
        key_map = build_key_map(self.batches, capacity=capacity, aborted=self.txns.aborted)
        self.batches = clean(self.batches, key_map, now_ms=now, delete_retention_ms=retention,
                             aborted=self.txns.aborted, producers_last=self.last, stats=stats)
        return stats

    def records(self) -> list[tuple[int, bytes | None, bytes | None]]:
        """(offset, key, value) of every data record left, in order."""
        out = []
        for b in self.batches:
            hdr = parse_header(b)
            if not hdr.is_control:
                raw = inflate(hdr.compression, b[HEADER_SIZE:], 1 << 24)
                assert raw is not None
                out += [(r.offset, r.key, r.value) for r in decode_body(hdr, raw)]
        return out

    def offsets(self) -> list[int]:
        return [o for o, _, _ in self.records()]

    def markers(self) -> list[int]:
        return [parse_header(b).base_offset for b in self.batches if parse_header(b).is_control]


def _valid(batches: list[bytes]) -> None:
    for b in batches:
        assert list(iter_batches(b))  # length and CRC
        hdr = parse_header(b)
        assert crc32c(b[21:]) == hdr.crc


def test_clean_segments() -> None:
    log = Log()
    for i in range(30):
        log.put((b"%d" % (i % 6), b"v%d" % i))
    log.clean(now=0)
    _valid(log.batches)
    assert log.records() == [(24 + k, b"%d" % k, b"v%d" % (24 + k)) for k in range(6)]  # offsets unchanged


def test_cleaning_with_deletes() -> None:
    """A tombstone hides its key's earlier values; it stays a delete.retention.ms after the
    first pass stamped it (two passes), then goes."""
    log = Log()
    for i in range(10):
        log.put((b"k%d" % (i % 3), b"v%d" % i))
    log.put((b"k1", None))
    log.clean(now=1000, retention=DAY)
    assert (10, b"k1", None) in log.records() and all(k != b"k1" or v is None for _, k, v in log.records())
    stamped = [parse_header(b) for b in log.batches if parse_header(b).base_offset == 10][0]
    assert stamped.attributes & ATTR_DELETE_HORIZON and stamped.base_timestamp == 1000 + DAY
    log.clean(now=1000 + DAY - 1)
    assert (10, b"k1", None) in log.records()  # not yet
    log.clean(now=1000 + DAY)
    assert [k for _, k, _ in log.records()] == [b"k2", b"k0"]


def test_clean_tombstone() -> None:
    """A tombstone whose key has a later value is gone at the first pass."""
    log = Log()
    log.put((b"a", b"1"))
    log.put((b"a", None))
    log.put((b"a", b"2"))
    log.clean(now=0)
    assert log.records() == [(2, b"a", b"2")]


def test_cleaning_with_unkeyed_messages() -> None:
    log = Log()
    log.put((None, b"x"), (b"a", b"1"), (None, b"y"))
    log.put((b"a", b"2"))
    stats = log.clean(now=0)
    assert log.records() == [(3, b"a", b"2")] and (stats.records_in, stats.records_out) == (4, 1)


def test_cleaning_with_uncleanable_section() -> None:
    """Only what the map covers is cleaned: the rest is left as it was (a pass for each part)."""
    log = Log()
    for i in range(8):
        log.put((b"k%d" % i, b"a"))
    for i in range(8):
        log.put((b"k%d" % i, b"b"))
    first = build_key_map(log.batches, capacity=4)
    assert first.end == 4 and len(first.latest) == 4  # (digests of the keys)
    log.batches = clean(log.batches, first, now_ms=0, delete_retention_ms=DAY)
    assert log.offsets() == list(range(16))  # keys 0-3 have no later value in the map's part
    log.clean(now=0)
    assert log.offsets() == list(range(8, 16))


def test_basic_transaction_aware_cleaning() -> None:
    log = Log()
    log.put((b"1", b"a"), (b"2", b"a"), pid=7, txn=True)
    log.put((b"1", b"b"), (b"3", b"b"), pid=8, txn=True)
    log.marker(7, commit=False)
    log.marker(8, commit=True)
    log.clean(now=0)
    _valid(log.batches)
    assert log.records() == [(2, b"1", b"b"), (3, b"3", b"b")]  # the aborted values never hide a key
    assert log.markers() == [4, 5]  # markers wait for their horizon


def test_abort_marker_removal() -> None:
    log = Log()
    log.put((b"0", b"1"), (b"1", b"1"), pid=1, txn=True)
    log.marker(1, commit=False)
    log.put((b"2", b"x"), pid=1, txn=True)  # the producer's next transaction: its last batch now
    log.marker(1, commit=True)
    log.clean(now=0)
    assert log.offsets() == [3] and log.markers() == [2, 4]
    log.clean(now=DAY)
    assert log.offsets() == [3] and log.markers() == [4]


def test_an_abort_marker_stays_while_its_producers_last_batch_does() -> None:
    """The emptied last batch of its producer is still a batch of the transaction (as in Kafka,
    the marker goes only once no batch of it is left)."""
    log = Log()
    log.put((b"0", b"1"), pid=1, txn=True)
    log.marker(1, commit=False)
    log.put((b"2", b"x"))
    for now in (0, DAY, 2 * DAY):
        log.clean(now=now)
    assert log.offsets() == [2] and log.markers() == [1]
    assert [parse_header(b).records_count for b in log.batches] == [0, 1, 1]


def test_commit_marker_removal() -> None:
    log = Log()
    log.put((b"k", b"1"), pid=1, txn=True)
    log.marker(1, commit=True)
    log.put((b"k", b"2"), pid=1, txn=True)
    log.marker(1, commit=True)
    log.clean(now=0)
    assert log.offsets() == [2] and log.markers() == [1, 3]  # its record superseded: stamped
    log.clean(now=DAY)
    assert log.markers() == [3]


def test_commit_marker_retained_while_its_records_are() -> None:
    log = Log()
    log.put((b"k", b"1"), pid=1, txn=True)
    log.marker(1, commit=True)
    log.clean(now=DAY * 10)
    log.clean(now=DAY * 20)
    assert log.offsets() == [0] and log.markers() == [1]


def test_log_cleaner_retains_producer_last_sequence() -> None:
    log = Log()
    log.put((b"k", b"1"), pid=5)
    log.put((b"k", b"2"), pid=5)
    log.put((b"k", b"3"), pid=6)
    log.clean(now=0)
    assert log.offsets() == [2]
    kept = [parse_header(b) for b in log.batches]
    # producer 5's last batch stays, empty, with its sequence and offsets
    assert [(h.producer_id, h.base_offset, h.last_offset, h.base_sequence, h.records_count) for h in kept] == [
        (5, 1, 1, 1, 0), (6, 2, 2, 0, 1)]
    _valid(log.batches)


def test_duplicate_check_after_cleaning() -> None:
    """The kept (emptied) last batch still carries what a retried produce is checked against."""
    log = Log()
    log.put((b"k", b"1"), (b"k", b"2"), pid=9)
    log.put((b"k", b"3"))
    log.clean(now=0)
    hdr = next(parse_header(b) for b in log.batches if parse_header(b).producer_id == 9)
    assert (hdr.base_sequence, hdr.last_sequence, hdr.base_offset, hdr.last_offset) == (0, 1, 0, 1)


def test_multi_pass_segment_cleaning_with_aborted_transactions() -> None:
    log = Log()
    log.put((b"a", b"1"), pid=1, txn=True)
    log.put((b"b", b"1"), pid=2, txn=True)
    log.marker(1, commit=False)
    log.put((b"b", b"2"), pid=2, txn=True)
    log.marker(2, commit=True)
    for now in (0, 1, DAY, DAY + 1):
        log.clean(now=now, capacity=1)
        _valid(log.batches)
    assert log.records() == [(3, b"b", b"2")] and log.markers() == [2, 4]  # producer 1's last batch stays, emptied: its abort too


@pytest.mark.parametrize("codec", [1, 2, 3, 4])  # gzip, snappy, lz4, zstd
def test_compressed_batches_are_cleaned_and_keep_their_codec(codec: int) -> None:
    """Written by kafka-python's encoders, read back by its decoders: each codec is read and
    written in the framing Kafka's clients use, not only in ours."""
    from kafka import codec as reference

    encode, decode = {1: (reference.gzip_encode, reference.gzip_decode),
                      2: (lambda b: reference.snappy_encode(b, xerial_compatible=True), reference.snappy_decode),
                      3: (reference.lz4_encode, reference.lz4_decode),
                      4: (reference.zstd_encode, reference.zstd_decode)}[codec]
    plain = build_batch([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], base_offset=0)
    after = struct.pack(">h", codec) + plain[23:HEADER_SIZE] + encode(plain[HEADER_SIZE:])
    batch = plain[:8] + struct.pack(">i", len(after) + 9) + plain[12:17] + struct.pack(">I", crc32c(after)) + after
    log = Log()
    log._add(batch)
    log.put((b"a", b"2"))
    log.clean(now=0)
    _valid(log.batches)
    cleaned = parse_header(log.batches[0])
    assert cleaned.compression == codec and log.records() == [(1, b"b", b"1"), (2, b"c", b"1"), (3, b"a", b"2")]
    theirs = decode_body(cleaned, decode(log.batches[0][HEADER_SIZE:]))  # their decoder reads what the cleaner wrote
    assert [(r.key, r.value) for r in theirs] == [(b"b", b"1"), (b"c", b"1")]


def test_a_batch_it_cannot_read_is_kept_whole_and_removes_nothing() -> None:
    log = Log()
    log.put((b"a", b"1"))
    snappy = bytearray(build_batch([(b"a", b"2")], base_offset=1))
    snappy[22] |= 2  # attributes: snappy, over records that are not (unreadable)
    snappy[17:21] = crc32c(bytes(snappy[21:])).to_bytes(4, "big")
    log._add(bytes(snappy))
    log.clean(now=0)
    assert [parse_header(b).base_offset for b in log.batches] == [0, 1]


@dataclass(frozen=True)
class _Op:
    kind: str  # put, tomb, txn_put, commit, abort, clean
    key: int = 0
    pid: int = 0
    now: int = 0
    capacity: int = 4


OPS = st.one_of(
    st.builds(_Op, st.just("put"), st.integers(0, 5)),
    st.builds(_Op, st.just("tomb"), st.integers(0, 5)),
    st.builds(_Op, st.just("txn_put"), st.integers(0, 5), st.integers(1, 2)),
    st.builds(_Op, st.just("commit"), pid=st.integers(1, 2)),
    st.builds(_Op, st.just("abort"), pid=st.integers(1, 2)),
    st.builds(_Op, st.just("clean"), now=st.integers(0, 3 * DAY), capacity=st.integers(1, 8)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(OPS, max_size=40))
def test_a_reader_from_the_start_sees_every_keys_latest_committed_value_at_its_offset(ops: list[_Op]) -> None:
    log = Log()
    open_txn: dict[int, list[tuple[int, int, bytes | None]]] = {}
    latest: dict[int, tuple[int, bytes | None]] = {}  # key -> (offset, value) as committed
    written: set[int] = set()
    now = 0
    for i, op in enumerate(ops):
        if op.kind in ("put", "tomb"):
            value = None if op.kind == "tomb" else b"v%d" % i
            latest[op.key] = (log.end, value)
            written.add(log.end)
            log.put((b"%d" % op.key, value))
        elif op.kind == "txn_put":
            open_txn.setdefault(op.pid, []).append((op.key, log.end, b"t%d" % i))
            written.add(log.end)
            log.put((b"%d" % op.key, b"t%d" % i), pid=op.pid, txn=True)
        elif op.kind in ("commit", "abort") and op.pid in open_txn:
            if op.kind == "commit":
                for key, offset, value in open_txn[op.pid]:
                    if offset > latest.get(key, (-1, None))[0]:
                        latest[key] = (offset, value)
            del open_txn[op.pid]
            log.marker(op.pid, commit=op.kind == "commit")
        elif op.kind == "clean" and not open_txn:  # the cleaner stops at the last stable offset
            now = max(now, op.now)
            before = {parse_header(b).base_offset: parse_header(b).last_offset for b in log.batches}
            log.clean(now=now, capacity=op.capacity)
            _valid(log.batches)
            for b in log.batches:  # offsets never change: each batch kept spans what it spanned
                hdr = parse_header(b)
                assert before.get(hdr.base_offset) == hdr.last_offset
    seen: dict[int, tuple[int, bytes | None]] = {}
    aborted_spans = [(e.producer_id, e.first_offset, e.last_offset) for e in log.txns.aborted]
    for b in log.batches:
        hdr = parse_header(b)
        if hdr.is_control or any(p == hdr.producer_id and f <= hdr.base_offset < m for p, f, m in aborted_spans):
            continue
        if hdr.is_transactional and hdr.base_offset >= log.txns.ongoing.get(hdr.producer_id, log.end):
            continue  # still open: read_committed does not see it
        raw = b[HEADER_SIZE:]
        for r in decode_body(hdr, raw):
            assert r.offset in written
            seen[int(r.key or b"-1")] = (r.offset, r.value)
    offsets = log.offsets()
    assert offsets == sorted(offsets)
    for key, (offset, value) in latest.items():
        if value is None:
            assert seen.get(key, (offset, None)) == (offset, None)  # the tombstone, or nothing once gone
        else:
            assert seen.get(key) == (offset, value), (key, seen.get(key), (offset, value))


def test_a_rewritten_batch_keeps_header_keys_that_are_not_utf8_byte_for_byte() -> None:
    from replication.log_cleaner import _rebuild
    from replication.record_batch import Record, decode_records

    plain = build_batch([(b"a", b"1"), (b"b", b"1")], base_offset=0)
    hdr = parse_header(plain)
    key = b"\xff\xfe-not-utf8".decode("utf-8", "surrogateescape")
    records = [Record(r.offset, r.timestamp, r.key, r.value, ((key, b"v"),)) for r in decode_records(plain)]
    log = Log()
    log._add(_rebuild(hdr, records, hdr.base_timestamp, 0))
    log.put((b"a", b"2"))
    log.clean(now=0)
    (kept,) = [r for r in decode_records(log.batches[0])]
    assert kept.key == b"b" and kept.headers[0][0].encode("utf-8", "surrogateescape") == b"\xff\xfe-not-utf8"
    assert b"\xff\xfe-not-utf8" in log.batches[0]  # the bytes on disk, as produced
