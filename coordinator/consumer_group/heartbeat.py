"""ConsumerGroupHeartbeat on one group, as a pure step (Kafka's GroupMetadataManager decision
table): checks, member metadata, the group epoch, the target assignment, reconciliation, and the
answer. Every change is a record, replayed into the group at once (so the next step of the same
heartbeat sees it) and returned for the log: load = replay.

Not here: the assignment interval (a target is computed on the heartbeat that needs it); the
session and rebalance timers are the caller's (``fence_member`` is what they do when they fire),
and so are the conversions between classic and consumer groups (``coordinator.mixed_groups``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from coordinator.assignors import AssignorError
from coordinator.config import ConsumerConfig
from coordinator.errors import ErrorCode

from . import records as r
from .group import ConsumerGroup
from .heartbeat_request import LEAVE_EPOCH, STATIC_LEAVE_EPOCH, ConsumerHeartbeat, epoch_fenced, invalid
from .member import MemberAssignment, Partitions
from .reconcile import FencedMemberEpoch, Target, reconcile
from .regex import InvalidRegex, compiled, matching
from .target import Subscriber, compute_target

Record = tuple[r.ConsumerGroupKey, r.ConsumerGroupValue | None]
# topic name -> (topic id as hex, partition count): the cluster's topics as the heartbeat sees them
TopicImage = Mapping[str, tuple[str, int]]


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    member_id: str = ""
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None  # topic id (hex) -> partitions; None: not sent
    records: list[Record] = field(default_factory=list)


def _fail(error: ErrorCode, message: str | None = None) -> HeartbeatAnswer:
    return HeartbeatAnswer(error, message)


def subscription_hash(topic_ids: Mapping[str, int]) -> int:
    """A stable signed 64-bit hash of the subscribed topics (id, partition count): what makes a
    metadata change bump the group epoch (Kafka's KIP-1101 hash serves the same purpose)."""
    text = ";".join(f"{t}:{n}" for t, n in sorted(topic_ids.items()))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True) if text else 0


class _Step:
    """The records of one heartbeat, each replayed into the group as it is written."""

    def __init__(self, group: ConsumerGroup) -> None:
        self.group = group
        self.records: list[Record] = []

    def write(self, key: r.ConsumerGroupKey, value: r.ConsumerGroupValue | None) -> None:
        self.group.replay(key, value)
        self.records.append((key, value))

    def remove_member(self, member_id: str) -> None:
        g = self.group.group_id
        self.write(r.MemberKey(r.CURRENT_ASSIGNMENT, g, member_id), None)
        self.write(r.MemberKey(r.TARGET_MEMBER, g, member_id), None)
        self.write(r.MemberKey(r.MEMBER_METADATA, g, member_id), None)


