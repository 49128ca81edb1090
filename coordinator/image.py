"""The durable state a partition's records replay to, kept apart from any shard.

A follower replays committed entries into a ``DurableImage`` as they arrive, so that when
it becomes the leader the shard starts from the image and replays only the entries the
image has not seen: loading is still replay, just done ahead of time.
"""

from __future__ import annotations

from collections.abc import Iterable

from .records import GroupMetadataValue, OffsetCommitKey, OffsetCommitValue, Record

Offsets = dict[str, dict[tuple[str, int], OffsetCommitValue]]


def replay_into(groups: dict[str, GroupMetadataValue], offsets: Offsets, record: Record) -> None:
    """Apply one record to durable state (the only place durable state changes)."""
    key = record.key
    if isinstance(key, OffsetCommitKey):
        if record.value is None:
            by_group = offsets.get(key.group)
            if by_group is not None:
                by_group.pop((key.topic, key.partition), None)
                if not by_group:
                    del offsets[key.group]
        else:
            assert isinstance(record.value, OffsetCommitValue)
            offsets.setdefault(key.group, {})[(key.topic, key.partition)] = record.value
    else:
        if record.value is None:
            groups.pop(key.group, None)
        else:
            assert isinstance(record.value, GroupMetadataValue)
            groups[key.group] = record.value


class DurableImage:
    """Durable state after replaying a log's entries up to (not including) ``next_offset``."""

    __slots__ = ("groups", "offsets", "next_offset")

    def __init__(self) -> None:
        self.groups: dict[str, GroupMetadataValue] = {}
        self.offsets: Offsets = {}
        self.next_offset = 0

    def replay(self, records: Iterable[Record]) -> None:
        groups, offsets = self.groups, self.offsets
        for record in records:
            replay_into(groups, offsets, record)
