"""Version-free requests and responses of the group and offset APIs.

The wire layer turns a versioned Kafka message into one of these and back. Fields
that change behaviour by API version are carried as explicit flags.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from .consumer_group.heartbeat import TopicImage
from .consumer_group.heartbeat_request import ConsumerHeartbeat
from .consumer_group.member import Partitions
from .errors import ErrorCode
from .share_group.heartbeat import ShareHeartbeat
from .share_group.records import SharePartitionState, StateBatch

# ---------------------------------------------------------------- JoinGroup


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    reason: str | None = None
    require_known_member_id: bool = True  # v4+ (KIP-394)
    supports_skip_assignment: bool = False  # v9+
    topics: TopicImage | None = None  # the cluster's topics, for a classic member of a consumer group


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinGroupMember, ...] = ()


# ---------------------------------------------------------------- SyncGroup


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()
    topics: TopicImage | None = None  # the cluster's topics, for a classic member of a consumer group


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


# ---------------------------------------------------------------- Heartbeat


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error: ErrorCode


# ---------------------------------------------------------------- LeaveGroup


@dataclass(frozen=True, slots=True)
class LeaveMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[LeaveMember, ...]


@dataclass(frozen=True, slots=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    error: ErrorCode
    members: tuple[LeaveMemberResult, ...] = ()


# ---------------------------------------------------------------- OffsetCommit


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp: int = -1  # v1 only


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    group_id: str
    topics: tuple[tuple[str, tuple[PartitionCommit, ...]], ...]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    retention_time_ms: int = -1  # v2-4
    group_id_not_found_error: bool = False  # v9+: GROUP_ID_NOT_FOUND instead of ILLEGAL_GENERATION
    # v9+: the member epoch (in generation_id) of a consumer group member, and topic name -> id (hex),
    # by which the commit's partitions are matched against the member's assignment
    topic_ids: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    topics: tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...]


# ---------------------------------------------------------------- OffsetFetch


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...] | None  # None = all partitions
    require_stable: bool = False
    member_id: str | None = None  # v9+: a consumer group member checks its epoch
    member_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    error: ErrorCode
    topics: tuple[tuple[str, tuple[FetchedOffset, ...]], ...] = ()


# ---------------------------------------------------------------- admin


@dataclass(frozen=True, slots=True)
class DescribeGroupsRequest:
    group_id: str


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribeGroupsResponse:
    error: ErrorCode
    group_id: str
    state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()
    # Kafka's v6 answer: GROUP_ID_NOT_FOUND and why (the API layer answers NONE below v6)
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class ListGroupsRequest:
    states_filter: tuple[str, ...] = ()
    types_filter: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class ListGroupsResponse:
    error: ErrorCode
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteGroupsRequest:
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeleteGroupsResponse:
    results: tuple[tuple[str, ErrorCode], ...]


@dataclass(frozen=True, slots=True)
class OffsetDeleteRequest:
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class OffsetDeleteResponse:
    error: ErrorCode
    topics: tuple[tuple[str, tuple[tuple[int, ErrorCode], ...]], ...] = ()


# ---------------------------------------------------------------- transactions


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitRequest:
    """Offsets committed inside a producer's transaction (sendOffsetsToTransaction)."""

    group_id: str
    producer_id: int
    producer_epoch: int
    topics: tuple[tuple[str, tuple[PartitionCommit, ...]], ...]
    generation_id: int = -1  # v3+ (KIP-447); older clients send no member information
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class EndTxnMarkerRequest:
    """The transaction coordinator's marker for this partition (WriteTxnMarkers)."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


@dataclass(frozen=True, slots=True)
class EndTxnMarkerResponse:
    error: ErrorCode


# ---------------------------------------------------------------- consumer groups (KIP-848)

@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatRequest:
    heartbeat: ConsumerHeartbeat
    topics: TopicImage
    client_id: str = ""
    client_host: str = ""

    @property
    def group_id(self) -> str:
        return self.heartbeat.group_id


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResponse:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None  # topic id (hex) -> partitions; None: unchanged


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribeRequest:
    group_id: str
    topics: TopicImage


@dataclass(frozen=True, slots=True)
class DescribedTopicPartitions:
    topic_id: str  # hex
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    classic: bool = False  # a classic-protocol member inside the consumer group


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribeResponse:
    error: ErrorCode
    group_id: str
    message: str | None = None
    state: str = ""
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()



# ---------------------------------------------------------------- share groups (KIP-932)

@dataclass(frozen=True, slots=True)
class ShareGroupHeartbeatRequest:
    heartbeat: ShareHeartbeat
    topics: TopicImage
    client_id: str = ""
    client_host: str = ""

    @property
    def group_id(self) -> str:
        return self.heartbeat.group_id


@dataclass(frozen=True, slots=True)
class ShareGroupHeartbeatResponse:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None  # topic id (hex) -> partitions; None: unchanged


@dataclass(frozen=True, slots=True)
class ShareGroupDescribeRequest:
    group_id: str
    topics: TopicImage


@dataclass(frozen=True, slots=True)
class DescribedShareMember:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: tuple[DescribedTopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupDescribeResponse:
    error: ErrorCode
    group_id: str
    message: str | None = None
    state: str = ""
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor: str = ""
    members: tuple[DescribedShareMember, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareStateRequest:
    """A share partition leader's read or write of one topic-partition's share state (Kafka's
    ReadShareGroupState / WriteShareGroupState to the share coordinator; here the group's own
    coordinator keeps it). ``write``: None reads (and records ``leader_epoch``)."""

    group_id: str
    topic_id: str  # hex
    partition: int
    leader_epoch: int
    write: ShareStateWrite | None = None


@dataclass(frozen=True, slots=True)
class ShareStateWrite:
    start_offset: int
    batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


@dataclass(frozen=True, slots=True)
class ShareStateResponse:
    error: ErrorCode
    message: str | None = None
    state: SharePartitionState | None = None  # a read's answer


@dataclass(frozen=True, slots=True)
class ShareOffsetsRequest:
    """DescribeShareGroupOffsets for one group: ``topics`` (topic id hex, partitions) or None for
    every partition the group has share state for."""

    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...] | None


@dataclass(frozen=True, slots=True)
class ShareOffset:
    topic_id: str  # hex
    partition: int
    start_offset: int  # -1: no share state
    leader_epoch: int
    delivery_complete_count: int  # -1: unknown


@dataclass(frozen=True, slots=True)
class ShareOffsetsResponse:
    error: ErrorCode
    offsets: tuple[ShareOffset, ...] = ()

Request = (
    JoinGroupRequest
    | SyncGroupRequest
    | HeartbeatRequest
    | LeaveGroupRequest
    | OffsetCommitRequest
    | OffsetFetchRequest
    | DescribeGroupsRequest
    | ListGroupsRequest
    | DeleteGroupsRequest
    | OffsetDeleteRequest
    | TxnOffsetCommitRequest
    | EndTxnMarkerRequest
    | ConsumerGroupHeartbeatRequest
    | ConsumerGroupDescribeRequest
    | ShareGroupHeartbeatRequest
    | ShareGroupDescribeRequest
    | ShareStateRequest
    | ShareOffsetsRequest
)


Response = (
    JoinGroupResponse
    | SyncGroupResponse
    | HeartbeatResponse
    | LeaveGroupResponse
    | OffsetCommitResponse
    | OffsetFetchResponse
    | DescribeGroupsResponse
    | ListGroupsResponse
    | DeleteGroupsResponse
    | OffsetDeleteResponse
    | EndTxnMarkerResponse
    | ConsumerGroupHeartbeatResponse
    | ConsumerGroupDescribeResponse
    | ShareGroupHeartbeatResponse
    | ShareGroupDescribeResponse
    | ShareStateResponse
    | ShareOffsetsResponse
)


@dataclass(frozen=True, slots=True)
class RequestKind:
    """What the runtime knows of a request type, in one place: whether its answer is read from
    the coordinator's state (then the lease is checked again before the answer leaves; a write's
    answer is made durable by its own append) and its answer when it fails as a whole (routing,
    loading, unload)."""

    reads: bool
    error: Callable[[Any, ErrorCode], Response]


def _commit_error(request: OffsetCommitRequest | TxnOffsetCommitRequest, error: ErrorCode) -> Response:
    return OffsetCommitResponse(tuple((t, tuple((p.partition, error) for p in ps)) for t, ps in request.topics))


REQUESTS: Mapping[type, RequestKind] = {
    JoinGroupRequest: RequestKind(True, lambda r, e: JoinGroupResponse(e)),
    SyncGroupRequest: RequestKind(True, lambda r, e: SyncGroupResponse(e)),
    HeartbeatRequest: RequestKind(True, lambda r, e: HeartbeatResponse(e)),
    LeaveGroupRequest: RequestKind(False, lambda r, e: LeaveGroupResponse(e)),
    OffsetCommitRequest: RequestKind(False, _commit_error),
    TxnOffsetCommitRequest: RequestKind(False, _commit_error),
    OffsetFetchRequest: RequestKind(True, lambda r, e: OffsetFetchResponse(e)),
    DescribeGroupsRequest: RequestKind(True, lambda r, e: DescribeGroupsResponse(e, r.group_id, state="")),
    ListGroupsRequest: RequestKind(True, lambda r, e: ListGroupsResponse(e)),
    DeleteGroupsRequest: RequestKind(False, lambda r, e: DeleteGroupsResponse(tuple((g, e) for g in r.group_ids))),
    OffsetDeleteRequest: RequestKind(False, lambda r, e: OffsetDeleteResponse(e)),
    EndTxnMarkerRequest: RequestKind(False, lambda r, e: EndTxnMarkerResponse(e)),
    ConsumerGroupHeartbeatRequest: RequestKind(False, lambda r, e: ConsumerGroupHeartbeatResponse(e)),
    ConsumerGroupDescribeRequest: RequestKind(True, lambda r, e: ConsumerGroupDescribeResponse(e, r.group_id)),
    ShareGroupHeartbeatRequest: RequestKind(False, lambda r, e: ShareGroupHeartbeatResponse(e)),
    ShareGroupDescribeRequest: RequestKind(True, lambda r, e: ShareGroupDescribeResponse(e, r.group_id)),
    ShareStateRequest: RequestKind(False, lambda r, e: ShareStateResponse(e)),
    ShareOffsetsRequest: RequestKind(True, lambda r, e: ShareOffsetsResponse(e)),
}


def check_covers(table: Mapping[type, object], what: str) -> None:
    """Raise at import when ``table`` does not have exactly one entry per request type."""
    missing, extra = set(get_args(Request)) - set(table), set(table) - set(get_args(Request))
    if missing or extra:
        raise TypeError(f"{what}: no entry for {sorted(t.__name__ for t in missing)}, "
                        f"entries for no request {sorted(t.__name__ for t in extra)}")


check_covers(REQUESTS, "commands.REQUESTS")


def kind_of(request: Request) -> RequestKind:
    return REQUESTS[type(request)]


def error_response(request: Request, error: ErrorCode) -> Response:
    """The answer to ``request`` when it fails as a whole (routing, loading, unload)."""
    return kind_of(request).error(request, error)
