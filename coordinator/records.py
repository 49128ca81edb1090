"""The durable records of a coordinator partition (Kafka's ``__consumer_offsets`` schemas).

A record is a key and a value; a ``None`` value is a tombstone. Only ``replay`` of
these records changes durable state.
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.consumer_group.records import ConsumerGroupKey, ConsumerGroupValue
from coordinator.share_group.records import ShareKey, ShareValue


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int  # -1 = none
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # only set by OffsetCommit v2-4 retention


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...]


@dataclass(frozen=True, slots=True)
class TxnMarkerKey:
    """The end of a producer's transaction on this partition (Kafka writes a control batch)."""

    producer_id: int


@dataclass(frozen=True, slots=True)
class TxnMarkerValue:
    commit: bool
    coordinator_epoch: int
    producer_epoch: int = -1


# consumer group records (KIP-848, record types 3 and 5-8) and share group records (KIP-932,
# types 10-15) share the log and its compaction
RecordKey = OffsetCommitKey | GroupMetadataKey | TxnMarkerKey | ConsumerGroupKey | ShareKey
RecordValue = OffsetCommitValue | GroupMetadataValue | TxnMarkerValue | ConsumerGroupValue | ShareValue


@dataclass(frozen=True, slots=True)
class Record:
    key: RecordKey
    value: RecordValue | None  # None = tombstone
    producer_id: int = -1  # an offset commit made in this producer's transaction (TxnOffsetCommit)
    producer_epoch: int = -1

    @property
    def is_tombstone(self) -> bool:
        return self.value is None


def empty_group_record(group: str) -> Record:
    """What Kafka writes when a JoinGroup creates a group and nothing else is written."""
    return Record(GroupMetadataKey(group), GroupMetadataValue("", 0, None, None, -1, ()))
