"""ShareGroupHeartbeat on one group, as a pure step (Kafka's GroupMetadataManager for share
groups): checks, member metadata, the share state the subscriptions need (an output: the caller
creates it in the same step), the group epoch, the target assignment over the partitions with
share state, and the member taking its target at once. Every change is a record, replayed into
the group at once and returned for the log: load = replay.

Not here: the assignment interval (a target is computed on the heartbeat that needs it), and
the session timer (the caller's; ``fence_member`` is what it does when it fires).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from coordinator.config import ShareConfig
from coordinator.consumer_group.heartbeat import TopicImage, subscription_hash
from coordinator.errors import ErrorCode

from . import assignor
from . import records as r
from .group import Partitions, ShareGroup, ShareMember, StatePartitions, StateTopic, share_partitions

E = ErrorCode
LEAVE_EPOCH = -1
MAX_MEMBER_ID_LENGTH = 36  # KafkaApis.isMemberIdValid
UNINITIALIZED_START_OFFSET = -1  # share.auto.offset.reset decides

Record = tuple[r.ShareKey, r.ShareValue | None]


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class InitializeState:
    """Share state the group needs created (InitializeShareGroupState): for each topic id, its
    partitions and their start offset (-1: by share.auto.offset.reset; 0: a known topic's new
    partitions start at its beginning)."""

    group_id: str
    state_epoch: int
    topics: Mapping[str, tuple[frozenset[int], int]]


@dataclass(frozen=True, slots=True)
class ShareAnswer:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    member_id: str = ""
    member_epoch: int = LEAVE_EPOCH
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None  # topic id (hex) -> partitions; None: not sent
    records: list[Record] = field(default_factory=list)
    initialize: InitializeState | None = None


def _fail(error: ErrorCode, message: str | None = None) -> ShareAnswer:
    return ShareAnswer(error, message)


def _blank(s: str | None) -> bool:
    return s is not None and not s.strip()


def invalid(hb: ShareHeartbeat) -> tuple[ErrorCode, str] | None:
    """Why the heartbeat is refused before the group is looked at (KafkaApis, then
    GroupCoordinatorService, in their order), or None."""
    if not hb.member_id or len(hb.member_id) > MAX_MEMBER_ID_LENGTH:
        return E.INVALID_REQUEST, "Invalid member id in the request."
    if not hb.member_id.strip():
        return E.INVALID_REQUEST, "MemberId can't be empty."
    if not hb.group_id.strip():
        return E.INVALID_REQUEST, "GroupId can't be empty."
    if _blank(hb.rack_id):
        return E.INVALID_REQUEST, "RackId can't be empty."
    if hb.member_epoch == 0 and not hb.subscribed_topic_names:
        return E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request."
    if hb.member_epoch < LEAVE_EPOCH:
        return E.INVALID_REQUEST, "MemberEpoch is invalid."
    return None


class _Step:
    """The records of one heartbeat, each replayed into the group as it is written."""

    def __init__(self, group: ShareGroup) -> None:
        self.group = group
        self.records: list[Record] = []

    def write(self, key: r.ShareKey, value: r.ShareValue | None) -> None:
        self.group.replay(key, value)
        self.records.append((key, value))


def share_heartbeat(group: ShareGroup | None, hb: ShareHeartbeat, topics: TopicImage, client_id: str,
                    client_host: str, config: ShareConfig, now_ms: int) -> tuple[ShareGroup | None, ShareAnswer]:
    """The group after the heartbeat (a new one on a first join) and the answer with its records
    and the initialization it asks for. On an error nothing was written."""
    bad = invalid(hb)
    if bad is not None:
        return group, _fail(*bad)
    if hb.member_epoch == LEAVE_EPOCH:
        if group is None:
            return None, _fail(E.GROUP_ID_NOT_FOUND, f"Group {hb.group_id} not found.")
        if hb.member_id not in group.members:
            return group, _fail(E.UNKNOWN_MEMBER_ID, f"Member {hb.member_id} is not a member of group {hb.group_id}.")
        return group, ShareAnswer(E.NONE, None, hb.member_id, LEAVE_EPOCH, 0, None,
                                  fence_member(group, hb.member_id, topics, now_ms))
    if group is None:
        if hb.member_epoch != 0:
            return None, _fail(E.GROUP_ID_NOT_FOUND, f"Share group {hb.group_id} not found.")
        group = ShareGroup(hb.group_id)
    member_id = hb.member_id
    if len(group.members) >= config.max_size and member_id not in group.members:
        return group, _fail(E.GROUP_MAX_SIZE_REACHED,
                            f"The share group has reached its maximum capacity of {config.max_size} members.")
    member = group.members.get(member_id)
    if member is None:
        if hb.member_epoch != 0:
            return group, _fail(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {hb.group_id}.")
        member = ShareMember(member_id)
    elif hb.member_epoch != 0 and (hb.member_epoch > member.epoch or (
            hb.member_epoch < member.epoch and hb.member_epoch != member.previous_epoch)):
        return group, _fail(E.FENCED_MEMBER_EPOCH, _fenced_message(hb.member_epoch, member))

    old_meta = member.metadata
    base = old_meta or r.ShareMemberValue(None, client_id, client_host, ())
    meta = replace(base, client_id=client_id, client_host=client_host,
                   rack_id=hb.rack_id if hb.rack_id is not None else base.rack_id,
                   subscribed_topic_names=(tuple(sorted(set(hb.subscribed_topic_names)))
                                           if hb.subscribed_topic_names is not None else base.subscribed_topic_names))
    subscription_changed = old_meta is None or set(old_meta.subscribed_topic_names) != set(meta.subscribed_topic_names)
    step = _Step(group)
    g = group.group_id
    if meta != old_meta:
        step.write(r.ShareMemberKey(r.MEMBER_METADATA, g, member_id), meta)
    names = group.subscribed_names()
    init = _initialize(step, names, topics)
    bump = subscription_changed
    if group.assignment_epoch >= group.epoch:
        bump = bump or _initialized_assignment_pending(group, topics)
    digest = subscription_hash({topics[t][0]: topics[t][1] for t in names if t in topics})
    epoch = group.epoch
    if bump or digest != group.metadata_hash:
        epoch += 1
        step.write(r.ShareGroupKey(r.GROUP_METADATA, g), r.ShareEpochValue(epoch, digest))

    if group.assignment_epoch < epoch:
        _new_target(step, epoch, topics, now_ms)
    member = group.members[member_id]
    target = {t: ps for t, ps in group.targets.get(member_id, {}).items()
              if t in {topics[n][0] for n in meta.subscribed_topic_names if n in topics}}
    before = (member.epoch, member.previous_epoch, dict(member.assigned))
    if group.assignment_epoch != member.epoch:
        updated = replace(member, epoch=group.assignment_epoch, previous_epoch=member.epoch, assigned=target)
    elif subscription_changed:
        updated = replace(member, assigned=target)
    else:
        updated = member
    if (updated.epoch, updated.previous_epoch, dict(updated.assigned)) != before or not member.has_assignment:
        step.write(*group.assignment_record(updated))
    member = group.members[member_id]
    send = hb.member_epoch == 0 or hb.subscribed_topic_names is not None or dict(member.assigned) != before[2]
    if init is not None:
        init = replace(init, state_epoch=group.epoch)
    return group, ShareAnswer(E.NONE, None, member_id, member.epoch, config.heartbeat_interval_ms,
                              dict(member.assigned) if send else None, step.records, init)


def _fenced_message(epoch: int, member: ShareMember) -> str:
    if epoch > member.epoch:
        return (f"The share group member has a greater member epoch ({epoch}) than the one known by the group "
                f"coordinator ({member.epoch}). The member must abandon all its partitions and rejoin.")
    return (f"The share group member has a smaller member epoch ({epoch}) than the one known by the group "
            f"coordinator ({member.epoch}), and it does not match the previous member epoch "
            f"({member.previous_epoch}). The member must abandon all its partitions and rejoin.")


def _initialized_assignment_pending(group: ShareGroup, topics: TopicImage) -> bool:
    """Kafka's initializedAssignmentPending: a subscribed topic has initialized partitions that
    the target does not cover exactly (they were initialized after the last target). A topic
    deleted since (its id gone from the cluster) is no longer assignable: it counts for nothing."""
    sp = group.state_partitions
    if not group.members or sp is None or not sp.initialized:
        return False
    names = {n for n in group.subscribed_names() if n in topics}
    live = {tid: count for tid, count in topics.values()}
    assigned: dict[str, set[int]] = {}
    for target in group.targets.values():
        for t, ps in target.items():
            assigned.setdefault(t, set()).update(ps)
    return any(v.name in names and t in live and assigned.get(t) != {p for p in v.partitions if p < live[t]}
               for t, v in sp.initialized.items())


def _new_target(step: _Step, epoch: int, topics: TopicImage, now_ms: int) -> None:
    group = step.group
    initialized = group.state_partitions.initialized if group.state_partitions is not None else {}
    subscriptions = {mid: frozenset(topics[n][0] for n in m.metadata.subscribed_topic_names if n in topics)
                     for mid, m in group.members.items() if m.metadata is not None}
    counts = {tid: n for tid, n in topics.values()}
    assignable = {t: frozenset(p for p in v.partitions if p < counts.get(t, 0)) for t, v in initialized.items()}
    targets = assignor.assign(subscriptions, assignable, group.targets)
    g = group.group_id
    for mid in sorted(targets):
        if dict(group.targets.get(mid, {})) != {t: ps for t, ps in targets[mid].items() if ps}:
            step.write(r.ShareMemberKey(r.TARGET_MEMBER, g, mid), r.ShareTargetMemberValue(share_partitions(targets[mid])))
    step.write(r.ShareGroupKey(r.TARGET_METADATA, g), r.ShareTargetEpochValue(epoch, now_ms))


def _initialize(step: _Step, names: set[str], topics: TopicImage) -> InitializeState | None:
    """The subscribed partitions with no share state yet (Kafka's subscribedTopicsChangeMap): the
    group's state-partition record counts them initialized, and the caller creates their state in
    the same step (kcoord's group coordinator keeps its groups' share state itself, so there is
    no initializing phase to wait out or retry)."""
    group = step.group
    sp = group.state_partitions or StatePartitions()
    wanted: dict[str, StateTopic] = {}
    for name in sorted(names):
        if name not in topics:
            continue
        tid, count = topics[name]
        have = sp.initialized[tid].partitions if tid in sp.initialized else frozenset()
        missing = frozenset(range(count)) - have
        if missing:
            wanted[tid] = StateTopic(name, missing)
    if not wanted:
        return None
    initialized = dict(sp.initialized)
    for t, v in wanted.items():
        prior = initialized.get(t)
        initialized[t] = StateTopic(v.name, v.partitions | (prior.partitions if prior else frozenset()))
    deleting = {t: n for t, n in sp.deleting.items() if t not in wanted}
    step.write(r.ShareGroupKey(r.STATE_PARTITIONS, group.group_id),
               StatePartitions(dict(sp.initializing), initialized, deleting).value())
    # new partitions of a topic the group knows start at 0, so nothing produced meanwhile is
    # skipped; a topic new to the group starts where share.auto.offset.reset says
    return InitializeState(group.group_id, group.epoch,
                           {t: (v.partitions, 0 if t in sp.initialized else UNINITIALIZED_START_OFFSET)
                            for t, v in wanted.items()})


def fence_member(group: ShareGroup, member_id: str, topics: TopicImage, now_ms: int) -> list[Record]:
    """Remove a member (it left, or its session expired): its records go and the group epoch
    moves on with the hash of what the others subscribe to; an emptied group's target epoch
    follows (Kafka's shareGroupFenceMember)."""
    if member_id not in group.members:
        return []
    step = _Step(group)
    g = group.group_id
    step.write(r.ShareMemberKey(r.CURRENT_ASSIGNMENT, g, member_id), None)
    step.write(r.ShareMemberKey(r.TARGET_MEMBER, g, member_id), None)
    step.write(r.ShareMemberKey(r.MEMBER_METADATA, g, member_id), None)
    names = group.subscribed_names()
    digest = subscription_hash({topics[t][0]: topics[t][1] for t in names if t in topics})
    step.write(r.ShareGroupKey(r.GROUP_METADATA, g), r.ShareEpochValue(group.epoch + 1, digest))
    if not group.members:
        step.write(r.ShareGroupKey(r.TARGET_METADATA, g), r.ShareTargetEpochValue(group.epoch, 0))
    return step.records
