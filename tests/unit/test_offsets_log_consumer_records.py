"""Consumer group records (KIP-848) in the ``__consumer_offsets`` log: entries carry them through
encoding, replay of the classic image leaves them alone (a consumer group's tombstone must not
delete a classic group of the same name), and compaction keeps the latest of each."""

from __future__ import annotations

from cluster.offsets_compaction import compact_offsets
from coordinator.codec import decode_batch, encode_batch
from coordinator.consumer_group import records as cr
from coordinator.consumer_group.group import ConsumerGroup, deletion_records
from coordinator.image import replay_into
from coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from coordinator.txn_offsets import PendingOffsets

FOO = bytes(range(16))


def consumer_records(group: str) -> list[Record]:
    return [
        Record(cr.MemberKey(cr.MEMBER_METADATA, group, "m"),
               cr.MemberMetadataValue(None, None, "c", "/h", ("foo",), None, 45000)),
        Record(cr.GroupKey(cr.GROUP_METADATA, group), cr.GroupEpochValue(1)),
        Record(cr.MemberKey(cr.TARGET_MEMBER, group, "m"), cr.TargetMemberValue((cr.TopicPartitions(FOO, (0,)),))),
        Record(cr.GroupKey(cr.TARGET_METADATA, group), cr.TargetEpochValue(1)),
        Record(cr.MemberKey(cr.CURRENT_ASSIGNMENT, group, "m"),
               cr.CurrentAssignmentValue(1, 0, 0, (cr.TopicPartitions(FOO, (0,), (1,)),), ())),
    ]


def test_entries_carry_consumer_group_records() -> None:
    records = [Record(OffsetCommitKey("g", "foo", 0), OffsetCommitValue(5, -1, "", 1)), *consumer_records("g")]
    assert decode_batch(encode_batch(records)) == records


def test_consumer_and_classic_groups_replay_apart() -> None:
    """A consumer group's records build the consumer group, never the classic one of the same
    name, and each kind's tombstone removes only its own kind."""
    groups: dict[str, GroupMetadataValue] = {"g": GroupMetadataValue("consumer", 3, "range", "m", 1, ())}
    offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = {}
    consumer: dict[str, ConsumerGroup] = {}
    for r in consumer_records("g"):
        replay_into(groups, offsets, PendingOffsets(), r, consumer)
    assert set(groups) == {"g"} and offsets == {} and set(consumer["g"].members) == {"m"}
    assert consumer["g"].members["m"].assignment.epoch == 1
    for key, value in deletion_records(consumer["g"]):
        replay_into(groups, offsets, PendingOffsets(), Record(key, value), consumer)
    assert consumer == {} and set(groups) == {"g"}
    replay_into(groups, offsets, PendingOffsets(), Record(GroupMetadataKey("g"), None), consumer)
    assert groups == {}


def test_without_consumer_groups_their_records_are_skipped() -> None:
    groups: dict[str, GroupMetadataValue] = {}
    offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = {}
    for r in consumer_records("g"):
        replay_into(groups, offsets, PendingOffsets(), r, None)
    assert groups == {} and offsets == {}


def test_compaction_keeps_the_latest_of_each_and_drops_the_removed() -> None:
    first = consumer_records("g")
    gone = [Record(cr.MemberKey(cr.CURRENT_ASSIGNMENT, "g", "m"), None),
            Record(cr.MemberKey(cr.TARGET_MEMBER, "g", "m"), None),
            Record(cr.MemberKey(cr.MEMBER_METADATA, "g", "m"), None),
            Record(cr.GroupKey(cr.GROUP_METADATA, "g"), cr.GroupEpochValue(2))]
    out = [r for payload in compact_offsets([encode_batch(first), encode_batch(gone)]) for r in decode_batch(payload)]
    assert out == [Record(cr.GroupKey(cr.TARGET_METADATA, "g"), cr.TargetEpochValue(1)),
                   Record(cr.GroupKey(cr.GROUP_METADATA, "g"), cr.GroupEpochValue(2))]
