"""The share group records Kafka writes to ``__consumer_offsets`` (record types 10-15): each
member's metadata, the group epoch, the target assignment (its epoch and one record per member),
each member's current assignment, and the group's share-state partitions (initializing,
initialized, deleting). A ``None`` value is a tombstone. Topics are topic ids (16 bytes).

And one of kcoord's own, type 100: the share state of one of the group's topic-partitions (which
records are acknowledged, archived or available again, from which start offset), in the layout of
Kafka's ShareSnapshotValue. Kafka keeps that in ``__share_group_state``, a topic of its own with
its own coordinator, as snapshots and deltas; kcoord's group coordinator keeps its groups' share
state beside them, always as a whole snapshot, so that compaction (the latest record per key)
keeps exactly the current state."""

from __future__ import annotations

from dataclasses import dataclass

MEMBER_METADATA, GROUP_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, STATE_PARTITIONS = (
    10, 11, 12, 13, 14, 15)
SHARE_STATE = 100
GROUP_TYPES = frozenset({GROUP_METADATA, TARGET_METADATA, STATE_PARTITIONS})
MEMBER_TYPES = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT})
TYPES = GROUP_TYPES | MEMBER_TYPES | {SHARE_STATE}


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


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    """The key of a topic-partition's share state (type 100)."""

    group: str
    topic_id: bytes  # 16 bytes
    partition: int

    @property
    def record_type(self) -> int:
        return SHARE_STATE


@dataclass(frozen=True, slots=True)
class StateBatch:
    """Offsets first..last (inclusive) in one delivery state with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: int  # 0 available, 2 acknowledged, 4 archived
    delivery_count: int


@dataclass(frozen=True, slots=True)
class SharePartitionState:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int  # -1: not yet chosen (share.auto.offset.reset decides at the first fetch)
    create_timestamp: int
    write_timestamp: int
    batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = -1  # tagged (KIP-1226)


ShareKey = ShareGroupKey | ShareMemberKey | ShareStateKey
ShareValue = (ShareEpochValue | ShareMemberValue | ShareTargetEpochValue | ShareTargetMemberValue
              | ShareAssignmentValue | ShareStateValue | SharePartitionState)
