"""ConsumerGroupHeartbeat (API 68) as the coordinator reads it, and the checks Kafka makes before
the group is touched (GroupCoordinatorService's static validation and the member epoch check)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from coordinator.errors import ErrorCode

from .member import MemberAssignment, Partitions

LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    api_version: int = 1
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None  # TopicPartitions; None when not sent


def _blank(s: str | None) -> bool:
    return s is not None and not s.strip()


def invalid(hb: ConsumerHeartbeat, assignors: Collection[str]) -> tuple[ErrorCode, str] | None:
    """Why the heartbeat is refused before the group is looked at (Kafka's order), or None."""
    epoch = hb.member_epoch
    if (hb.api_version >= 1 or epoch > 0 or epoch == LEAVE_EPOCH) and not hb.member_id.strip():
        return ErrorCode.INVALID_REQUEST, "MemberId can't be empty."
    if not hb.group_id.strip():
        return ErrorCode.INVALID_REQUEST, "GroupId can't be empty."
    if _blank(hb.instance_id):
        return ErrorCode.INVALID_REQUEST, "InstanceId can't be empty."
    if _blank(hb.rack_id):
        return ErrorCode.INVALID_REQUEST, "RackId can't be empty."
    if epoch == 0:
        if hb.rebalance_timeout_ms == -1:
            return ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."
        if hb.owned is None or any(hb.owned.values()):
            return ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."
        if hb.subscribed_topic_names is None and hb.subscribed_topic_regex is None:
            return ErrorCode.INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
    if epoch == STATIC_LEAVE_EPOCH and hb.instance_id is None:
        return ErrorCode.INVALID_REQUEST, "InstanceId can't be null."
    if epoch < STATIC_LEAVE_EPOCH:
        return ErrorCode.INVALID_REQUEST, f"MemberEpoch is invalid: {epoch}."
    if hb.server_assignor is not None and hb.server_assignor not in assignors:
        return ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {hb.server_assignor} is not supported."
    return None


def epoch_fenced(member: MemberAssignment, request_epoch: int, owned: Partitions | None) -> bool:
    """Kafka's member epoch check: a newer epoch than the member's is fenced; an older one only
    passes if it is the previous epoch and the member reports nothing beyond its assignment (its
    last response was lost)."""
    if request_epoch == 0 or request_epoch == member.epoch:
        return False
    if request_epoch > member.epoch:
        return True
    if request_epoch != member.previous_epoch or owned is None:
        return True
    return not all(p in member.assigned.get(t, {}) for t, ps in owned.items() for p in ps)
