"""The durable state a partition's records replay to, kept apart from any shard.

A follower replays committed entries into a ``DurableImage`` as they arrive, so that when
it becomes the leader the shard starts from the image and replays only the entries the
image has not seen: loading is still replay, just done ahead of time.
"""

from __future__ import annotations

from collections.abc import Iterable

from .consumer_group.group import ConsumerGroup, replay_into_groups
from .consumer_group.records import ConsumerGroupValue, GroupKey, MemberKey
from .records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    TxnMarkerKey,
    TxnMarkerValue,
)
from .share_group.group import ShareGroup, replay_into_share_groups
from .share_group.records import ShareKey, ShareValue
from .txn_offsets import PendingOffsets

Offsets = dict[str, dict[tuple[str, int], OffsetCommitValue]]


def replay_into(groups: dict[str, GroupMetadataValue], offsets: Offsets, pending: PendingOffsets,
                record: Record, consumer_groups: dict[str, ConsumerGroup] | None,
                share_groups: dict[str, ShareGroup] | None = None) -> None:
    """Apply one record to durable state (the only place durable state changes). With
    ``consumer_groups`` (``share_groups``) None, consumer (share) group records are skipped: a
    shard's heartbeat applies its records to the live group as it writes them."""
    key = record.key
    if isinstance(key, OffsetCommitKey):
        if record.value is None:
            pending.tombstone(key)
            by_group = offsets.get(key.group)
            if by_group is not None:
                by_group.pop((key.topic, key.partition), None)
                if not by_group:
                    del offsets[key.group]
        elif record.producer_id >= 0:
            assert isinstance(record.value, OffsetCommitValue)
            pending.add(record.producer_id, key, record.value, record.producer_epoch)
        else:
            assert isinstance(record.value, OffsetCommitValue)
            pending.plain_commit(key)
            offsets.setdefault(key.group, {})[(key.topic, key.partition)] = record.value
    elif isinstance(key, TxnMarkerKey):
        assert isinstance(record.value, TxnMarkerValue)
        for k, v in pending.end(key.producer_id, record.value.commit, record.value.producer_epoch,
                                record.value.coordinator_epoch):
            offsets.setdefault(k.group, {})[(k.topic, k.partition)] = v
    elif isinstance(key, GroupMetadataKey):
        if record.value is None:
            groups.pop(key.group, None)
        else:
            assert isinstance(record.value, GroupMetadataValue)
            groups[key.group] = record.value
    elif isinstance(key, ShareKey):
        if share_groups is not None:
            assert record.value is None or isinstance(record.value, ShareValue)
            replay_into_share_groups(share_groups, key, record.value)
    elif consumer_groups is not None:
        value = record.value
        assert isinstance(key, GroupKey | MemberKey) and (value is None or isinstance(value, ConsumerGroupValue))
        replay_into_groups(consumer_groups, key, value)


class DurableImage:
    """Durable state after replaying a log's entries up to (not including) ``next_offset``."""

    __slots__ = ("groups", "offsets", "pending", "consumer_groups", "share_groups", "next_offset")

    def __init__(self) -> None:
        self.groups: dict[str, GroupMetadataValue] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.share_groups: dict[str, ShareGroup] = {}
        self.offsets: Offsets = {}
        self.pending = PendingOffsets()
        self.next_offset = 0

    def replay(self, records: Iterable[Record]) -> None:
        groups, offsets, pending, consumer, share = (self.groups, self.offsets, self.pending, self.consumer_groups,
                                                     self.share_groups)
        for record in records:
            replay_into(groups, offsets, pending, record, consumer, share)
