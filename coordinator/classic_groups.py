"""Kafka's classic group protocol on one shard: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups and ListGroups, and the member, join and sync timers that drive rebalances.

The handlers change the soft state of ``groups`` (members, parked requests) and write group
records through the shard's ``WriteContext``; the shard replays those records into the durable
state when the step ends.
"""

from __future__ import annotations

from collections.abc import Callable

from . import commands as c
from .codec import record_size
from .config import GroupConfig
from .errors import ErrorCode
from .group import ClassicGroup, GroupState, Member, Token
from .records import GroupMetadataKey, Record, empty_group_record
from .timers import TimerKind, TimerSet, heartbeat_key, join_key, sync_key
from .write_context import WriteContext

E = ErrorCode
S = GroupState


class ClassicGroupHandlers:
    def __init__(self, config: GroupConfig, new_id: Callable[[], str], groups: dict[str, ClassicGroup],
                 timers: TimerSet, w: WriteContext) -> None:
        self.config = config
        self._new_id = new_id
        self.groups = groups
        self.timers = timers
        self.w = w

    # ================================================================ JoinGroup

    def _join_error(self, token: Token, error: ErrorCode, member_id: str = "") -> None:
        self.w.respond(token, c.JoinGroupResponse(error, member_id=member_id))

    def join_group(self, req: c.JoinGroupRequest, token: Token) -> None:
        if not req.group_id:
            return self._join_error(token, E.INVALID_GROUP_ID, req.member_id)
        if not (self.config.min_session_timeout_ms <= req.session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return self._join_error(token, E.INVALID_SESSION_TIMEOUT, req.member_id)
        group = self.groups.get(req.group_id)
        created = False
        if group is None:
            if req.member_id:
                return self._join_error(token, E.UNKNOWN_MEMBER_ID, req.member_id)
            group = ClassicGroup(req.group_id, current_state_timestamp=self.w.now)
            self.groups[req.group_id] = group
            created = True
        if not self._accept_joining_member(group, req.member_id):
            removed = group.remove(req.member_id)
            if removed is not None:
                self.timers.cancel(heartbeat_key(group.group_id, removed.member_id))
                self._fail_parked(removed, E.GROUP_MAX_SIZE_REACHED)
            self._join_error(token, E.GROUP_MAX_SIZE_REACHED)
        elif not req.member_id:
            self._join_new_member(group, req, token)
        else:
            self._join_existing_member(group, req, token)
        if created and not self.w.records:
            self.w.write(empty_group_record(group.group_id))

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.config.max_size
        if group.is_in(S.EMPTY, S.DEAD):
            return True
        if group.is_in(S.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join is not None) or group.num_awaiting_join() < limit
        return member_id in group.members or len(group.members) < limit

    def _join_new_member(self, group: ClassicGroup, req: c.JoinGroupRequest, token: Token) -> None:
        if group.is_in(S.DEAD):
            return self._join_error(token, E.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            return self._join_error(token, E.INCONSISTENT_GROUP_PROTOCOL)
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        new_member_id = f"{prefix}-{self._new_id()}"
        if req.group_instance_id is not None:
            existing = group.static_members.get(req.group_instance_id)
            if existing is not None:
                return self._update_static_member_then_rebalance_or_complete_join(
                    group, req, existing, new_member_id, token)
            return self._add_member_then_rebalance_or_complete_join(group, req, new_member_id, token)
        if req.require_known_member_id:
            group.pending_join_members.add(new_member_id)
            self.w.schedule(heartbeat_key(group.group_id, new_member_id), req.session_timeout_ms,
                           TimerKind.HEARTBEAT, group.group_id, new_member_id)
            return self._join_error(token, E.MEMBER_ID_REQUIRED, new_member_id)
        return self._add_member_then_rebalance_or_complete_join(group, req, new_member_id, token)

    def _join_existing_member(self, group: ClassicGroup, req: c.JoinGroupRequest, token: Token) -> None:
        member_id = req.member_id
        if group.is_in(S.DEAD):
            return self._join_error(token, E.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            return self._join_error(token, E.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if group.is_pending_member(member_id):
            if req.group_instance_id is not None:
                # Kafka raises IllegalStateException here: a pending id never carries an instance id.
                return self._join_error(token, E.UNKNOWN_SERVER_ERROR, member_id)
            return self._add_member_then_rebalance_or_complete_join(group, req, member_id, token)
        invalid = group.validate_member(member_id, req.group_instance_id)
        if invalid:
            return self._join_error(token, invalid, member_id)
        member = group.members[member_id]
        if group.is_in(S.PREPARING_REBALANCE):
            return self._update_member_then_rebalance_or_complete_join(group, member, req, token,
                                                                       "member rejoined")
        if group.is_in(S.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # The member lost its JoinGroup response: give it the current generation again.
                return self.w.respond(token, self._current_join_response(group, member, with_members=True))
            return self._update_member_then_rebalance_or_complete_join(group, member, req, token,
                                                                       "member changed its metadata")
        if group.is_in(S.STABLE):
            if group.is_leader(member_id):
                return self._update_member_then_rebalance_or_complete_join(group, member, req, token,
                                                                           "leader rejoined")
            if not member.matches(req.protocols):
                return self._update_member_then_rebalance_or_complete_join(group, member, req, token,
                                                                           "member changed its metadata")
            return self.w.respond(token, self._current_join_response(group, member, with_members=False))
        return self._join_error(token, E.UNKNOWN_MEMBER_ID, member_id)

    def _current_join_response(self, group: ClassicGroup, member: Member, with_members: bool,
                               leader: str | None = None, skip_assignment: bool = False) -> c.JoinGroupResponse:
        is_leader = group.is_leader(member.member_id)
        return c.JoinGroupResponse(
            E.NONE,
            member_id=member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=(leader if leader is not None else group.leader_id) or "",
            skip_assignment=skip_assignment,
            members=self._member_list(group) if (with_members and is_leader) else (),
        )

    @staticmethod
    def _member_list(group: ClassicGroup) -> tuple[c.JoinGroupMember, ...]:
        return tuple(
            c.JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
            for m in group.members.values()
        )

    def _park_join(self, member: Member, token: Token) -> None:
        if member.awaiting_join is not None and member.awaiting_join != token:
            # A newer JoinGroup replaces a parked one; answer the old so no request hangs.
            self.w.respond(member.awaiting_join, c.JoinGroupResponse(E.REBALANCE_IN_PROGRESS,
                                                                    member_id=member.member_id))
        member.awaiting_join = token

    def _add_member_then_rebalance_or_complete_join(self, group: ClassicGroup, req: c.JoinGroupRequest,
                                                    member_id: str, token: Token) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=list(req.protocols),
            is_new=True,
        )
        if group.is_in(S.PREPARING_REBALANCE) and group.previous_state == S.EMPTY:
            group.new_member_added = True
        group.add(member)
        self._park_join(member, token)
        self.w.schedule(heartbeat_key(group.group_id, member_id), self.config.new_member_join_timeout_ms,
                       TimerKind.HEARTBEAT, group.group_id, member_id)
        self._maybe_prepare_rebalance_or_complete_join(group, f"new member {member_id} joined")

    def _update_member_then_rebalance_or_complete_join(self, group: ClassicGroup, member: Member,
                                                       req: c.JoinGroupRequest, token: Token,
                                                       reason: str) -> None:
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        self._park_join(member, token)
        self._maybe_prepare_rebalance_or_complete_join(group, reason)

    def _update_static_member_then_rebalance_or_complete_join(
            self, group: ClassicGroup, req: c.JoinGroupRequest, old_member_id: str,
            new_member_id: str, token: Token) -> None:
        assert req.group_instance_id is not None
        if group.is_in(S.EMPTY, S.DEAD):
            return self._join_error(token, E.UNKNOWN_SERVER_ERROR)
        current_leader = group.leader_id
        new_member = self._replace_static_member(group, req.group_instance_id, old_member_id, new_member_id)
        self.reschedule_heartbeat(group, new_member)
        new_member.protocols = list(req.protocols)
        new_member.rebalance_timeout_ms = req.rebalance_timeout_ms
        new_member.session_timeout_ms = req.session_timeout_ms
        if group.is_in(S.STABLE):
            if group.select_protocol() == group.protocol_name:
                # Same protocol: persist the new id and answer with the current generation.
                if not self.write_group(group):
                    self._park_join(new_member, token)
                    return self.prepare_rebalance(group, "the group's metadata is larger than message.max.bytes")
                if req.supports_skip_assignment:
                    is_leader = group.is_leader(new_member_id)
                    self.w.respond(token, self._current_join_response(
                        group, new_member, with_members=is_leader, skip_assignment=is_leader))
                else:
                    self.w.respond(token, self._current_join_response(
                        group, new_member, with_members=False, leader=current_leader))
                return
            self._park_join(new_member, token)
            return self.prepare_rebalance(group, f"static member {req.group_instance_id} changed protocol")
        self._park_join(new_member, token)
        if group.is_in(S.COMPLETING_REBALANCE):
            return self.prepare_rebalance(group, f"static member {req.group_instance_id} rejoined")
        self._maybe_complete_join_phase(group)

    def _replace_static_member(self, group: ClassicGroup, instance_id: str, old_id: str,
                               new_id: str) -> Member:
        old = group.members.pop(old_id)
        if old.awaiting_join is not None:
            self.w.respond(old.awaiting_join, c.JoinGroupResponse(E.FENCED_INSTANCE_ID, member_id=old_id))
            old.awaiting_join = None
        if old.awaiting_sync is not None:
            self.w.respond(old.awaiting_sync, c.SyncGroupResponse(E.FENCED_INSTANCE_ID))
            old.awaiting_sync = None
        old.member_id = new_id
        group.members[new_id] = old
        group.static_members[instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        if old_id in group.pending_sync_members:
            group.pending_sync_members.discard(old_id)
            group.pending_sync_members.add(new_id)
        self.timers.cancel(heartbeat_key(group.group_id, old_id))
        return old

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def prepare_rebalance(self, group: ClassicGroup, reason: str,
                           sync_error: ErrorCode = E.REBALANCE_IN_PROGRESS) -> None:
        if group.is_in(S.COMPLETING_REBALANCE):
            for m in group.members.values():
                m.assignment = b""
                if m.awaiting_sync is not None:
                    self.w.respond(m.awaiting_sync, c.SyncGroupResponse(sync_error))
                    m.awaiting_sync = None
                    # Kafka's propagateAssignment: a session that expired while the member was
                    # parked was ignored, so re-arm it now or the member could never expire.
                    self.reschedule_heartbeat(group, m)
        self.timers.cancel(sync_key(group.group_id))
        group.pending_sync_members.clear()
        self.w.note("group_rebalance", group=group.group_id, state=group.state.name, generation=group.generation_id,
                    members=len(group.members), reason=reason)
        is_initial = group.is_in(S.EMPTY)
        if is_initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.w.schedule(join_key(group.group_id), delay, TimerKind.INITIAL_JOIN, group.group_id,
                           args=(delay, remaining))
        group.transition_to(S.PREPARING_REBALANCE, self.w.now)
        if not is_initial:
            if group.has_all_members_joined():
                self.complete_join(group)
            else:
                self.w.schedule(join_key(group.group_id), group.rebalance_timeout_ms(), TimerKind.JOIN,
                               group.group_id)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if (group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined()
                and group.previous_state != S.EMPTY):
            self.complete_join(group)

    def try_complete_initial_rebalance(self, group: ClassicGroup, delay: int, remaining: int) -> None:
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self.w.schedule(join_key(group.group_id), new_delay, TimerKind.INITIAL_JOIN, group.group_id,
                           args=(new_delay, new_remaining))
        else:
            self.complete_join(group)

    def complete_join(self, group: ClassicGroup) -> None:
        self.timers.cancel(join_key(group.group_id))
        if group.is_in(S.DEAD) or not group.is_in(S.PREPARING_REBALANCE):
            return
        for m in list(group.members.values()):
            if m.awaiting_join is None and not m.is_static:
                group.remove(m.member_id)
                self.timers.cancel(heartbeat_key(group.group_id, m.member_id))
                self._fail_parked(m, E.UNKNOWN_MEMBER_ID)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only absent static members are left: wait another rebalance timeout for them.
            self.w.schedule(join_key(group.group_id), group.rebalance_timeout_ms(), TimerKind.JOIN,
                           group.group_id)
            return
        group.init_next_generation(self.w.now)
        self.w.note("group_generation", group=group.group_id, generation=group.generation_id,
                    members=len(group.members))
        if group.is_in(S.EMPTY):
            self.w.write(Record(GroupMetadataKey(group.group_id), group.to_record_value()))
            return
        members = self._member_list(group)
        for m in group.members.values():
            if m.awaiting_join is not None:
                self.w.respond(m.awaiting_join, c.JoinGroupResponse(
                    E.NONE,
                    member_id=m.member_id,
                    generation_id=group.generation_id,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader=group.leader_id or "",
                    members=members if group.is_leader(m.member_id) else (),
                ))
                m.awaiting_join = None
            self.reschedule_heartbeat(group, m)
            m.is_new = False
            group.pending_sync_members.add(m.member_id)
        self.w.schedule(sync_key(group.group_id), group.rebalance_timeout_ms(), TimerKind.SYNC,
                       group.group_id, args=(group.generation_id,))

    def reschedule_heartbeat(self, group: ClassicGroup, member: Member, delay_ms: int | None = None) -> None:
        self.w.schedule(heartbeat_key(group.group_id, member.member_id),
                       member.session_timeout_ms if delay_ms is None else delay_ms,
                       TimerKind.HEARTBEAT, group.group_id, member.member_id)

    def _fail_parked(self, member: Member, error: ErrorCode) -> None:
        """Answer whatever the member has parked: it is leaving the group."""
        if member.awaiting_join is not None:
            self.w.respond(member.awaiting_join, c.JoinGroupResponse(error))
            member.awaiting_join = None
        if member.awaiting_sync is not None:
            self.w.respond(member.awaiting_sync, c.SyncGroupResponse(error))
            member.awaiting_sync = None

    def _remove_member_and_update_group(self, group: ClassicGroup, member: Member, reason: str) -> None:
        self._fail_parked(member, E.UNKNOWN_MEMBER_ID)
        group.remove(member.member_id)
        self.timers.cancel(heartbeat_key(group.group_id, member.member_id))
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
            # Kafka completes the join directly here, even during the initial rebalance.
            self.complete_join(group)

    def expire_member_heartbeat(self, group: ClassicGroup, member_id: str) -> None:
        if group.is_in(S.DEAD):
            return
        if group.is_pending_member(member_id):
            group.pending_join_members.discard(member_id)
            if group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
                # As removePendingMemberAndUpdateClassicGroup: no initial-rebalance guard.
                self.complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        self.w.note("member_expired", group=group.group_id, member=member_id,
                    session_timeout_ms=member.session_timeout_ms)
        self._remove_member_and_update_group(group, member, f"session of {member_id} expired")

    def expire_pending_sync(self, group: ClassicGroup, generation: int) -> None:
        if generation != group.generation_id or not group.is_in(S.COMPLETING_REBALANCE, S.STABLE):
            return
        if not group.pending_sync_members:
            return
        for member_id in list(group.pending_sync_members):
            member = group.remove(member_id)
            self.timers.cancel(heartbeat_key(group.group_id, member_id))
            if member is not None:
                self._fail_parked(member, E.UNKNOWN_MEMBER_ID)
        group.pending_sync_members.clear()
        self.prepare_rebalance(group, "members did not send SyncGroup in time")

    # ================================================================ SyncGroup

    def sync_group(self, req: c.SyncGroupRequest, token: Token) -> None:
        def error(e: ErrorCode) -> None:
            self.w.respond(token, c.SyncGroupResponse(e))

        if not req.group_id:
            return error(E.INVALID_GROUP_ID)
        group = self.groups.get(req.group_id)
        if group is None or group.is_in(S.EMPTY):
            return error(E.UNKNOWN_MEMBER_ID)
        if group.is_in(S.DEAD):
            return error(E.COORDINATOR_NOT_AVAILABLE)
        invalid = group.validate_member(req.member_id, req.group_instance_id)
        if invalid:
            return error(invalid)
        if req.generation_id != group.generation_id:
            return error(E.ILLEGAL_GENERATION)
        if ((req.protocol_type is not None and req.protocol_type != group.protocol_type)
                or (req.protocol_name is not None and req.protocol_name != group.protocol_name)):
            return error(E.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_in(S.PREPARING_REBALANCE):
            return error(E.REBALANCE_IN_PROGRESS)
        member = group.members[req.member_id]
        if group.is_in(S.COMPLETING_REBALANCE):
            if member.awaiting_sync is not None and member.awaiting_sync != token:
                self.w.respond(member.awaiting_sync, c.SyncGroupResponse(E.REBALANCE_IN_PROGRESS))
            member.awaiting_sync = token
            group.pending_sync_members.discard(req.member_id)
            if not group.pending_sync_members:
                self.timers.cancel(sync_key(group.group_id))
            if group.is_leader(req.member_id):
                assignments = dict(req.assignments)
                for m in group.members.values():
                    m.assignment = assignments.get(m.member_id, b"")
                # The record is written now; every parked SyncGroup is answered with it and is
                # released only once it commits (the runtime gates it). A failed append reloads.
                if not self.write_group(group):
                    # Kafka: the store failed (RECORD_LIST_TOO_LARGE), every member is told
                    # UNKNOWN_SERVER_ERROR and the group rebalances.
                    return self.prepare_rebalance(group, "the group's metadata is larger than message.max.bytes",
                                                   sync_error=E.UNKNOWN_SERVER_ERROR)
                group.transition_to(S.STABLE, self.w.now)
                for m in group.members.values():
                    if m.awaiting_sync is not None:
                        self.w.respond(m.awaiting_sync, c.SyncGroupResponse(
                            E.NONE, m.assignment, group.protocol_type, group.protocol_name))
                        m.awaiting_sync = None
                        self.reschedule_heartbeat(group, m)
            return
        # Stable: hand out the current assignment; a repeated leader assignment is ignored.
        group.pending_sync_members.discard(req.member_id)
        if not group.pending_sync_members:
            self.timers.cancel(sync_key(group.group_id))  # Kafka's removePendingSyncMember
        self.w.respond(token, c.SyncGroupResponse(E.NONE, member.assignment, group.protocol_type,
                                                 group.protocol_name))

    # ================================================================ Heartbeat

    def heartbeat(self, req: c.HeartbeatRequest) -> c.HeartbeatResponse:
        if not req.group_id:
            return c.HeartbeatResponse(E.INVALID_GROUP_ID)
        group = self.groups.get(req.group_id)
        if group is None:
            return c.HeartbeatResponse(E.UNKNOWN_MEMBER_ID)
        if group.is_in(S.DEAD):
            return c.HeartbeatResponse(E.COORDINATOR_NOT_AVAILABLE)
        invalid = group.validate_member(req.member_id, req.group_instance_id)
        if invalid:
            return c.HeartbeatResponse(invalid)
        if req.generation_id != group.generation_id:
            return c.HeartbeatResponse(E.ILLEGAL_GENERATION)
        if group.is_in(S.EMPTY):
            return c.HeartbeatResponse(E.UNKNOWN_MEMBER_ID)
        self.reschedule_heartbeat(group, group.members[req.member_id])
        if group.is_in(S.PREPARING_REBALANCE):
            return c.HeartbeatResponse(E.REBALANCE_IN_PROGRESS)
        return c.HeartbeatResponse(E.NONE)

    # ================================================================ LeaveGroup

    def leave_group(self, req: c.LeaveGroupRequest) -> c.LeaveGroupResponse:
        if not req.group_id:
            return c.LeaveGroupResponse(E.INVALID_GROUP_ID)
        group = self.groups.get(req.group_id)
        if group is None:
            return c.LeaveGroupResponse(E.NONE, tuple(
                c.LeaveMemberResult(m.member_id, m.group_instance_id, E.UNKNOWN_MEMBER_ID) for m in req.members))
        if group.is_in(S.DEAD):
            return c.LeaveGroupResponse(E.COORDINATOR_NOT_AVAILABLE)
        results: list[c.LeaveMemberResult] = []
        removed_any = False
        for ident in req.members:
            if not ident.member_id:
                if ident.group_instance_id is not None and ident.group_instance_id in group.static_members:
                    self._remove_current_member(group, group.static_members[ident.group_instance_id])
                    results.append(c.LeaveMemberResult(ident.member_id, ident.group_instance_id, E.NONE))
                    removed_any = True
                else:
                    results.append(c.LeaveMemberResult(ident.member_id, ident.group_instance_id,
                                                       E.UNKNOWN_MEMBER_ID))
            elif group.is_pending_member(ident.member_id):
                group.pending_join_members.discard(ident.member_id)
                self.timers.cancel(heartbeat_key(group.group_id, ident.member_id))
                results.append(c.LeaveMemberResult(ident.member_id, ident.group_instance_id, E.NONE))
                removed_any = True
            else:
                invalid = group.validate_member(ident.member_id, ident.group_instance_id)
                if not invalid:
                    self._remove_current_member(group, ident.member_id)
                    results.append(c.LeaveMemberResult(ident.member_id, ident.group_instance_id, E.NONE))
                    removed_any = True
                else:
                    results.append(c.LeaveMemberResult(ident.member_id, ident.group_instance_id, invalid))
        if removed_any:
            if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, "members left the group")
            elif group.is_in(S.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group)
        return c.LeaveGroupResponse(E.NONE, tuple(results))

    def _remove_current_member(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members.get(member_id)
        self.timers.cancel(heartbeat_key(group.group_id, member_id))
        if member is not None:
            self._fail_parked(member, E.UNKNOWN_MEMBER_ID)
        group.remove(member_id)

    def write_group(self, group: ClassicGroup) -> bool:
        """Write the group's metadata record, unless it is larger than one write may be (Kafka's
        message.max.bytes on __consumer_offsets): members' metadata and assignments are the
        clients' to choose, and an oversized entry would fail the whole partition's append."""
        record = Record(GroupMetadataKey(group.group_id), group.to_record_value())
        if record_size(record) > self.config.max_record_batch_bytes:
            return False
        self.w.write(record)
        return True

    # ================================================================ admin

    def describe_group(self, req: c.DescribeGroupsRequest) -> c.DescribeGroupsResponse:
        group = self.groups.get(req.group_id)
        if group is None or group.is_in(S.DEAD):
            return c.DescribeGroupsResponse(E.GROUP_ID_NOT_FOUND, req.group_id, state="Dead",
                                            error_message=f"Group {req.group_id} not found.")
        stable = group.is_in(S.STABLE)
        members = tuple(
            c.DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                              m.metadata(group.protocol_name) if stable else b"", m.assignment)
            for m in group.members.values()
        )
        return c.DescribeGroupsResponse(
            E.NONE, req.group_id, state=group.state.value, protocol_type=group.protocol_type or "",
            protocol_data=(group.protocol_name or "") if stable else "", members=members)

    def list_groups(self, req: c.ListGroupsRequest) -> c.ListGroupsResponse:
        states = {s.strip().lower() for s in req.states_filter}
        types = {t.strip().lower() for t in req.types_filter}
        out = []
        for group in self.groups.values():
            if group.is_in(S.DEAD):
                continue
            if states and group.state.value.lower() not in states:
                continue
            if types and "classic" not in types:
                continue
            out.append(c.ListedGroup(group.group_id, group.protocol_type or "", group.state.value))
        return c.ListGroupsResponse(E.NONE, tuple(out))

    def delete_group(self, group_id: str) -> None:
        """Forget the group and its timers (its tombstones are the shard's to write)."""
        group = self.groups.pop(group_id, None)
        if group is not None:
            for member_id in list(group.members):
                self.timers.cancel(heartbeat_key(group_id, member_id))
            self.timers.cancel(join_key(group_id))
            self.timers.cancel(sync_key(group_id))