def consumer_heartbeat(group: ConsumerGroup | None, hb: ConsumerHeartbeat, topics: TopicImage, client_id: str,
                       client_host: str, config: ConsumerConfig, new_member_id: Callable[[], str],
                       classic: r.ClassicMemberMetadata | None = None) -> tuple[ConsumerGroup | None, HeartbeatAnswer]:
    """The group after the heartbeat (a new one on a first join) and the answer with its records.
    On an error nothing was written. ``classic``: the heartbeat stands for a classic member's
    JoinGroup (its session timeout and protocols are kept with it)."""
    bad = invalid(hb, config.assignors)
    if bad is not None:
        return group, _fail(*bad)
    if hb.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        return group, _leave(group, hb, config)
    if group is None:
        if hb.member_epoch != 0:
            return None, _fail(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {hb.group_id} not found.")
        group = ConsumerGroup(hb.group_id)
    member_id = hb.member_id or new_member_id()
    static_holder = _instance_holder(group, hb.instance_id)
    if len(group.members) >= config.max_size and member_id not in group.members and static_holder is None:
        return group, _fail(ErrorCode.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity "
                                                              f"of {config.max_size} members.")
    step = _Step(group)
    if hb.instance_id is not None and static_holder is not None and static_holder != member_id:
        holder = group.members[static_holder]
        if hb.member_epoch != 0:
            return group, _fail(ErrorCode.FENCED_INSTANCE_ID, f"Static member {hb.instance_id} is held by another "
                                                              "member.")
        if holder.assignment.epoch != STATIC_LEAVE_EPOCH:
            return group, _fail(ErrorCode.UNRELEASED_INSTANCE_ID, f"Static member {hb.instance_id} is not released.")
        _replace_static(step, static_holder, member_id)
    member = group.members.get(member_id)
    if member is None and hb.member_epoch != 0:
        return group, _fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of the group.")
    if member is not None and epoch_fenced(member.assignment, hb.member_epoch, hb.owned):
        return group, _fail(ErrorCode.FENCED_MEMBER_EPOCH, "The member epoch is fenced.")
    old_assignment = member.assignment if member is not None else MemberAssignment()
    old_meta = member.metadata if member is not None else None
    meta = _updated_metadata(old_meta, hb, client_id, client_host, classic)
    names_changed = old_meta is None or (set(old_meta.subscribed_topic_names), old_meta.subscribed_topic_regex or "") \
        != (set(meta.subscribed_topic_names), meta.subscribed_topic_regex or "")
    regex = meta.subscribed_topic_regex
    if regex and not any(m.metadata is not None and m.metadata.subscribed_topic_regex == regex
                         for mid, m in group.members.items() if mid != member_id):
        try:  # compiled when new to the group, as Kafka does
            compiled(regex)
        except InvalidRegex as e:
            return group, _fail(ErrorCode.INVALID_REGULAR_EXPRESSION,
                                f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}.")

    # Everything is computed before anything is written: a failure leaves the group as it was.
    metas = {m.member_id: m.metadata for m in group.members.values() if m.metadata is not None}
    metas[member_id] = meta
    subscribed = {topics[t][0]: topics[t][1] for m in metas.values() for t in subscribed_names(m, topics)}
    digest = subscription_hash(subscribed)
    epoch = group.epoch + 1 if names_changed or digest != group.metadata_hash else group.epoch
    targets, assignment_epoch, changed_targets = group.targets, group.assignment_epoch, {}
    if assignment_epoch < epoch:
        try:
            new = compute_target(epoch, _subscribers(metas, topics), group.targets,
                                 dict(topics.values()), config.assignors)
        except AssignorError as e:
            return group, _fail(ErrorCode.UNKNOWN_SERVER_ERROR, str(e))
        targets, assignment_epoch, changed_targets = dict(new.targets), epoch, dict(new.changed)
    target_ids = frozenset(topics[t][0] for t in subscribed_names(meta, topics))
    target = Target(assignment_epoch, targets.get(member_id, {}), target_ids, group.partition_epoch)
    try:
        new_assignment = reconcile(old_assignment, target, hb.owned, subscription_changed=names_changed)
    except FencedMemberEpoch:
        return group, _fail(ErrorCode.FENCED_MEMBER_EPOCH, "The member's state is unknown: rejoin.")

    g = group.group_id
    if meta != old_meta:
        step.write(r.MemberKey(r.MEMBER_METADATA, g, member_id), meta)
    if epoch != group.epoch or digest != group.metadata_hash:
        step.write(r.GroupKey(r.GROUP_METADATA, g), r.GroupEpochValue(epoch, digest))
    if changed_targets or assignment_epoch != group.assignment_epoch:
        for mid, t in sorted(changed_targets.items()):
            step.write(r.MemberKey(r.TARGET_MEMBER, g, mid), _target_value(t))
        step.write(r.GroupKey(r.TARGET_METADATA, g), r.TargetEpochValue(assignment_epoch))
    if new_assignment != old_assignment or member is None:
        step.write(*group.assignment_record(member_id, new_assignment))
    changed = new_assignment.partitions() != old_assignment.partitions()
    send = hb.member_epoch == 0 or changed
    return group, HeartbeatAnswer(ErrorCode.NONE, None, member_id, new_assignment.epoch, config.heartbeat_interval_ms,
                                  new_assignment.partitions() if send else None, step.records)


def subscribed_names(meta: r.MemberMetadataValue, topics: TopicImage) -> frozenset[str]:
    """The cluster's topics a member subscribes to: by name, and those its regex matches."""
    names = frozenset(t for t in meta.subscribed_topic_names if t in topics)
    return names | matching(meta.subscribed_topic_regex, topics) if meta.subscribed_topic_regex else names


def _subscribers(metas: Mapping[str, r.MemberMetadataValue], topics: TopicImage) -> dict[str, Subscriber]:
    return {mid: Subscriber(mid, frozenset(topics[t][0] for t in subscribed_names(m, topics)),
                            m.instance_id, m.server_assignor) for mid, m in metas.items()}


def _instance_holder(group: ConsumerGroup, instance_id: str | None) -> str | None:
    if instance_id is None:
        return None
    return next((m.member_id for m in group.members.values()
                 if m.metadata is not None and m.metadata.instance_id == instance_id), None)


def replace_static_member(group: ConsumerGroup, old_id: str, new_id: str) -> list[Record]:
    """The records by which a static member rejoining under a new member id takes over the old
    one's metadata, target and assignment (a classic static member restarts this way)."""
    step = _Step(group)
    _replace_static(step, old_id, new_id)
    return step.records


def _replace_static(step: _Step, old_id: str, new_id: str) -> None:
    """A static member rejoins under a new member id: it takes over the old one's metadata, target
    and assignment, at epoch 0 (Kafka's replaceMember)."""
    g = step.group
    old = g.members[old_id]
    target = g.targets.get(old_id)
    assignment = replace(old.assignment, epoch=0, previous_epoch=0)
    meta = old.metadata
    step.remove_member(old_id)
    if meta is not None:
        step.write(r.MemberKey(r.MEMBER_METADATA, g.group_id, new_id), meta)
    if target is not None:
        step.write(r.MemberKey(r.TARGET_MEMBER, g.group_id, new_id), _target_value(target))
    step.write(*g.assignment_record(new_id, assignment))


def _updated_metadata(old: r.MemberMetadataValue | None, hb: ConsumerHeartbeat, client_id: str,
                      client_host: str, classic: r.ClassicMemberMetadata | None) -> r.MemberMetadataValue:
    base = old or r.MemberMetadataValue(None, None, client_id, client_host, (), None)
    return replace(
        base, client_id=client_id, client_host=client_host, classic=classic,
        instance_id=hb.instance_id if hb.instance_id is not None else base.instance_id,
        rack_id=hb.rack_id if hb.rack_id is not None else base.rack_id,
        rebalance_timeout_ms=hb.rebalance_timeout_ms if hb.rebalance_timeout_ms != -1 else base.rebalance_timeout_ms,
        server_assignor=hb.server_assignor if hb.server_assignor is not None else base.server_assignor,
        subscribed_topic_names=(tuple(sorted(set(hb.subscribed_topic_names)))
                                if hb.subscribed_topic_names is not None else base.subscribed_topic_names),
        subscribed_topic_regex=(hb.subscribed_topic_regex if hb.subscribed_topic_regex is not None
                                else base.subscribed_topic_regex))


def _target_value(target: Partitions) -> r.TargetMemberValue:
    return r.TargetMemberValue(tuple(r.TopicPartitions(bytes.fromhex(t), tuple(sorted(ps)))
                                     for t, ps in sorted(target.items()) if ps))


def _leave(group: ConsumerGroup | None, hb: ConsumerHeartbeat, config: ConsumerConfig) -> HeartbeatAnswer:
    if group is None:
        return _fail(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {hb.group_id} not found.")
    member_id = hb.member_id
    if hb.member_epoch == STATIC_LEAVE_EPOCH:
        holder = _instance_holder(group, hb.instance_id)
        if holder is None:
            return _fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {hb.instance_id} is unknown.")
        if holder != member_id:
            return _fail(ErrorCode.FENCED_INSTANCE_ID, f"Instance id {hb.instance_id} is held by another member.")
        step = _Step(group)
        a = group.members[holder].assignment
        step.write(*group.assignment_record(holder, replace(a, epoch=STATIC_LEAVE_EPOCH, previous_epoch=a.epoch)))
        return HeartbeatAnswer(ErrorCode.NONE, None, member_id, STATIC_LEAVE_EPOCH, config.heartbeat_interval_ms,
                               None, step.records)
    if member_id not in group.members:
        return _fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of the group.")
    return HeartbeatAnswer(ErrorCode.NONE, None, member_id, LEAVE_EPOCH, 0, None, fence_member(group, member_id))


def fence_member(group: ConsumerGroup, member_id: str) -> list[Record]:
    """Remove a member (it left, or its session or rebalance timeout expired): its records go, the
    group epoch moves on so the others get its partitions; an emptied group's target epoch follows."""
    if member_id not in group.members:
        return []
    step = _Step(group)
    step.remove_member(member_id)
    step.write(r.GroupKey(r.GROUP_METADATA, group.group_id), r.GroupEpochValue(group.epoch + 1, group.metadata_hash))
    if not group.members:
        step.write(r.GroupKey(r.TARGET_METADATA, group.group_id), r.TargetEpochValue(group.epoch))
    return step.records
