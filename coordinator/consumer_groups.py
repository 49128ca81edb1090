"""Kafka's consumer group protocol (KIP-848) on one shard: ConsumerGroupHeartbeat and
ConsumerGroupDescribe, the session and rebalance timers, and what the shard's group-wide
operations (ListGroups, DeleteGroups, offset validation and expiry) need from consumer groups.

A consumer group is durable state only: the heartbeat (``consumer_group.heartbeat``) applies each
record to the live group as it writes it, so the shard does not replay these records again when
the step ends; loading a partition replays them (load = replay). A group id names a classic or a
consumer group, never both: an empty classic group (e.g. one holding only offsets) is replaced by
a consumer group when a member joins with the consumer protocol, as in Kafka.

Classic members inside consumer groups and the online upgrade are ``coordinator.mixed_groups``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from . import commands as c
from .config import GroupConfig
from .consumer_group import records as r
from .consumer_group.group import ConsumerGroup, Member, deletion_records
from .consumer_group.heartbeat import TopicImage, consumer_heartbeat, fence_member
from .consumer_group.heartbeat_request import LEAVE_EPOCH, STATIC_LEAVE_EPOCH
from .consumer_group.member import MemberState, Owned, Partitions
from .consumer_group.regex import matching
from .consumer_group.target import Subscriber, preferred_assignor
from .errors import ErrorCode
from .group import ClassicGroup
from .group import GroupState as ClassicState
from .records import GroupMetadataKey, Record
from .timers import TimerKind, TimerSet, classic_join_key, rebalance_key, session_key
from .write_context import WriteContext

E = ErrorCode
CONSUMER = "consumer"


class ConsumerGroupHandlers:
    def __init__(self, config: GroupConfig, new_id: Callable[[], str], groups: dict[str, ConsumerGroup],
                 classic_groups: dict[str, ClassicGroup], drop_classic: Callable[[str], None], timers: TimerSet,
                 w: WriteContext) -> None:
        self.config = config
        self.new_id = new_id
        self.groups = groups
        self.classic_groups = classic_groups
        self._drop_classic = drop_classic  # forgets a classic group and its timers
        self.timers = timers
        self.w = w
        # called after members were fenced: the online downgrade (coordinator.mixed_groups)
        self.after_fence: Callable[[str], None] = lambda group_id: None
        # the cluster's topics as the last request that carried them saw them: what the regexes of
        # the groups match for offset expiry and OffsetDelete (soft state)
        self.topics: TopicImage = {}

    # ================================================================ ConsumerGroupHeartbeat

    def heartbeat(self, req: c.ConsumerGroupHeartbeatRequest) -> c.ConsumerGroupHeartbeatResponse:
        hb = req.heartbeat
        self.topics = req.topics
        classic = self.classic_groups.get(hb.group_id)
        if classic is not None and not classic.is_in(ClassicState.DEAD):
            if not classic.is_in(ClassicState.EMPTY) or hb.member_epoch != 0:
                # a heartbeat at an epoch, or a classic group the shard could not upgrade
                return c.ConsumerGroupHeartbeatResponse(E.GROUP_ID_NOT_FOUND,
                                                        f"Group {hb.group_id} is not a consumer group.")
        group = self.groups.get(hb.group_id)
        new_group, answer = consumer_heartbeat(group, hb, req.topics, req.client_id, req.client_host,
                                               self.config.consumer_of(hb.group_id), self.new_id)
        if answer.error is not E.NONE:
            return c.ConsumerGroupHeartbeatResponse(answer.error, answer.message)
        if classic is not None and answer.records:
            # the empty classic group gives way; its offsets stay with the group id
            self.w.write(Record(GroupMetadataKey(hb.group_id), None))
            self._drop_classic(hb.group_id)
        if new_group is not None and group is None and answer.records:
            self.groups[hb.group_id] = new_group
        for key, value in answer.records:
            self.w.write(Record(key, value))
        self._arm_timers(hb.group_id, answer.member_id, hb.member_epoch, changed=bool(answer.records))
        if hb.member_epoch == LEAVE_EPOCH:
            self.after_fence(hb.group_id)
        return c.ConsumerGroupHeartbeatResponse(E.NONE, None, answer.member_id, answer.member_epoch,
                                                answer.heartbeat_interval_ms, answer.assignment)

    def _arm_timers(self, group_id: str, member_id: str, request_epoch: int, changed: bool) -> None:
        if request_epoch == LEAVE_EPOCH:
            self.cancel_timers(group_id, member_id)
            return
        if request_epoch == STATIC_LEAVE_EPOCH:
            return  # the session timer runs on: a static member that does not come back is fenced
        member = self.groups[group_id].members[member_id]
        self.arm_session(group_id, member)
        if member.assignment.state is not MemberState.UNREVOKED_PARTITIONS:
            self.timers.cancel(rebalance_key(group_id, member_id))
        elif changed or rebalance_key(group_id, member_id) not in self.timers:
            timeout = member.metadata.rebalance_timeout_ms if member.metadata is not None else -1
            self.w.schedule(rebalance_key(group_id, member_id), max(timeout, 0), TimerKind.CONSUMER_REBALANCE,
                            group_id, member_id, (member.assignment.epoch,))

    def arm_session(self, group_id: str, member: Member) -> None:
        """A classic member's own session timeout, or the group's (its consumer.session.timeout.ms,
        else group.consumer.session.timeout.ms)."""
        classic = member.metadata.classic if member.metadata is not None else None
        self.w.schedule(session_key(group_id, member.member_id),
                        classic.session_timeout_ms if classic else self.config.consumer_of(group_id).session_timeout_ms,
                        TimerKind.CONSUMER_SESSION, group_id, member.member_id)

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        self.timers.cancel(session_key(group_id, member_id))
        self.timers.cancel(rebalance_key(group_id, member_id))
        self.timers.cancel(classic_join_key(group_id, member_id))

    def write(self, group: ConsumerGroup, key: r.ConsumerGroupKey, value: r.ConsumerGroupValue | None) -> None:
        """Apply a record to the live group and append it (load = replay)."""
        group.replay(key, value)
        self.w.write(Record(key, value))

    # ================================================================ timers

    def arm_loaded(self) -> None:
        """Kafka's onLoaded: a full session timeout for every member, a rebalance timeout for every
        member still revoking."""
        for group in self.groups.values():
            for member_id, member in group.members.items():
                self.arm_session(group.group_id, member)
                if (member.assignment.state is MemberState.UNREVOKED_PARTITIONS and member.metadata is not None
                        and member.metadata.classic is None):
                    self.w.schedule(rebalance_key(group.group_id, member_id),
                                    max(member.metadata.rebalance_timeout_ms, 0), TimerKind.CONSUMER_REBALANCE,
                                    group.group_id, member_id, (member.assignment.epoch,))

    def session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and member_id in group.members:
            self.w.note("member_expired", group=group_id, member=member_id, reason="session timeout")
        self.fence(group_id, member_id)

    def rebalance_expired(self, group_id: str, member_id: str, epoch: int) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is not None and member.assignment.epoch == epoch:
            self.w.note("member_expired", group=group_id, member=member_id, reason="rebalance timeout")
            self.fence(group_id, member_id)

    def fence(self, group_id: str, member_id: str, downgrade: bool = True) -> None:
        """Remove a member; with ``downgrade``, a group left with classic members only may become a
        classic group."""
        group = self.groups.get(group_id)
        if group is None:
            return
        for key, value in fence_member(group, member_id):
            self.w.write(Record(key, value))
        self.cancel_timers(group_id, member_id)
        if downgrade:
            self.after_fence(group_id)

    # ================================================================ describe, list, delete

    def describe(self, req: c.ConsumerGroupDescribeRequest) -> c.ConsumerGroupDescribeResponse:
        group = self.groups.get(req.group_id)
        if group is None:
            return c.ConsumerGroupDescribeResponse(E.GROUP_ID_NOT_FOUND, req.group_id,
                                                   f"Group {req.group_id} not found.")
        names = {tid: name for name, (tid, _) in req.topics.items()}
        subscribers = {mid: Subscriber(mid, frozenset(), None, m.metadata.server_assignor)
                       for mid, m in group.members.items() if m.metadata is not None}
        members = []
        for mid, m in group.members.items():
            meta = m.metadata
            owned = _merge(m.assignment.assigned, m.assignment.pending_revocation)
            members.append(c.DescribedConsumerMember(
                mid, meta.instance_id if meta else None, meta.rack_id if meta else None, m.assignment.epoch,
                meta.client_id if meta else "", meta.client_host if meta else "",
                meta.subscribed_topic_names if meta else (), meta.subscribed_topic_regex if meta else None,
                described_partitions(owned, names), described_partitions(group.targets.get(mid, {}), names),
                classic=meta is not None and meta.classic is not None))
        return c.ConsumerGroupDescribeResponse(
            E.NONE, req.group_id, None, group.state.value, group.epoch, group.assignment_epoch,
            preferred_assignor(subscribers, self.config.consumer.assignors), tuple(members))

    def listed(self, states: set[str], types: set[str]) -> list[c.ListedGroup]:
        if types and CONSUMER not in types:
            return []
        return [c.ListedGroup(g.group_id, CONSUMER, g.state.value, CONSUMER) for g in self.groups.values()
                if not states or g.state.value.lower() in states]

    def remove(self, group_id: str) -> None:
        """Tombstone the group's records and forget it (deleted, expired, or replaced by a classic
        group); its offsets are the offset handlers' to tombstone."""
        group = self.groups.pop(group_id)
        for key, value in deletion_records(group):
            self.w.write(Record(key, value))
        for member_id in group.members:
            self.cancel_timers(group_id, member_id)

    # ================================================================ offsets (KIP-848 §6)

    def validate_commit(self, group: ConsumerGroup, req: c.OffsetCommitRequest | c.TxnOffsetCommitRequest) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetCommit with KIP-1251 (4.3+): an older epoch passes
        for the partitions the member still holds since that epoch or before."""
        transactional = isinstance(req, c.TxnOffsetCommitRequest)
        epoch = req.generation_id
        if transactional and epoch == -1 and not req.member_id and req.group_instance_id is None:
            return E.NONE
        if epoch < 0 and not group.members:
            return E.NONE  # an admin or a manual assignment
        member = group.members.get(req.member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        classic = member.metadata is not None and member.metadata.classic is not None
        if isinstance(req, c.OffsetCommitRequest) and not req.group_id_not_found_error and not classic:
            return E.UNSUPPORTED_VERSION  # a consumer-protocol member commits with v9+
        # a classic member knows generations; TxnOffsetCommit below v6 does not know STALE_MEMBER_EPOCH
        stale = E.ILLEGAL_GENERATION if transactional or classic else E.STALE_MEMBER_EPOCH
        a = member.assignment
        if epoch == a.epoch:
            return E.NONE
        if epoch > a.epoch:
            return stale
        topic_ids = req.topic_ids if isinstance(req, c.OffsetCommitRequest) else {}
        for topic, partitions in req.topics:
            tid = topic_ids.get(topic, "")
            for p in partitions:
                since = a.assigned.get(tid, {}).get(p.partition, a.pending_revocation.get(tid, {}).get(p.partition))
                if since is None or epoch < since:
                    return stale
        return E.NONE

    def validate_fetch(self, group: ConsumerGroup, member_id: str | None, epoch: int) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetFetch: the exact member epoch, or no member at all."""
        if member_id is None and epoch < 0:
            return E.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if epoch == member.assignment.epoch:
            return E.NONE
        classic = member.metadata is not None and member.metadata.classic is not None
        return E.ILLEGAL_GENERATION if classic else E.STALE_MEMBER_EPOCH

    def subscribed_topics(self, group: ConsumerGroup) -> set[str]:
        """Topics a member subscribes to by name or through its regex: their offsets never expire."""
        out: set[str] = set()
        for m in group.members.values():
            if m.metadata is not None:
                out.update(m.metadata.subscribed_topic_names)
                if m.metadata.subscribed_topic_regex:
                    out.update(matching(m.metadata.subscribed_topic_regex, self.topics))
        return out


def _merge(a: Owned, b: Owned) -> dict[str, frozenset[int]]:
    out: dict[str, frozenset[int]] = {}
    for owned in (a, b):
        for t, ps in owned.items():
            out[t] = out.get(t, frozenset()) | frozenset(ps)
    return out


def described_partitions(parts: Partitions, names: Mapping[str, str]) -> tuple[c.DescribedTopicPartitions, ...]:
    """Topics no longer in the cluster's metadata are left out, as Kafka does."""
    return tuple(c.DescribedTopicPartitions(t, names[t], tuple(sorted(ps)))
                 for t, ps in sorted(parts.items()) if ps and t in names)
