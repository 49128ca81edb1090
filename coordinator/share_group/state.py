"""The share state of a group's topic-partitions, as pure operations (what Kafka's share
coordinator does: ShareCoordinatorShard, PersisterStateBatchCombiner): initialize, read (a
partition leader loading it), write (the leader's acknowledgements, releases and lock expiries)
and delete. Each change is one whole-state record (type 100), applied at once to the group.

Fencing: a read or write by a leader whose leader epoch is older than one already seen is
FENCED_LEADER_EPOCH (Kafka 4.4 checks writes no more; kcoord does, so that a deposed leader
cannot overwrite what its successor stored); an initialization at an older state epoch is
FENCED_STATE_EPOCH. The start offset never goes back.
"""

from __future__ import annotations

from collections.abc import Iterable

from coordinator.errors import ErrorCode

from . import records as r
from .group import ShareGroup

E = ErrorCode
Record = tuple[r.ShareKey, r.ShareValue | None]


def combine(current: Iterable[r.StateBatch], new: Iterable[r.StateBatch], start_offset: int) -> tuple[r.StateBatch, ...]:
    """``new`` laid over ``current`` (a later batch wins where they overlap), nothing below
    ``start_offset``, adjacent batches of one state and count joined."""
    spans: list[r.StateBatch] = sorted(current, key=lambda b: b.first_offset)
    for b in new:
        if b.last_offset < b.first_offset:
            continue
        kept: list[r.StateBatch] = []
        for s in spans:
            if s.last_offset < b.first_offset or s.first_offset > b.last_offset:
                kept.append(s)
                continue
            if s.first_offset < b.first_offset:
                kept.append(r.StateBatch(s.first_offset, b.first_offset - 1, s.delivery_state, s.delivery_count))
            if s.last_offset > b.last_offset:
                kept.append(r.StateBatch(b.last_offset + 1, s.last_offset, s.delivery_state, s.delivery_count))
        kept.append(b)
        spans = sorted(kept, key=lambda x: x.first_offset)
    out: list[r.StateBatch] = []
    for s in spans:
        if s.last_offset < start_offset:
            continue
        if s.first_offset < start_offset:
            s = r.StateBatch(start_offset, s.last_offset, s.delivery_state, s.delivery_count)
        prev = out[-1] if out else None
        if (prev is not None and prev.last_offset + 1 == s.first_offset
                and (prev.delivery_state, prev.delivery_count) == (s.delivery_state, s.delivery_count)):
            out[-1] = r.StateBatch(prev.first_offset, s.last_offset, s.delivery_state, s.delivery_count)
        else:
            out.append(s)
    return tuple(out)


def _key(group: ShareGroup, topic: str, partition: int) -> r.ShareStateKey:
    return r.ShareStateKey(group.group_id, bytes.fromhex(topic), partition)


def _apply(group: ShareGroup, key: r.ShareStateKey, value: r.SharePartitionState) -> Record:
    group.replay(key, value)
    return key, value


def initialize(group: ShareGroup, topic: str, partition: int, state_epoch: int, start_offset: int,
               now_ms: int) -> tuple[ErrorCode, Record | None]:
    """A fresh state (Kafka's initializeState): a new snapshot, nothing in flight."""
    old = group.share_states.get((topic, partition))
    if old is not None and old.state_epoch > state_epoch:
        return E.FENCED_STATE_EPOCH, None
    snapshot = old.snapshot_epoch + 1 if old is not None else 0
    return E.NONE, _apply(group, _key(group, topic, partition), r.SharePartitionState(
        snapshot, state_epoch, -1, start_offset, now_ms, now_ms))


def read(group: ShareGroup, topic: str, partition: int, leader_epoch: int,
         now_ms: int) -> tuple[ErrorCode, str | None, r.SharePartitionState | None, Record | None]:
    """The state a partition leader loads (Kafka's readStateAndMaybeUpdateLeaderEpoch); a newer
    leader epoch is recorded, fencing the older leaders' writes."""
    if leader_epoch < 0:
        return E.INVALID_REQUEST, "Leader epoch cannot be negative.", None, None
    state = group.share_states.get((topic, partition))
    if state is None:
        return E.INVALID_REQUEST, "Read on uninitialized share partition.", None, None
    if state.leader_epoch > leader_epoch:
        return E.FENCED_LEADER_EPOCH, None, None, None
    if state.leader_epoch == leader_epoch:
        return E.NONE, None, state, None
    new = r.SharePartitionState(state.snapshot_epoch + 1, state.state_epoch, leader_epoch, state.start_offset,
                                state.create_timestamp, now_ms, state.batches, state.delivery_complete_count)
    return E.NONE, None, new, _apply(group, _key(group, topic, partition), new)


def write(group: ShareGroup, topic: str, partition: int, leader_epoch: int, start_offset: int,
          batches: Iterable[r.StateBatch], now_ms: int,
          delivery_complete_count: int = -1) -> tuple[ErrorCode, str | None, Record | None]:
    """A leader's changes (Kafka's writeState): its batches laid over the stored ones from the
    start offset on, which never goes back."""
    state = group.share_states.get((topic, partition))
    if state is None:
        return E.INVALID_REQUEST, "Write on uninitialized share partition.", None
    if leader_epoch < state.leader_epoch:
        return E.FENCED_LEADER_EPOCH, None, None
    start = max(start_offset, state.start_offset)
    if start_offset == state.start_offset:
        dcc = max(delivery_complete_count, state.delivery_complete_count)
    elif start_offset < state.start_offset:
        dcc = state.delivery_complete_count
    else:
        dcc = delivery_complete_count
    new = r.SharePartitionState(state.snapshot_epoch + 1, state.state_epoch, max(leader_epoch, state.leader_epoch),
                                start, state.create_timestamp, now_ms, combine(state.batches, batches, start), dcc)
    return E.NONE, None, _apply(group, _key(group, topic, partition), new)


def delete(group: ShareGroup, topic: str, partition: int) -> list[Record]:
    """Forget a partition's state (Kafka's deleteState: a tombstone; none if there is none)."""
    if (topic, partition) not in group.share_states:
        return []
    key = _key(group, topic, partition)
    group.replay(key, None)
    return [(key, None)]
