"""Share groups (KIP-932) on one shard: ShareGroupHeartbeat and ShareGroupDescribe, the session
timer, the share state of the groups' topic-partitions (created as a subscription first needs
it; read and written by the partitions' leaders), and what the shard's group-wide operations
(ListGroups, DeleteGroups) need from share groups.

A share group is durable state only: every change applies its records to the live group as it
writes them (load = replay). Kafka keeps share state with a coordinator of its own; here the
group's coordinator is its share coordinator too, so a subscription's state is created in the
heartbeat's own step. A group id names one kind of group: a share group is never converted to or
from another kind (as in Kafka).
"""

from __future__ import annotations

from . import commands as c
from .config import GroupConfig
from .consumer_group.heartbeat import TopicImage
from .consumer_groups import described_partitions
from .errors import ErrorCode
from .records import Record
from .share_group import assignor, state
from .share_group.group import ShareGroup, deletion_records
from .share_group.heartbeat import fence_member, share_heartbeat
from .timers import TimerKind, TimerSet, session_key
from .write_context import WriteContext

E = ErrorCode
SHARE = "share"


class ShareGroupHandlers:
    def __init__(self, config: GroupConfig, groups: dict[str, ShareGroup], timers: TimerSet, w: WriteContext) -> None:
        self.config = config
        self.groups = groups
        self.timers = timers
        self.w = w
        self.topics: TopicImage = {}

    def heartbeat(self, req: c.ShareGroupHeartbeatRequest) -> c.ShareGroupHeartbeatResponse:
        hb = req.heartbeat
        self.topics = req.topics
        group = self.groups.get(hb.group_id)
        new_group, answer = share_heartbeat(group, hb, req.topics, req.client_id, req.client_host,
                                            self.config.share, self.w.now)
        if answer.error is not E.NONE:
            return c.ShareGroupHeartbeatResponse(answer.error, answer.message)
        if new_group is not None and group is None and answer.records:
            self.groups[hb.group_id] = new_group
        for key, value in answer.records:
            self.w.write(Record(key, value))
        init = answer.initialize
        if init is not None and new_group is not None:
            for topic, (partitions, start) in sorted(init.topics.items()):
                for p in sorted(partitions):
                    _, created = state.initialize(new_group, topic, p, init.state_epoch, start, self.w.now)
                    if created is not None:
                        self.w.write(Record(*created))
        if answer.member_epoch == -1:
            self.timers.cancel(session_key(hb.group_id, hb.member_id))
            self.w.note("member_left", group=hb.group_id, member=hb.member_id)
        else:
            self.arm_session(hb.group_id, answer.member_id)
        return c.ShareGroupHeartbeatResponse(E.NONE, None, answer.member_id, answer.member_epoch,
                                             answer.heartbeat_interval_ms, answer.assignment)

    def share_state(self, req: c.ShareStateRequest) -> c.ShareStateResponse:
        """A partition leader reads (loading its share partition) or writes (acknowledgements,
        releases, expired locks) a topic-partition's share state."""
        group = self.groups.get(req.group_id)
        if group is None:
            return c.ShareStateResponse(E.INVALID_REQUEST, f"Share group {req.group_id} not found.")
        if req.write is None:
            error, message, current, record = state.read(group, req.topic_id, req.partition, req.leader_epoch,
                                                         self.w.now)
        else:
            current = None
            error, message, record = state.write(group, req.topic_id, req.partition, req.leader_epoch,
                                                 req.write.start_offset, req.write.batches, self.w.now,
                                                 req.write.delivery_complete_count)
        if record is not None:
            self.w.write(Record(*record))
        return c.ShareStateResponse(error, message, current)

    def offsets(self, req: c.ShareOffsetsRequest) -> c.ShareOffsetsResponse:
        """DescribeShareGroupOffsets: each partition's start offset, leader epoch and delivery
        complete count (start -1 where there is no share state, as Kafka answers)."""
        group = self.groups.get(req.group_id)
        states = group.share_states if group is not None else {}
        wanted = sorted(states) if req.topics is None else [(t, p) for t, ps in req.topics for p in ps]
        out = []
        for t, p in wanted:
            s = states.get((t, p))
            out.append(c.ShareOffset(t, p, s.start_offset, s.leader_epoch, s.delivery_complete_count) if s is not None
                       else c.ShareOffset(t, p, -1, 0, -1))
        return c.ShareOffsetsResponse(E.NONE, tuple(out))

    # ================================================================ timers

    def arm_session(self, group_id: str, member_id: str) -> None:
        self.w.schedule(session_key(group_id, member_id), self.config.share.session_timeout_ms,
                        TimerKind.SHARE_SESSION, group_id, member_id)

    def arm_loaded(self) -> None:
        """A full session timeout for every member of a loaded group (Kafka's onLoaded)."""
        for group in self.groups.values():
            for member_id in group.members:
                self.arm_session(group.group_id, member_id)

    def session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        self.w.note("member_expired", group=group_id, member=member_id, reason="session timeout")
        for key, value in fence_member(group, member_id, self.topics, self.w.now):
            self.w.write(Record(key, value))

    # ================================================================ describe, list, delete

    def describe(self, req: c.ShareGroupDescribeRequest) -> c.ShareGroupDescribeResponse:
        group = self.groups.get(req.group_id)
        if group is None:
            return c.ShareGroupDescribeResponse(E.GROUP_ID_NOT_FOUND, req.group_id, f"Group {req.group_id} not found.")
        names = {tid: name for name, (tid, _) in req.topics.items()}
        members = tuple(
            c.DescribedShareMember(mid, m.metadata.rack_id if m.metadata else None, m.epoch,
                                   m.metadata.client_id if m.metadata else "",
                                   m.metadata.client_host if m.metadata else "",
                                   m.metadata.subscribed_topic_names if m.metadata else (),
                                   described_partitions(m.assigned, names))
            for mid, m in group.members.items())
        return c.ShareGroupDescribeResponse(E.NONE, req.group_id, None, group.state.value, group.epoch,
                                            group.assignment_epoch, assignor.NAME, members)

    def listed(self, states: set[str], types: set[str]) -> list[c.ListedGroup]:
        if types and SHARE not in types:
            return []
        return [c.ListedGroup(g.group_id, SHARE, g.state.value, SHARE) for g in self.groups.values()
                if not states or g.state.value.lower() in states]

    def remove(self, group_id: str) -> None:
        """Tombstone the group's records and forget it (DeleteGroups on an empty group)."""
        group = self.groups.pop(group_id)
        for key, value in deletion_records(group):
            self.w.write(Record(key, value))
        for member_id in group.members:
            self.timers.cancel(session_key(group_id, member_id))

