"""Log compaction of a data partition's batches, as Kafka's cleaner does it (pure: batches in,
batches out; choosing segments, running off the event loop and replacing files safely are the
data log's).

A pass over the cleanable part of a log (closed segments, below the last stable offset):

1. ``build_key_map`` walks it and keeps, for each key, the offset of its latest record (committed
   or outside a transaction). The map holds ``capacity`` keys at most, as Kafka's dedupe buffer
   does: once full, it stops at a batch boundary and says where (``KeyMap.end``); the pass cleans
   up to there and the next pass goes on from there.
2. ``clean`` rewrites every batch below ``KeyMap.end``, keeping (offsets unchanged, in order):
   - a keyed record whose key has no later record in the map (the latest value of its key);
   - a tombstone (no value) until its delete horizon passed: the first pass that keeps it stamps
     the batch with ``now + delete.retention.ms`` (Kafka's delete-horizon flag, attribute bit 6,
     the horizon in the base timestamp), and a pass after that horizon drops it;
   - nothing of an aborted transaction (``aborted``: the partition's aborted spans);
   - a commit or abort marker until its transaction has nothing left and the marker's own
     horizon (stamped the same way) passed;
   - each producer's last batch (``producers_last``: its last offset), emptied if need be, so
     that sequence and epoch checks of its next produce still hold.
   A keyless record is dropped (a compacted topic refuses them; older ones have nothing to keep).
   A batch whose records cannot be read (damaged, or inflating past ``MAX_PLAIN_BYTES``) is kept
   whole and puts nothing in the map: only a later record that was read removes a record.
"""

from __future__ import annotations

import bisect
import hashlib
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from replication import codecs
from replication.compacted import plain_records
from replication.record_batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    NO_PRODUCER_ID,
    BatchHeader,
    InvalidBatchError,
    Record,
    crc32c,
    decode_body,
    encode_record,
    parse_header,
)
from replication.txn_index import AbortedTxn

ATTR_DELETE_HORIZON = 0x40  # Kafka's DELETE_HORIZON_FLAG_MASK: the base timestamp is the horizon
LONG_MAX = (1 << 63) - 1
MAX_PLAIN_BYTES = 64 * 1024 * 1024  # a batch inflating past this is left as it is


def _digest(key: bytes) -> bytes:
    """A key as the map holds it: 16 bytes whatever its size (Kafka's map holds MD5s)."""
    return hashlib.blake2b(key, digest_size=16).digest()


@dataclass(slots=True)
class KeyMap:
    """Each key's (digest's) latest offset in ``[start, end)`` (``end``: where mapping stopped)."""

    start: int
    end: int
    latest: dict[bytes, int] = field(default_factory=dict)


@dataclass(slots=True)
class CleanState:
    """What a pass carries from batch to batch, and from segment to segment."""

    kept_in_txn: dict[int, bool] = field(default_factory=dict)  # producer -> its open transaction kept a batch
    dropped_markers: set[int] = field(default_factory=set)  # offsets of the markers removed
    unreadable_seen: bool = False  # a batch whose records were not read came before: tombstones stay
    changed: bool = False  # some batch was removed or rewritten
    next_horizon: int = LONG_MAX  # the earliest delete horizon a kept batch carries: a pass is due then


@dataclass(slots=True)
class CleanStats:
    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


def _records(hdr: BatchHeader, batch: bytes | memoryview) -> list[Record] | None:
    """The records of a batch, or None if they cannot be read (a bomb past ``MAX_PLAIN_BYTES``,
    damage: such a batch is kept as it is)."""
    raw = plain_records(hdr, batch, MAX_PLAIN_BYTES)
    if raw is None:
        return None
    try:
        return decode_body(hdr, raw)
    except (InvalidBatchError, IndexError, UnicodeError):
        return None


def _aborted(aborted: Sequence[AbortedTxn], ends: list[int], producer_id: int, offset: int) -> bool:
    """Whether a transactional batch of ``producer_id`` at ``offset`` belongs to an aborted transaction."""
    for i in range(bisect.bisect_right(ends, offset), len(aborted)):
        e = aborted[i]
        if e.producer_id == producer_id and e.first_offset <= offset:
            return True
        if e.last_stable_offset > offset:
            break  # nothing open at that marker began by ``offset``: no later marker's transaction did
    return False


