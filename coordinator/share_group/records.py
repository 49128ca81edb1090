"""The share group records Kafka writes to ``__consumer_offsets`` (record types 10-15): each
member's metadata, the group epoch, the target assignment (its epoch and one record per member),
each member's current assignment, and the group's share-state partitions (initializing,
initialized, deleting). A ``None`` value is a tombstone. Topics are topic ids (16 bytes)."""

from __future__ import annotations

from dataclasses import dataclass

MEMBER_METADATA, GROUP_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, STATE_PARTITIONS = (
    10, 11, 12, 13, 14, 15)
GROUP_TYPES = frozenset({GROUP_METADATA, TARGET_METADATA, STATE_PARTITIONS})
MEMBER_TYPES = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT})
TYPES = GROUP_TYPES | MEMBER_TYPES


@dataclass(frozen=True, slots=True)
class ShareGroupKey:
    """The key of a group-wide record (11 epoch, 12 target epoch, 15 state partitions)."""

    record_type: int
    group: str


@dataclass(frozen=True, slots=True)
class ShareMemberKey:
    """The key of a per-member record (10 metadata, 13 target, 14 current assignment)."""

    record_type: int
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareEpochValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class ShareMemberValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]  # written sorted


@dataclass(frozen=True, slots=True)
class ShareTargetEpochValue:
    assignment_epoch: int
    assignment_timestamp: int = 0  # tagged (KIP-1263)


@dataclass(frozen=True, slots=True)
class SharePartitions:
    topic_id: bytes  # 16 bytes
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ShareTargetMemberValue:
    partitions: tuple[SharePartitions, ...]


@dataclass(frozen=True, slots=True)
class ShareAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # MemberState's byte (a share member is always STABLE)
    assigned: tuple[SharePartitions, ...]


@dataclass(frozen=True, slots=True)
class StateTopic:
    """A topic of the state-partition record: its id, name and (but for deleting) partitions."""

    topic_id: bytes
    name: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareStateValue:
    initializing: tuple[StateTopic, ...]
    initialized: tuple[StateTopic, ...]
    deleting: tuple[StateTopic, ...]  # partitions not written


ShareKey = ShareGroupKey | ShareMemberKey
ShareValue = (ShareEpochValue | ShareMemberValue | ShareTargetEpochValue | ShareTargetMemberValue
              | ShareAssignmentValue | ShareStateValue)
