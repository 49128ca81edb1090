"""Compaction of a data log (``DataLog.compact``): which segments a pass cleans, what a reader
from the start then sees, and that a crash at any step leaves the log as before or as after."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from replication import segment_swap
from replication.data_log import Compaction, DataLog
from replication.record_batch import ATTR_TRANSACTIONAL, assign_offsets, build_batch, iter_records
from replication.txn_index import marker_record

SEGMENT = 300  # bytes: a few small batches a segment


class Clock:
    def __init__(self, now: int = 10_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _log(path: Path, clock: Clock | None = None, **compaction: int | float) -> DataLog:
    return DataLog(str(path), segment_bytes=SEGMENT, cleanup_policy="compact", clock=clock or Clock(),
                   compaction=Compaction(**{"min_dirty_ratio": 0.0, **compaction}))  # type: ignore[arg-type]


def put(log: DataLog, key: bytes, value: bytes | None, *, ts: int = 1000, pid: int = -1, seq: int = -1,
        txn: bool = False) -> int:
    base = log.log_end_offset
    batch = build_batch([(key, value)], timestamp=ts, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                        base_sequence=seq, attributes=ATTR_TRANSACTIONAL if txn else 0)
    log.append(assign_offsets(batch, base, 1))
    return base


def everything(log: DataLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in iter_records(log.read(0, 1 << 24))]


def fill(log: DataLog, rounds: int = 6, keys: int = 4) -> dict[bytes, tuple[int, bytes]]:
    latest = {}
    for r in range(rounds):
        for k in range(keys):
            key, value = b"k%d" % k, b"v%d-%d" % (r, k)
            latest[key] = (put(log, key, value), value)
    return latest


def test_a_pass_keeps_each_keys_latest_value_at_its_offset_and_the_active_segment(tmp_path: Path) -> None:
    log = _log(tmp_path)
    latest = fill(log)
    end, segments = log.log_end_offset, log.segment_count
    active = log._segments[-1].base
    stats = log.compact(capacity=1000)
    assert stats is not None and stats.records_out < stats.records_in
    got = everything(log)
    assert log.log_end_offset == end and log.segment_count == segments  # offsets and segments stay
    survivors = {k: (o, v) for o, k, v in got if o < active}
    for key, (offset, value) in latest.items():
        assert (offset, key, value) in got, key
    assert all(latest[k][0] >= o for k, (o, _) in survivors.items())
    assert [o for o, _, _ in got] == sorted(o for o, _, _ in got)
    assert everything(log)[-1][0] == end - 1  # the active segment as it was
    log.close()
    again = _log(tmp_path)
    assert everything(again) == got and again.log_end_offset == end  # reopened: the same log
    assert again.compact(capacity=1000) is None or everything(again) == got  # nothing new: nothing to do


def test_segments_past_the_last_stable_offset_or_younger_than_the_lag_are_not_cleaned(tmp_path: Path) -> None:
    clock = Clock()
    log = _log(tmp_path / "txn", clock)
    fill(log, rounds=2)
    put(log, b"k0", b"open", pid=7, seq=0, txn=True)  # an open transaction from here
    fill(log, rounds=4)
    before = everything(log)
    log.compact(capacity=1000)
    after = everything(log)
    first_open = next(o for o, k, v in before if v == b"open")
    assert [x for x in after if x[0] >= first_open] == [x for x in before if x[0] >= first_open]
    log.append(assign_offsets(build_batch([marker_record(True, 0)], producer_id=7, producer_epoch=0,
                                          attributes=ATTR_TRANSACTIONAL | 0x20), log.log_end_offset, 1))
    young = _log(tmp_path / "lag", clock, min_lag_ms=5000)
    fill(young)  # record timestamps of 1000, now 10,000,000: old enough
    assert young.compact(capacity=1000) is not None
    fresh = _log(tmp_path / "fresh", clock, min_lag_ms=5000)
    for k in range(20):
        put(fresh, b"k", b"%d" % k, ts=clock.now - 10)
    assert fresh.compact(capacity=1000) is None


def test_a_small_map_cleans_in_passes(tmp_path: Path) -> None:
    log = _log(tmp_path)
    latest = fill(log, rounds=5, keys=10)
    passes = 0
    while log.compact(capacity=3) is not None:  # each maps 3 keys: 4 rounds of 10 keys take 14 passes
        passes += 1
        assert passes < 100
    assert passes > 10
    got = everything(log)
    assert all((o, k, v) in got for k, (o, v) in latest.items())
    cleanable = [k for o, k, _ in got if o < log._segments[-1].base]
    assert len(cleanable) == len(set(cleanable))  # each key once there, after enough passes


def test_a_producers_last_batch_keeps_it_from_duplicating_after_compaction(tmp_path: Path) -> None:
    log = _log(tmp_path)
    for seq in range(6):
        put(log, b"k", b"%d" % seq, pid=3, seq=seq)
    fill(log, rounds=4)
    log.compact(capacity=1000)
    log.close()
    again = _log(tmp_path)
    assert again.check_sequence(3, 0, 5, 5).result.name == "DUPLICATE"
    assert again.check_sequence(3, 0, 6, 6).result.name == "OK"


def test_a_crash_before_the_commit_leaves_the_segment_and_after_it_the_copy(tmp_path: Path) -> None:
    for crash_at, expect_cleaned in (("written", False), ("committed", True), ("index_swapped", True)):
        d = tmp_path / crash_at
        log = _log(d)
        fill(log)
        before = everything(log)
        seg = log._segments[0]
        fd = os.dup(seg.fh.fileno())
        from replication.log_cleaner import build_key_map, clean_iter

        batches = list(segment_swap.read_batches(fd, seg.size))
        os.close(fd)
        whole = [b for s in log._segments[:-1] for b in segment_swap.read_batches(s.fh.fileno(), s.size)]
        key_map = build_key_map(whole, capacity=1000)
        copy = list(clean_iter(batches, key_map, now_ms=0, delete_retention_ms=0, keep_last=True))
        segment_swap.write_copy(seg.log_path, seg.idx_path, copy, log.index_interval_bytes)
        if crash_at != "written":
            os.replace(seg.log_path + ".cleaned", seg.log_path + ".swap")
        if crash_at == "index_swapped":
            os.replace(seg.idx_path + ".cleaned", seg.idx_path)
        log.close()  # (a crash: the process is gone; what is on disk is what counts)
        again = _log(d)
        got = everything(again)
        assert not [n for n in os.listdir(d) if n.endswith((".cleaned", ".swap"))]
        cleaned_first = [x for x in got if x[0] < seg.next_offset]
        assert (len(cleaned_first) < len([x for x in before if x[0] < seg.next_offset])) == expect_cleaned
        assert [x for x in got if x[0] >= seg.next_offset] == [x for x in before if x[0] >= seg.next_offset]
        assert again.log_end_offset == log.log_end_offset


def test_a_snapshot_stream_reading_a_segment_sees_its_compaction_and_starts_over(tmp_path: Path) -> None:
    log = _log(tmp_path)
    fill(log)
    base = log._segments[0].base
    generation = log.segment_generation(base)
    assert log.read_segment(base, 0, 10, generation)
    log.compact(capacity=1000)
    assert log.read_segment(base, 0, 10, generation) is None  # the piece would mix two files
    assert log.read_segment(base, 0, 10, log.segment_generation(base))


def test_segment_ms_rolls_at_an_append_whose_records_are_that_much_newer(tmp_path: Path) -> None:
    log = DataLog(str(tmp_path), cleanup_policy="compact", compaction=Compaction(segment_ms=1000))
    put(log, b"a", b"1", ts=5000)
    put(log, b"a", b"2", ts=5900)
    assert log.segment_count == 1
    put(log, b"a", b"3", ts=6001)
    assert log.segment_count == 2
    put(log, b"a", b"4", ts=0)  # an old timestamp rolls nothing
    assert log.segment_count == 2


# ------------------------------------------------------------ a property test, with crashes


@dataclass(frozen=True)
class Op:
    kind: str  # put, tomb, txn, commit, abort, compact, crash
    key: int = 0
    pid: int = 1
    at: int = 0  # compact: how far the clock moved; crash: the step a compaction is cut at


OPS = st.one_of(
    st.builds(Op, st.just("put"), st.integers(0, 5)), st.builds(Op, st.just("tomb"), st.integers(0, 5)),
    st.builds(Op, st.just("txn"), st.integers(0, 5), st.integers(1, 2)),
    st.builds(Op, st.just("commit"), pid=st.integers(1, 2)), st.builds(Op, st.just("abort"), pid=st.integers(1, 2)),
    st.builds(Op, st.just("compact"), at=st.integers(0, 3000)), st.builds(Op, st.just("crash"), at=st.integers(0, 2)),
)


def _crash_mid_compaction(log: DataLog, step: int) -> None:
    """A compaction of the first closed segment cut at ``step`` (0: copy written, 1: committed,
    2: index swapped), as a killed process leaves it."""
    from replication.log_cleaner import build_key_map, clean_iter

    closed = log._segments[:-1]
    if not closed:
        return
    seg = closed[0]
    whole = [b for s in closed for b in segment_swap.read_batches(s.fh.fileno(), s.size)]
    lso = log.txns.last_stable_offset(log.high_watermark, log.log_start_offset)
    if seg.next_offset > lso:
        return
    key_map = build_key_map([b for b in whole if int.from_bytes(b[:8], "big") < lso], capacity=1000,
                            aborted=log.txns.aborted)
    last = {pid: e.batches[-1][3] for pid, e in log.producer_state.producers.items() if e.batches}
    copy = clean_iter(segment_swap.read_batches(seg.fh.fileno(), seg.size), key_map, now_ms=log.clock(),
                      delete_retention_ms=log.compaction.delete_retention_ms, aborted=log.txns.aborted,
                      producers_last=last, keep_last=True)
    segment_swap.write_copy(seg.log_path, seg.idx_path, copy, log.index_interval_bytes)
    if step >= 1:
        os.replace(seg.log_path + ".cleaned", seg.log_path + ".swap")
    if step >= 2:
        os.replace(seg.idx_path + ".cleaned", seg.idx_path)


@settings(max_examples=60, deadline=None)
@given(st.lists(OPS, min_size=5, max_size=60))
def test_compactions_and_crashes_keep_every_keys_latest_committed_value_and_every_offset(tmp_path_factory: object,
                                                                                            ops: list[Op]) -> None:
    path = tmp_path_factory.mktemp("log")  # type: ignore[attr-defined]
    clock = Clock()
    log = _log(path, clock, delete_retention_ms=1000)
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    pending: dict[int, list[tuple[bytes, int, bytes]]] = {}
    seq: dict[int, int] = {}
    for i, op in enumerate(ops):
        key = b"k%d" % op.key
        if op.kind in ("put", "tomb"):
            value = None if op.kind == "tomb" else b"v%d" % i
            latest[key] = (put(log, key, value, ts=clock.now), value)
        elif op.kind == "txn":
            s = seq.get(op.pid, 0)
            seq[op.pid] = s + 1
            pending.setdefault(op.pid, []).append((key, put(log, key, b"t%d" % i, ts=clock.now, pid=op.pid, seq=s,
                                                              txn=True), b"t%d" % i))
        elif op.kind in ("commit", "abort") and op.pid in pending:
            written = pending.pop(op.pid)
            for k, offset, value in written if op.kind == "commit" else ():
                if offset > latest.get(k, (-1, None))[0]:
                    latest[k] = (offset, value)
            log.append(assign_offsets(build_batch([marker_record(op.kind == "commit", 0)], producer_id=op.pid,
                                                  producer_epoch=0, timestamp=clock.now,
                                                  attributes=ATTR_TRANSACTIONAL | 0x20), log.log_end_offset, 1))
        elif op.kind == "compact":
            clock.now += op.at
            end = log.log_end_offset
            log.compact(capacity=4)
            assert log.log_end_offset == end
        elif op.kind == "crash":
            end = log.log_end_offset
            _crash_mid_compaction(log, op.at)
            log = _log(path, clock, delete_retention_ms=1000)  # the killed process's files, opened again
            assert log.log_end_offset == end
    ongoing, lso = dict(log.txns.ongoing), log.txns.last_stable_offset(log.high_watermark, log.log_start_offset)
    log.close()
    log = _log(path, clock, delete_retention_ms=1000)  # what compaction left reads as what was there
    assert log.txns.ongoing == ongoing
    assert log.txns.last_stable_offset(log.high_watermark, log.log_start_offset) == lso
    aborted = [(e.producer_id, e.first_offset, e.last_offset) for e in log.txns.aborted]
    seen: dict[bytes, tuple[int, bytes | None]] = {}
    offsets = []
    for r_hdr, records in _batches(log):
        if r_hdr.is_control or any(p == r_hdr.producer_id and f <= r_hdr.base_offset < m for p, f, m in aborted):
            continue
        if r_hdr.is_transactional and r_hdr.base_offset >= log.txns.ongoing.get(r_hdr.producer_id, 1 << 62):
            continue
        for r in records:
            offsets.append(r.offset)
            seen[r.key or b""] = (r.offset, r.value)
    assert offsets == sorted(set(offsets))
    for key, (offset, value) in latest.items():
        if value is None:
            assert seen.get(key, (offset, None)) == (offset, None), key
        else:
            assert seen.get(key) == (offset, value), (key, seen.get(key), (offset, value))


def _batches(log: DataLog) -> list[tuple[object, list[object]]]:
    from replication.record_batch import decode_records, iter_batches

    data = log.read(0, 1 << 24)
    out = []
    for pos, hdr in iter_batches(data):
        out.append((hdr, decode_records(data[pos:pos + hdr.size])))
    return out  # type: ignore[return-value]


# ------------------------------------------------------------ found by review


def _marker(log: DataLog, pid: int, commit: bool) -> None:
    b = build_batch([marker_record(commit, 0)], producer_id=pid, producer_epoch=0,
                    attributes=ATTR_TRANSACTIONAL | 0x20)
    log.append(assign_offsets(b, log.log_end_offset, 1))


def test_a_compacted_log_is_installed_on_a_follower_whole(tmp_path: Path) -> None:
    from tests.replication.snapshot_stream import install_log

    log = _log(tmp_path / "leader")
    fill(log)
    log.compact(capacity=1000)
    target = DataLog(str(tmp_path / "follower"), segment_bytes=SEGMENT, cleanup_policy="compact")
    install_log(log, target)
    assert everything(target) == everything(log) and target.log_end_offset == log.log_end_offset


def test_a_removed_abort_marker_is_no_longer_named_to_readers(tmp_path: Path) -> None:
    """Otherwise a read_committed consumer, told of an abort whose marker is gone, skips the
    producer's later committed batches waiting for it."""
    clock = Clock()
    log = _log(tmp_path, clock, delete_retention_ms=1000)
    put(log, b"a", b"aborted", pid=7, seq=0, txn=True)
    _marker(log, 7, commit=False)
    for i in range(3):
        put(log, b"f%d" % i, b"x" * 60)
    put(log, b"b", b"committed", pid=7, seq=1, txn=True)
    _marker(log, 7, commit=True)
    for i in range(4):
        put(log, b"g%d" % i, b"y" * 60)
    log.compact(capacity=1000)
    clock.now += 5000
    for i in range(4):
        put(log, b"h%d" % i, b"z" * 60)
    log.compact(capacity=1000)
    assert log.txns.aborted_between(0, log.log_end_offset) == []
    assert (5, b"b", b"committed") in everything(log)
    # killed, and opened again from the producer snapshot of the last roll, from before the marker went
    again = _log(tmp_path, clock, delete_retention_ms=1000)
    assert again.txns.aborted_between(0, again.log_end_offset) == []


