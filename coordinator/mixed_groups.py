"""Classic-protocol members in consumer groups (KIP-848 §7): the online upgrade of a classic
group to a consumer group, and JoinGroup, SyncGroup, Heartbeat and LeaveGroup of the classic
members such a group keeps, as Kafka's GroupMetadataManager serves them.

A classic member is a member of the consumer group like any other: its JoinGroup is a heartbeat
(it reports what it owns in its subscription; an eager client owns nothing when it rejoins), its
generation is its member epoch, and it learns that it should rejoin from REBALANCE_IN_PROGRESS
on Heartbeat and SyncGroup. It never leads: the coordinator assigns, and SyncGroup hands the
member its assigned partitions in the consumer protocol's encoding.

When fencing leaves a consumer group with classic members only, it becomes a classic group again
(the online downgrade). A static classic member that restarts under a new member id takes the
old one's place and partitions, with no new group epoch.
"""

from __future__ import annotations

from . import commands as c
from .binary import RecordDecodeError
from .classic_groups import ClassicGroupHandlers
from .consumer_group import records as r
from .consumer_group.classic_protocol import encode_assignment, parse_assignment, parse_subscription
from .consumer_group.group import ConsumerGroup, Member
from .consumer_group.heartbeat import TopicImage, consumer_heartbeat, replace_static_member, subscription_hash
from .consumer_group.heartbeat_request import ConsumerHeartbeat
from .consumer_group.member import MemberAssignment, MemberState
from .consumer_groups import CONSUMER, ConsumerGroupHandlers
from .errors import ErrorCode
from .group import ClassicGroup, IllegalStateTransition, Token
from .group import GroupState as ClassicState
from .group import Member as ClassicMember
from .records import GroupMetadataKey, Record
from .timers import TimerKind, classic_join_key

E = ErrorCode