def build_key_map(batches: Iterable[bytes], *, capacity: int, aborted: Sequence[AbortedTxn] = ()) -> KeyMap:
    """Each key's latest offset over ``batches`` (in offset order), up to ``capacity`` keys."""
    ends = [e.last_offset for e in aborted]
    key_map: KeyMap | None = None
    for batch in batches:
        hdr = parse_header(batch)
        if key_map is None:
            key_map = KeyMap(hdr.base_offset, hdr.base_offset)
        if hdr.is_control or (hdr.is_transactional and _aborted(aborted, ends, hdr.producer_id, hdr.base_offset)):
            key_map.end = hdr.next_offset
            continue
        records = _records(hdr, batch) or []
        keyed = [(_digest(r.key), r.offset) for r in records if r.key is not None]
        new = {d for d, _ in keyed if d not in key_map.latest}
        if len(key_map.latest) + len(new) > capacity and key_map.latest:
            break  # full: this pass cleans up to here
        for d, offset in keyed:
            key_map.latest[d] = offset
        key_map.end = hdr.next_offset
    return key_map or KeyMap(0, 0)


def clean(batches: Iterable[bytes], key_map: KeyMap, *, now_ms: int, delete_retention_ms: int,
          aborted: Sequence[AbortedTxn] = (), producers_last: dict[int, int] | None = None,
          stats: CleanStats | None = None) -> list[bytes]:
    """The batches below ``key_map.end`` as compaction leaves them (offsets unchanged); the
    batches from there on are returned as they are."""
    return list(clean_iter(batches, key_map, now_ms=now_ms, delete_retention_ms=delete_retention_ms, aborted=aborted,
                           producers_last=producers_last, stats=stats))


def clean_iter(batches: Iterable[bytes], key_map: KeyMap, *, now_ms: int, delete_retention_ms: int,
               aborted: Sequence[AbortedTxn] = (), producers_last: dict[int, int] | None = None,
               stats: CleanStats | None = None, keep_last: bool = False,
               state: CleanState | None = None) -> Iterator[bytes]:
    """``clean``, a batch at a time (a segment is written as it is cleaned). ``keep_last``: the
    last batch stays (a segment keeps its end offset, so the next one still starts where it
    ends): a data batch emptied and of no producer, a marker as it was. ``state``: the pass's, shared by its segments."""
    ends = [e.last_offset for e in aborted]
    last_of = producers_last or {}
    stats = stats if stats is not None else CleanStats()
    state = state if state is not None else CleanState()
    horizon = min(now_ms + delete_retention_ms, LONG_MAX)
    dropped: tuple[BatchHeader, bytes] | None = None  # the last batch looked at, if nothing of it was kept
    for batch in batches:
        hdr = parse_header(batch)
        dropped = None
        if hdr.base_offset >= key_map.end:
            yield bytes(batch)
            continue
        stats.bytes_in += hdr.size
        stats.records_in += hdr.records_count
        kept = _clean_batch(hdr, batch, key_map, now_ms, horizon, last_of, state,
                            hdr.is_transactional and not hdr.is_control
                            and _aborted(aborted, ends, hdr.producer_id, hdr.base_offset))
        if kept is not batch:
            state.changed = True
        if kept is None:
            dropped = (hdr, batch)
            if hdr.is_control:
                state.dropped_markers.add(hdr.base_offset)
            continue
        kept_hdr = parse_header(kept)
        if kept_hdr.attributes & ATTR_DELETE_HORIZON:
            state.next_horizon = min(state.next_horizon, kept_hdr.base_timestamp)
        stats.bytes_out += len(kept)
        stats.records_out += kept_hdr.records_count
        yield kept
    if keep_last and dropped is not None:
        hdr, batch = dropped
        if hdr.is_control:  # a marker is never emptied (a reader would take it for none): it stays
            state.dropped_markers.discard(hdr.base_offset)
            last = bytes(batch)
        else:  # a placeholder of no producer: a transaction's would keep it open once its marker goes
            last = _rebuild(replace(hdr, producer_id=NO_PRODUCER_ID, producer_epoch=-1, base_sequence=-1), [],
                            hdr.base_timestamp, hdr.attributes & ~(ATTR_DELETE_HORIZON | ATTR_TRANSACTIONAL))
        stats.bytes_out += len(last)
        yield last