def test_a_marker_in_a_later_segment_than_its_records_stays_with_them(tmp_path: Path) -> None:
    clock = Clock()
    log = _log(tmp_path, clock, delete_retention_ms=1000)
    put(log, b"k1", b"committed", pid=7, seq=0, txn=True)
    for i in range(3):
        put(log, b"f%d" % i, b"x" * 50)
    _marker(log, 7, commit=True)  # in the next segment
    for i in range(12):
        put(log, b"g%d" % (i % 3), b"y" * 40, pid=9, seq=i)
    log.compact(capacity=1000)
    clock.now += 5000
    for i in range(12):
        put(log, b"g%d" % (i % 3), b"z" * 40, pid=9, seq=12 + i)
    log.compact(capacity=1000)
    log.close()
    os.remove(tmp_path / "producer.snapshot")  # never fsync'd: a power loss may take it
    again = _log(tmp_path, clock, delete_retention_ms=1000)
    assert again.txns.ongoing == {}  # the marker is there: the transaction is closed
    assert (0, b"k1", b"committed") in everything(again)


def test_a_delete_retention_of_long_max_compacts(tmp_path: Path) -> None:
    log = _log(tmp_path, delete_retention_ms=(1 << 63) - 1)
    fill(log)
    put(log, b"k0", None)
    fill(log, rounds=2)
    assert log.compact(capacity=1000) is not None
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".cleaned")]


