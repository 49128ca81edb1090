"""The consumer group records Kafka writes to ``__consumer_offsets`` (record types 3, 5, 6, 7 and 8):
the group epoch, each member's metadata, the target assignment (its epoch and one record per
member), and each member's current assignment. A ``None`` value is a tombstone. Topics are named
by their topic id (16 bytes), as in Kafka."""

from __future__ import annotations

from dataclasses import dataclass

GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 3, 5, 6, 7, 8


@dataclass(frozen=True, slots=True)
class GroupKey:
    """The key of a group-wide record (type 3: epoch, type 6: target assignment epoch)."""

    record_type: int
    group: str


@dataclass(frozen=True, slots=True)
class MemberKey:
    """The key of a per-member record (type 5: metadata, 7: target, 8: current assignment)."""

    record_type: int
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class GroupEpochValue:
    epoch: int
    metadata_hash: int = 0  # tagged (KIP-1101)


@dataclass(frozen=True, slots=True)
class ClassicProtocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """Set only for a member that speaks the classic protocol inside a consumer group."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]  # written sorted
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic: ClassicMemberMetadata | None = None  # tagged, tag 0


@dataclass(frozen=True, slots=True)
class TargetEpochValue:
    assignment_epoch: int
    assignment_timestamp: int = 0  # tagged (KIP-1263)


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    topic_id: bytes  # 16 bytes
    partitions: tuple[int, ...]
    # tagged, aligned with partitions (KIP-1251; current assignments only): () when not written
    assignment_epochs: tuple[int, ...] | None = ()


@dataclass(frozen=True, slots=True)
class TargetMemberValue:
    partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # MemberState's byte
    assigned: tuple[TopicPartitions, ...]
    pending_revocation: tuple[TopicPartitions, ...]


ConsumerGroupKey = GroupKey | MemberKey
ConsumerGroupValue = GroupEpochValue | MemberMetadataValue | TargetEpochValue | TargetMemberValue | CurrentAssignmentValue