def _clean_batch(hdr: BatchHeader, batch: bytes, key_map: KeyMap, now_ms: int, horizon: int,
                 last_of: dict[int, int], state: CleanState, aborted: bool) -> bytes | None:
    """The batch as the pass leaves it: ``batch`` itself if unchanged, a rewritten one, or None."""
    stamped = bool(hdr.attributes & ATTR_DELETE_HORIZON)
    past_horizon = stamped and hdr.base_timestamp <= now_ms and not state.unreadable_seen
    last_of_producer = hdr.producer_id != NO_PRODUCER_ID and last_of.get(hdr.producer_id) == hdr.last_offset
    if hdr.is_control:
        if state.kept_in_txn.pop(hdr.producer_id, False) or last_of_producer:
            return batch
        if past_horizon:
            return None  # its transaction is gone, and readers had delete.retention.ms to see it
        return batch if stamped else _restamp(hdr, batch, horizon)
    records = None if aborted else _records(hdr, batch)
    if records is None and not aborted:
        state.unreadable_seen = True  # its records may hold an older value a tombstone hides
        if hdr.is_transactional:
            state.kept_in_txn[hdr.producer_id] = True
        return batch  # unreadable here: kept whole
    keep = [r for r in records or () if r.key is not None and key_map.latest.get(_digest(r.key), -1) <= r.offset
            and not (r.value is None and past_horizon)]
    if hdr.is_transactional and (keep or last_of_producer):
        state.kept_in_txn[hdr.producer_id] = True  # a batch of it stays (an emptied one too): so does its marker
    tombstones = any(r.value is None for r in keep)
    if records is not None and len(keep) == len(records) and (stamped or not tombstones):
        return batch
    if not keep and not last_of_producer:
        return None
    base_ts = horizon if tombstones and not stamped else hdr.base_timestamp
    attributes = hdr.attributes | (ATTR_DELETE_HORIZON if tombstones or stamped else 0)
    if not tombstones and not stamped:
        attributes &= ~ATTR_DELETE_HORIZON
    return _rebuild(hdr, keep, base_ts, attributes)


def _rebuild(hdr: BatchHeader, records: list[Record], base_ts: int, attributes: int) -> bytes:
    """A batch of ``records`` with ``hdr``'s offsets (last offset kept: the producer's sequence
    range), producer fields and codec (written again with it, as Kafka's Java client frames it)."""
    body = b"".join(encode_record(r.offset - hdr.base_offset, r.timestamp - base_ts, r.key, r.value, r.headers)
                    for r in records)
    if not records:  # an empty batch (a producer's last) is written uncompressed, as Kafka writes it
        attributes &= ~ATTR_COMPRESSION_MASK
    else:
        body = codecs.deflate(attributes & ATTR_COMPRESSION_MASK, body)
    log_append_time = bool(attributes & ATTR_TIMESTAMP_TYPE)  # every record's time is the batch's max
    max_ts = hdr.max_timestamp if log_append_time else max((r.timestamp for r in records), default=hdr.max_timestamp)
    after_crc = struct.pack(">hiqqqhii", attributes, hdr.last_offset_delta, base_ts, max_ts, hdr.producer_id,
                            hdr.producer_epoch, hdr.base_sequence, len(records)) + body
    batch_length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", hdr.base_offset, batch_length, hdr.partition_leader_epoch, 2,
                       crc32c(after_crc)) + after_crc


def _restamp(hdr: BatchHeader, batch: bytes, horizon: int) -> bytes:
    """A marker batch stamped with its delete horizon (its record's timestamp kept)."""
    records = _records(hdr, batch)
    if records is None:
        return batch
    return _rebuild(hdr, records, horizon, hdr.attributes | ATTR_DELETE_HORIZON)