class MixedGroupHandlers:
    def __init__(self, consumer: ConsumerGroupHandlers, classic: ClassicGroupHandlers) -> None:
        self.consumer = consumer
        self.classic = classic
        self.w = consumer.w
        self.config = consumer.config

    # ================================================================ online upgrade

    def upgrade(self, old: ClassicGroup, topics: TopicImage) -> str | None:
        """Turn a classic group with members into a consumer group that keeps them, with their
        assignments, as classic members (Kafka's convertToConsumerGroup). Why it cannot, or None."""
        if not self.config.consumer.upgrade_allowed:
            return "group.consumer.migration.policy does not allow upgrades"
        if old.protocol_type != CONSUMER:
            return f"its protocol type is {old.protocol_type!r}, not consumer"
        if len(old.members) > self.config.consumer.max_size:
            return "it has more members than group.consumer.max.size"
        parsed = []
        for m in old.members.values():
            try:
                sub = parse_subscription(m.metadata(old.protocol_name) if old.protocol_name else m.protocols[0][1])
                parts, user_data = parse_assignment(m.assignment)
            except RecordDecodeError:
                return "a member's subscription or assignment cannot be read"
            if user_data:
                return "a member's assignment carries user data (a client-side assignor)"
            parsed.append((m, sub, parts))
        g, gen = old.group_id, old.generation_id
        for m in old.members.values():  # parked requests end: the members rejoin the consumer group
            if m.awaiting_join is not None:
                self.w.respond(m.awaiting_join, c.JoinGroupResponse(E.REBALANCE_IN_PROGRESS, m.member_id))
            if m.awaiting_sync is not None:
                self.w.respond(m.awaiting_sync, c.SyncGroupResponse(E.REBALANCE_IN_PROGRESS))
        self.w.write(Record(GroupMetadataKey(g), None))
        self.classic.delete_group(g)
        group = self.consumer.groups[g] = ConsumerGroup(g)
        ids = {name: tid for name, (tid, _) in topics.items()}
        subscribed: set[str] = set()
        for m, sub, _ in parsed:
            subscribed.update(sub.topics)
            self.consumer.write(group, r.MemberKey(r.MEMBER_METADATA, g, m.member_id), r.MemberMetadataValue(
                m.group_instance_id, sub.rack_id or None, m.client_id, m.client_host, tuple(sorted(set(sub.topics))),
                None, m.rebalance_timeout_ms, None, _classic_metadata(m.session_timeout_ms, m.protocols)))
        digest = subscription_hash({topics[t][0]: topics[t][1] for t in subscribed if t in topics})
        self.consumer.write(group, r.GroupKey(r.GROUP_METADATA, g), r.GroupEpochValue(gen, digest))
        owned = {m.member_id: {ids[t]: ps for t, ps in parts.items() if t in ids and ps} for m, _, parts in parsed}
        for member_id, parts in owned.items():
            self.consumer.write(group, r.MemberKey(r.TARGET_MEMBER, g, member_id), r.TargetMemberValue(tuple(
                r.TopicPartitions(bytes.fromhex(t), tuple(sorted(ps))) for t, ps in sorted(parts.items()))))
        self.consumer.write(group, r.GroupKey(r.TARGET_METADATA, g), r.TargetEpochValue(gen))
        for member_id, parts in owned.items():
            a = MemberAssignment(gen, gen, MemberState.STABLE, {t: dict.fromkeys(ps, gen) for t, ps in parts.items()})
            self.consumer.write(group, *group.assignment_record(member_id, a))
        for member in group.members.values():
            self.consumer.arm_session(g, member)
        return None

    # ================================================================ JoinGroup

    def join(self, group: ConsumerGroup, req: c.JoinGroupRequest, token: Token) -> None:
        def fail(error: ErrorCode, member_id: str = req.member_id) -> None:
            self.w.respond(token, c.JoinGroupResponse(error, member_id=member_id))

        if req.protocol_type != CONSUMER or not req.protocols or self.config.consumer.migration_policy == "disabled":
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        offered = {name for name, _ in req.protocols}
        for m in group.members.values():
            classic = m.metadata.classic if m.metadata is not None else None
            if classic is not None and m.member_id != req.member_id and \
                    not offered & {p.name for p in classic.supported_protocols}:
                return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        member_id = req.member_id
        if not member_id:
            prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
            member_id = f"{prefix}-{self.consumer.new_id()}"
            if req.group_instance_id is None and req.require_known_member_id:
                return fail(E.MEMBER_ID_REQUIRED, member_id)  # nothing written: it comes back with the id
        if req.group_instance_id is not None:
            holder = next((m.member_id for m in group.members.values() if m.metadata is not None
                           and m.metadata.instance_id == req.group_instance_id), None)
            if holder is not None and holder != member_id:
                if req.member_id:
                    return fail(E.FENCED_INSTANCE_ID)
                # the instance restarted under a new id: it takes the old one's place and partitions
                for key, value in replace_static_member(group, holder, member_id):
                    self.w.write(Record(key, value))
                self.consumer.cancel_timers(group.group_id, holder)
        try:
            sub = parse_subscription(req.protocols[0][1])
        except RecordDecodeError:
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        topics = req.topics or {}
        current = group.members.get(member_id)
        epoch = current.assignment.epoch if current is not None and current.assignment.epoch > 0 else 0
        owned = {topics[t][0]: ps for t, ps in sub.owned.items() if t in topics} if epoch else {}
        hb = ConsumerHeartbeat(group.group_id, member_id, epoch, instance_id=req.group_instance_id,
                               rack_id=sub.rack_id or None, rebalance_timeout_ms=req.rebalance_timeout_ms,
                               subscribed_topic_names=sub.topics, owned=owned)
        _, answer = consumer_heartbeat(group, hb, topics, req.client_id, req.client_host, self.config.consumer,
                                       self.consumer.new_id, _classic_metadata(req.session_timeout_ms, req.protocols))
        if answer.error is not E.NONE:
            return fail(answer.error, member_id)
        for key, value in answer.records:
            self.w.write(Record(key, value))
        self.consumer.timers.cancel(classic_join_key(group.group_id, member_id))
        self.consumer.arm_session(group.group_id, group.members[member_id])
        self.w.respond(token, c.JoinGroupResponse(E.NONE, member_id, answer.member_epoch, CONSUMER,
                                                  req.protocols[0][0], leader=""))

    # ================================================================ SyncGroup, Heartbeat

    def _member(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                generation: int) -> tuple[Member | None, ErrorCode]:
        if instance_id is not None:
            holder = next((m for m in group.members.values() if m.metadata is not None
                           and m.metadata.instance_id == instance_id), None)
            if holder is None:
                return None, E.UNKNOWN_MEMBER_ID
            if holder.member_id != member_id:
                return None, E.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None or member.metadata is None or member.metadata.classic is None:
            return None, E.UNKNOWN_MEMBER_ID
        if generation != member.assignment.epoch:
            return None, E.ILLEGAL_GENERATION
        return member, E.NONE

    def _must_rejoin(self, group: ConsumerGroup, member: Member) -> None:
        key = classic_join_key(group.group_id, member.member_id)
        if key not in self.consumer.timers:
            timeout = member.metadata.rebalance_timeout_ms if member.metadata is not None else 0
            self.w.schedule(key, max(timeout, 0), TimerKind.CONSUMER_CLASSIC_JOIN, group.group_id, member.member_id)

    def sync(self, group: ConsumerGroup, req: c.SyncGroupRequest) -> c.SyncGroupResponse:
        member, error = self._member(group, req.member_id, req.group_instance_id, req.generation_id)
        if member is None or member.metadata is None or member.metadata.classic is None:
            return c.SyncGroupResponse(error)
        protocol = member.metadata.classic.supported_protocols[0]
        if (req.protocol_type is not None and req.protocol_type != CONSUMER) or (
                req.protocol_name is not None and req.protocol_name != protocol.name):
            return c.SyncGroupResponse(E.INCONSISTENT_GROUP_PROTOCOL)
        a = member.assignment
        if group.assignment_epoch > a.epoch and a.state is not MemberState.UNREVOKED_PARTITIONS:
            self._must_rejoin(group, member)
            return c.SyncGroupResponse(E.REBALANCE_IN_PROGRESS)
        self.consumer.arm_session(group.group_id, member)
        names = {tid: name for name, (tid, _) in (req.topics or {}).items()}
        try:
            version = parse_subscription(protocol.metadata).version
        except RecordDecodeError:
            version = 0
        parts = {names[t]: ps for t, ps in a.assigned.items() if t in names and ps}
        return c.SyncGroupResponse(E.NONE, encode_assignment(version, parts), CONSUMER, protocol.name)

    def heartbeat(self, group: ConsumerGroup, req: c.HeartbeatRequest) -> c.HeartbeatResponse:
        member, error = self._member(group, req.member_id, req.group_instance_id, req.generation_id)
        if member is None:
            return c.HeartbeatResponse(error)
        self.consumer.arm_session(group.group_id, member)
        a = member.assignment
        if (a.epoch < group.assignment_epoch or a.state is MemberState.UNREVOKED_PARTITIONS
                or (a.state is MemberState.UNRELEASED_PARTITIONS and not _waiting_on_unreleased(group, member))):
            self._must_rejoin(group, member)
            return c.HeartbeatResponse(E.REBALANCE_IN_PROGRESS)
        return c.HeartbeatResponse(E.NONE)

    # ================================================================ LeaveGroup, timers

    def leave(self, group: ConsumerGroup, req: c.LeaveGroupRequest) -> c.LeaveGroupResponse:
        results = []
        for lm in req.members:
            if lm.group_instance_id is not None:
                holder = next((m.member_id for m in group.members.values() if m.metadata is not None
                               and m.metadata.instance_id == lm.group_instance_id), None)
                if holder is None:
                    error = E.UNKNOWN_MEMBER_ID
                elif lm.member_id and lm.member_id != holder:
                    error = E.FENCED_INSTANCE_ID
                else:
                    error = E.NONE
                    self.consumer.fence(group.group_id, holder, downgrade=False)
            elif lm.member_id in group.members:
                error = E.NONE
                self.consumer.fence(group.group_id, lm.member_id, downgrade=False)
            else:
                error = E.UNKNOWN_MEMBER_ID
            results.append(c.LeaveMemberResult(lm.member_id, lm.group_instance_id, error))
        self.maybe_downgrade(group.group_id)  # once, after every leaving member is out
        return c.LeaveGroupResponse(E.NONE, tuple(results))

    def join_expired(self, group_id: str, member_id: str) -> None:
        """A classic member told to rejoin did not within its rebalance timeout."""
        self.consumer.fence(group_id, member_id)

    # ================================================================ online downgrade

    def maybe_downgrade(self, group_id: str) -> None:
        """Members were fenced: a consumer group left with classic members only becomes a classic
        group again (Kafka's convertToClassicGroup), each member holding its target assignment, and
        rebalances at once so that they all rejoin the classic way."""
        group = self.consumer.groups.get(group_id)
        if (group is None or not group.members or not self.config.consumer.downgrade_allowed
                or len(group.members) > self.config.max_size
                or any(m.metadata is None or m.metadata.classic is None for m in group.members.values())):
            return
        names = {tid: name for name, (tid, _) in self.consumer.topics.items()}
        classic = ClassicGroup(group_id, state=ClassicState.STABLE, current_state_timestamp=self.w.now,
                               generation_id=group.epoch)
        for m in group.members.values():
            assert m.metadata is not None and m.metadata.classic is not None
            protocols = [(p.name, p.metadata) for p in m.metadata.classic.supported_protocols]
            try:
                version = parse_subscription(protocols[0][1]).version
            except RecordDecodeError:
                version = 0
            target = {names[t]: ps for t, ps in group.targets.get(m.member_id, {}).items() if t in names}
            classic.add(ClassicMember(m.member_id, m.metadata.instance_id, m.metadata.client_id,
                                      m.metadata.client_host, m.metadata.rebalance_timeout_ms,
                                      m.metadata.classic.session_timeout_ms, CONSUMER, protocols,
                                      encode_assignment(version, target)))
        try:
            classic.protocol_name = classic.select_protocol()
        except IllegalStateTransition:
            return  # no protocol every member supports: it stays a consumer group
        classic.subscribed_topics = classic.compute_subscribed_topics()
        self.consumer.remove(group_id)
        self.classic.groups[group_id] = classic
        self.w.write(Record(GroupMetadataKey(group_id), classic.to_record_value()))
        for member in classic.members.values():
            self.classic.reschedule_heartbeat(classic, member)
        self.classic.prepare_rebalance(classic, "the last consumer-protocol member left")


def _classic_metadata(session_timeout_ms: int, protocols: list[tuple[str, bytes]] | tuple[tuple[str, bytes], ...]
                      ) -> r.ClassicMemberMetadata:
    return r.ClassicMemberMetadata(session_timeout_ms, tuple(r.ClassicProtocol(n, m) for n, m in protocols))


def _waiting_on_unreleased(group: ConsumerGroup, member: Member) -> bool:
    """Whether some partition of the member's target is still held by another member (a rejoin
    would not give it more yet); Kafka's waitingOnUnreleasedPartition."""
    for t, ps in group.targets.get(member.member_id, {}).items():
        mine = member.assignment.assigned.get(t, {})
        if any(p not in mine and group.partition_epoch(t, p) != -1 for p in ps):
            return True
    return False