def test_a_tombstone_stays_while_a_batch_it_could_not_read_comes_before_it(tmp_path: Path) -> None:
    from replication.record_batch import crc32c

    clock = Clock()
    log = _log(tmp_path, clock, delete_retention_ms=1000)
    snappy = bytearray(assign_offsets(build_batch([(b"k", b"old")], timestamp=1000), 0, 1))
    snappy[22] |= 2  # attributes: snappy, over records that are not (they cannot be read)
    snappy[17:21] = crc32c(bytes(snappy[21:])).to_bytes(4, "big")
    log.append(bytes(snappy))
    put(log, b"k", None)
    fill(log, rounds=4)
    for _ in range(3):
        log.compact(capacity=1000)
        clock.now += 5000
    tombstone = [r for r in iter_records(log.read(1, 1 << 20)) if r.key == b"k"]
    assert [(r.offset, r.value) for r in tombstone] == [(1, None)]  # the delete stands


def test_a_segments_last_batch_kept_emptied_belongs_to_no_transaction(tmp_path: Path) -> None:
    """A segment keeps its last batch (emptied) so that offsets still line up: a placeholder of no
    producer, not a transaction's. Kept as a transaction's, it outlived its marker, and the log,
    opened again, read it as the start of a transaction the next marker of its producer ended."""
    clock = Clock()
    log = _log(tmp_path, clock, delete_retention_ms=1000)
    put(log, b"f0", b"x" * 100)
    put(log, b"k1", b"old", pid=7, seq=0, txn=True)  # the first segment's last batch
    put(log, b"f1", b"x" * 10)  # rolls: the next segment
    assert [s.base for s in log._segments] == [0, 2]
    _marker(log, 7, commit=True)  # not the segment's last
    put(log, b"k1", b"new")  # k1's transactional record is superseded: its batch is emptied
    put(log, b"f2", b"x" * 200)
    put(log, b"k2", b"later", pid=7, seq=1, txn=True)  # the producer goes on: the marker is not its last
    _marker(log, 7, commit=True)  # rolls
    assert [s.base for s in log._segments][:3] == [0, 2, 5]
    for i in range(6):
        put(log, b"g%d" % (i % 2), b"y" * 100)
    log.compact(capacity=1000)
    clock.now += 5000  # past every horizon
    for i in range(6):
        put(log, b"g%d" % (i % 2), b"z" * 100)
    log.compact(capacity=1000)
    log.compact(capacity=1000)
    end = log.log_end_offset
    log.close()
    again = _log(tmp_path, clock, delete_retention_ms=1000)
    assert again.txns.ongoing == {}
    assert again.txns.last_stable_offset(end, 0) == end
    # every batch of the producer's still has its marker after it: none of its transactions reads as open
    mine = [h for h, _ in _batches(again) if h.producer_id == 7]  # type: ignore[attr-defined]
    assert ["marker" if h.is_control else "data" for h in mine] == ["data", "marker"]  # k2's, and its commit
    placeholder = [h for h, _ in _batches(again) if h.base_offset == 1]  # type: ignore[attr-defined]
    assert placeholder and placeholder[0].producer_id == -1 and not placeholder[0].is_transactional


def test_the_next_delete_horizon_is_kept_so_a_restart_runs_no_pass_before_it(tmp_path: Path) -> None:
    clock = Clock()
    log = _log(tmp_path, clock, delete_retention_ms=10_000, min_dirty_ratio=0.9)
    put(log, b"gone", b"v")
    fill(log)
    put(log, b"gone", None)  # a tombstone: kept by the pass, with its horizon
    fill(log, rounds=2)
    assert log.compact(capacity=1000) is not None
    assert (tmp_path / "cleaner-horizon").read_text() == str(clock.now + 10_000)
    log.close()
    again = _log(tmp_path, clock, delete_retention_ms=10_000, min_dirty_ratio=0.9)
    assert again.compact(capacity=1000) is None  # nothing dirty enough, and the horizon is ahead
    clock.now += 10_001
    assert again.compact(capacity=1000) is not None  # past it: the pass that removes the tombstone
    assert b"gone" not in {k for _, k, _ in everything(again)}
