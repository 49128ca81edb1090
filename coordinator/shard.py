"""One ``__consumer_offsets`` partition's coordinator: loads, dispatches and replays.

``handle`` takes a request, an opaque token and ``now_ms`` and returns a ``Result``: the
records to append and the completions (token, response) this step produced. The
runtime releases completions only once everything written before them is committed.
The work is done by the classic-group handlers (``classic_groups``), the consumer-group
handlers (``consumer_groups``, KIP-848) and the offset handlers (``offset_handlers``), all
writing through one ``WriteContext``; what spans them (group deletion, the periodic expiry)
is here, as in Kafka's GroupCoordinatorShard.

Two kinds of state live here:
- durable state (``durable_groups``, ``offsets``, ``consumer_groups``), changed only by
  replaying records (a consumer group's records are applied as the heartbeat writes them);
- soft state (``groups``: classic members, parked requests; timers), owned by the handlers
  and rebuilt from the durable state on load (``load``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

from . import commands as c
from .classic_groups import ClassicGroupHandlers
from .config import GroupConfig
from .consumer_group.group import ConsumerGroup
from .consumer_group.group import GroupState as ConsumerGroupState
from .consumer_group.heartbeat_request import invalid as consumer_invalid
from .consumer_groups import ConsumerGroupHandlers
from .errors import ErrorCode
from .group import ClassicGroup, GroupState, Token
from .group_census import GroupCensus
from .image import DurableImage, replay_into
from .mixed_groups import MixedGroupHandlers
from .offset_handlers import OffsetHandlers
from .records import GroupMetadataKey, GroupMetadataValue, OffsetCommitValue, Record
from .share_group.group import ShareGroup
from .share_group.heartbeat import invalid as share_invalid
from .share_groups import ShareGroupHandlers
from .timers import EXPIRE_KEY, TimerKind, TimerSet, heartbeat_key
from .txn_offsets import PendingOffsets
from .write_context import Result, WriteContext

__all__ = ["GroupCoordinatorShard", "Result"]

E = ErrorCode
S = GroupState


def _counter_ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"{next(counter):032x}"


class GroupCoordinatorShard:
    def __init__(self, config: GroupConfig | None = None, new_id: Callable[[], str] | None = None,
                 image: DurableImage | None = None) -> None:
        """With ``image``, the shard takes over that already-replayed durable state (the caller
        gives it up)."""
        self.config = config or GroupConfig()
        self._new_id = new_id or _counter_ids()
        self.groups: dict[str, ClassicGroup] = {}
        self.durable_groups: dict[str, GroupMetadataValue] = image.groups if image is not None else {}
        self.offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = (
            image.offsets if image is not None else {})
        self.pending = image.pending if image is not None else PendingOffsets()  # transactional offsets
        self.consumer_groups: dict[str, ConsumerGroup] = image.consumer_groups if image is not None else {}
        self.share_groups: dict[str, ShareGroup] = image.share_groups if image is not None else {}
        self.timers = TimerSet()
        self.w = WriteContext(self.timers)
        self.classic = ClassicGroupHandlers(self.config, self._new_id, self.groups, self.timers, self.w)
        self.consumer = ConsumerGroupHandlers(self.config, self._new_id, self.consumer_groups, self.groups,
                                              self.classic.delete_group, self.timers, self.w)
        self.mixed = MixedGroupHandlers(self.consumer, self.classic)
        self.consumer.after_fence = self.mixed.maybe_downgrade
        self.offset_handlers = OffsetHandlers(self.config, self.groups, self.offsets, self.pending, self.classic,
                                              self.consumer, self.w)
        self.share = ShareGroupHandlers(self.config, self.share_groups, self.timers, self.w)
        self.census = GroupCensus()  # which groups each step touched, for GroupsObserved

    def _begin(self, now_ms: int) -> None:
        self.w.begin(now_ms)

    def _end(self) -> Result:
        out = self.w.take()
        for record in out.records:  # consumer group records are applied as they are written
            replay_into(self.durable_groups, self.offsets, self.pending, record, None)
        return out

    # ================================================================ durable state

    def replay(self, record: Record) -> None:
        """Apply one committed record to durable state (loading)."""
        replay_into(self.durable_groups, self.offsets, self.pending, record, self.consumer_groups, self.share_groups)

    def durable_state(self) -> tuple[dict[str, GroupMetadataValue], dict[str, dict[tuple[str, int], OffsetCommitValue]]]:
        return (dict(self.durable_groups), {g: dict(o) for g, o in self.offsets.items()})

    @classmethod
    def load(cls, records: Iterable[Record], now_ms: int, config: GroupConfig | None = None,
             new_id: Callable[[], str] | None = None,
             image: DurableImage | None = None) -> tuple[GroupCoordinatorShard, Result]:
        """Build a shard by replaying a partition, then arm timers (Kafka's onLoaded).

        With ``image``, the shard takes over that already-replayed state (the caller gives it
        up) and ``records`` are the ones that follow it."""
        shard = cls(config, new_id, image)
        for record in records:
            shard.replay(record)
        shard._begin(now_ms)
        for group_id, value in shard.durable_groups.items():
            shard.groups[group_id] = ClassicGroup.from_record_value(group_id, value)
        for group_id in [*shard.offsets, *shard.pending.by_group]:
            if group_id not in shard.groups and group_id not in shard.consumer_groups \
                    and group_id not in shard.share_groups:
                shard.groups[group_id] = ClassicGroup(group_id)  # a simple (offsets-only) group
        for group in shard.groups.values():
            for member in group.members.values():
                shard.w.schedule(heartbeat_key(group.group_id, member.member_id),
                                member.session_timeout_ms, TimerKind.HEARTBEAT,
                                group.group_id, member.member_id)
            if len(group.members) > shard.config.max_size:
                shard.classic.prepare_rebalance(group, "loaded group is over capacity")
        shard.consumer.arm_loaded()
        shard.share.arm_loaded()
        shard.w.schedule(EXPIRE_KEY, shard.config.offsets_retention_check_interval_ms,
                        TimerKind.EXPIRE_OFFSETS)
        return shard, shard._end()

    def unload(self) -> list[Token]:
        """Kafka's onUnloaded: every group goes Dead; returns the parked tokens to fail."""
        tokens: list[Token] = []
        for group in self.groups.values():
            for m in group.members.values():
                if m.awaiting_join is not None:
                    tokens.append(m.awaiting_join)
                    m.awaiting_join = None
                if m.awaiting_sync is not None:
                    tokens.append(m.awaiting_sync)
                    m.awaiting_sync = None
            group.transition_to(S.DEAD, self.w.now)
        self.timers.clear()
        return tokens

    def rebalancing(self) -> bool:
        """Some group here is between assignments (classic: PreparingRebalance or
        CompletingRebalance; consumer protocol: Assigning or Reconciling). A coordinator move now
        would lose the rebalance's progress: every member would join again."""
        return (any(g.state in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE) for g in self.groups.values())
                or any(g.state in (ConsumerGroupState.ASSIGNING, ConsumerGroupState.RECONCILING)
                       for g in self.consumer_groups.values()))

    def parked_tokens(self) -> list[Token]:
        out: list[Token] = []
        for group in self.groups.values():
            for m in group.members.values():
                if m.awaiting_join is not None:
                    out.append(m.awaiting_join)
                if m.awaiting_sync is not None:
                    out.append(m.awaiting_sync)
        return out

    # ================================================================ dispatch

    def handle(self, request: c.Request, token: Token, now_ms: int) -> Result:
        self._begin(now_ms)
        self.census.touch(getattr(request, "group_id", None))
        self.census.touch_many(getattr(request, "group_ids", ()))
        getattr(self, _HANDLERS[type(request)])(request, token)
        return self._end()

    # one per request type (``_HANDLERS``); a classic member's request to a group that is a
    # consumer group (an online upgrade) goes to the mixed handlers

    def _on_consumer_heartbeat(self, request: c.ConsumerGroupHeartbeatRequest, token: Token) -> None:
        # the request's own checks come first (Kafka makes them before the group is looked up)
        bad = consumer_invalid(request.heartbeat, self.config.consumer_of(request.group_id).assignors)
        other = None if bad is not None else self._other_kind(request.group_id, "consumer")
        self.w.respond(token, other and c.ConsumerGroupHeartbeatResponse(E.GROUP_ID_NOT_FOUND, other)
                       or self._consumer_heartbeat(request))

    def _on_consumer_describe(self, request: c.ConsumerGroupDescribeRequest, token: Token) -> None:
        other = self._other_kind(request.group_id, "consumer")
        self.w.respond(token, other and c.ConsumerGroupDescribeResponse(E.GROUP_ID_NOT_FOUND, request.group_id, other)
                       or self.consumer.describe(request))

    def _other_kind(self, group_id: str, kind: str) -> str | None:
        """Why a group id cannot be served as a ``kind`` group (it names a group of another kind;
        Kafka converts none of them to or from share groups), or None."""
        if kind == "share":
            classic = self.groups.get(group_id)
            if group_id in self.consumer_groups or (classic is not None and not classic.is_in(S.DEAD)):
                return f"Group {group_id} is not a share group."
        elif group_id in self.share_groups:
            return f"Group {group_id} is not a {kind} group."
        return None

    def _on_share_heartbeat(self, request: c.ShareGroupHeartbeatRequest, token: Token) -> None:
        other = None if share_invalid(request.heartbeat) is not None else self._other_kind(request.group_id, "share")
        self.w.respond(token, other and c.ShareGroupHeartbeatResponse(E.GROUP_ID_NOT_FOUND, other)
                       or self.share.heartbeat(request))

    def _on_share_describe(self, request: c.ShareGroupDescribeRequest, token: Token) -> None:
        other = self._other_kind(request.group_id, "share")
        self.w.respond(token, other and c.ShareGroupDescribeResponse(E.GROUP_ID_NOT_FOUND, request.group_id, other)
                       or self.share.describe(request))

    def _on_share_state(self, request: c.ShareStateRequest, token: Token) -> None:
        self.w.respond(token, self.share.share_state(request))

    def _on_share_offsets(self, request: c.ShareOffsetsRequest, token: Token) -> None:
        self.w.respond(token, self.share.offsets(request))

    def _on_join(self, request: c.JoinGroupRequest, token: Token) -> None:
        if request.group_id in self.share_groups:
            # a classic member cannot join a group of another kind (Kafka: no member id given)
            self.w.respond(token, c.JoinGroupResponse(E.INCONSISTENT_GROUP_PROTOCOL))
            return
        self._join_group(request, token)

    def _on_sync(self, request: c.SyncGroupRequest, token: Token) -> None:
        consumer = self.consumer_groups.get(request.group_id)
        if consumer is not None:
            self.w.respond(token, self.mixed.sync(consumer, request))
        else:
            self.classic.sync_group(request, token)

    def _on_heartbeat(self, request: c.HeartbeatRequest, token: Token) -> None:
        consumer = self.consumer_groups.get(request.group_id)
        self.w.respond(token, self.mixed.heartbeat(consumer, request) if consumer is not None
                       else self.classic.heartbeat(request))

    def _on_leave(self, request: c.LeaveGroupRequest, token: Token) -> None:
        consumer = self.consumer_groups.get(request.group_id)
        self.w.respond(token, self.mixed.leave(consumer, request) if consumer is not None
                       else self.classic.leave_group(request))

    # A share group keeps no committed offsets: Kafka answers GROUP_ID_NOT_FOUND ("not a consumer group").

    def _on_offset_commit(self, request: c.OffsetCommitRequest | c.TxnOffsetCommitRequest, token: Token) -> None:
        if request.group_id in self.share_groups:
            self.w.respond(token, c.error_response(request, E.GROUP_ID_NOT_FOUND))
            return
        self.w.respond(token, self.offset_handlers.offset_commit(request))

    def _on_offset_fetch(self, request: c.OffsetFetchRequest, token: Token) -> None:
        self.w.respond(token, c.OffsetFetchResponse(E.GROUP_ID_NOT_FOUND) if request.group_id in self.share_groups
                       else self.offset_handlers.offset_fetch(request))

    def _on_offset_delete(self, request: c.OffsetDeleteRequest, token: Token) -> None:
        self.w.respond(token, c.OffsetDeleteResponse(E.GROUP_ID_NOT_FOUND) if request.group_id in self.share_groups
                       else self.offset_handlers.offset_delete(request))

    def _on_describe(self, request: c.DescribeGroupsRequest, token: Token) -> None:
        if request.group_id in self.consumer_groups or request.group_id in self.share_groups:
            self.w.respond(token, c.DescribeGroupsResponse(
                ErrorCode.GROUP_ID_NOT_FOUND, request.group_id, state="Dead",
                error_message=f"Group {request.group_id} is not a classic group."))
            return
        self.w.respond(token, self.classic.describe_group(request))

    def _on_list(self, request: c.ListGroupsRequest, token: Token) -> None:
        self.w.respond(token, self._list_groups(request))

    def _on_delete(self, request: c.DeleteGroupsRequest, token: Token) -> None:
        self.w.respond(token, self._delete_groups(request))

    def _on_end_txn_marker(self, request: c.EndTxnMarkerRequest, token: Token) -> None:
        self.w.respond(token, self.offset_handlers.end_txn_marker(request))

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def fire_due(self, now_ms: int) -> Result | None:
        """Fire the earliest due timer, if any; ``None`` when nothing is due."""
        timer = self.timers.pop_due(now_ms)
        if timer is None:
            return None
        self._begin(now_ms)
        group = self.groups.get(timer.group_id)
        self.census.touch(timer.group_id)
        if timer.kind is TimerKind.EXPIRE_OFFSETS:
            self.census.touch_all()
            self._cleanup_group_metadata()
        elif timer.kind is TimerKind.CONSUMER_SESSION:
            self.consumer.session_expired(timer.group_id, timer.member_id)
        elif timer.kind is TimerKind.CONSUMER_REBALANCE:
            self.consumer.rebalance_expired(timer.group_id, timer.member_id, timer.args[0])
        elif timer.kind is TimerKind.SHARE_SESSION:
            self.share.session_expired(timer.group_id, timer.member_id)
        elif timer.kind is TimerKind.CONSUMER_CLASSIC_JOIN:
            self.mixed.join_expired(timer.group_id, timer.member_id)
        elif group is None:
            pass
        elif timer.kind is TimerKind.HEARTBEAT:
            self.classic.expire_member_heartbeat(group, timer.member_id)
        elif timer.kind is TimerKind.JOIN:
            self.classic.complete_join(group)
        elif timer.kind is TimerKind.INITIAL_JOIN:
            self.classic.try_complete_initial_rebalance(group, timer.args[0], timer.args[1])
        elif timer.kind is TimerKind.SYNC:
            self.classic.expire_pending_sync(group, timer.args[0])
        return self._end()

    # ================================================================ across groups and offsets

    def _consumer_heartbeat(self, req: c.ConsumerGroupHeartbeatRequest) -> c.ConsumerGroupHeartbeatResponse:
        """A consumer-protocol member joining a classic group with members converts it (the online
        upgrade); the rest is the consumer group's."""
        classic = self.groups.get(req.group_id)
        if (classic is not None and classic.members and req.heartbeat.member_epoch == 0
                and not classic.is_in(S.DEAD)):
            why = self.mixed.upgrade(classic, req.topics)
            if why is not None:
                return c.ConsumerGroupHeartbeatResponse(
                    E.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {req.group_id} to consumer group: {why}.")
        return self.consumer.heartbeat(req)

    def _join_group(self, req: c.JoinGroupRequest, token: Token) -> None:
        """A classic JoinGroup into a consumer group: a member of it if it has members, else the
        empty consumer group gives way to a classic group (Kafka's maybeDeleteEmptyConsumerGroup)."""
        consumer = self.consumer_groups.get(req.group_id)
        if consumer is not None:
            if consumer.members:
                return self.mixed.join(consumer, req, token)
            self.consumer.remove(req.group_id)
        self.classic.join_group(req, token)

    def _list_groups(self, req: c.ListGroupsRequest) -> c.ListGroupsResponse:
        states = {s.strip().lower() for s in req.states_filter}
        types = {t.strip().lower() for t in req.types_filter}
        classic = self.classic.list_groups(req)
        return c.ListGroupsResponse(classic.error, (*classic.groups, *self.consumer.listed(states, types),
                                                    *self.share.listed(states, types)))

    def _delete_groups(self, req: c.DeleteGroupsRequest) -> c.DeleteGroupsResponse:
        results = []
        for group_id in dict.fromkeys(req.group_ids):
            group = self.groups.get(group_id)
            if group_id in self.share_groups:
                # Kafka also deletes the group's share state (DeleteShareGroupState) first
                if self.share_groups[group_id].members:
                    results.append((group_id, E.NON_EMPTY_GROUP))
                else:
                    self.share.remove(group_id)
                    results.append((group_id, E.NONE))
            elif group_id in self.consumer_groups:
                if self.consumer_groups[group_id].members:
                    results.append((group_id, E.NON_EMPTY_GROUP))
                    continue
                self.offset_handlers.delete_all_offsets(group_id)
                self.consumer.remove(group_id)
                results.append((group_id, E.NONE))
            elif group is None or group.is_in(S.DEAD):
                results.append((group_id, E.GROUP_ID_NOT_FOUND))
            elif not group.is_in(S.EMPTY):
                results.append((group_id, E.NON_EMPTY_GROUP))
            else:
                self.offset_handlers.delete_all_offsets(group_id)
                self.w.write(Record(GroupMetadataKey(group_id), None))
                self.classic.delete_group(group_id)
                results.append((group_id, E.NONE))
        return c.DeleteGroupsResponse(tuple(results))

    def _cleanup_group_metadata(self) -> None:
        """Kafka's cleanupGroupMetadata: expire offsets, then drop the Empty groups left with none."""
        for group_id, group in list(self.groups.items()):
            if (self.offset_handlers.expire_offsets(group_id, group) and group.is_in(S.EMPTY)
                    and not self.pending.has_open(group_id)):
                self.w.write(Record(GroupMetadataKey(group_id), None))
                self.groups.pop(group_id, None)
        for group_id, consumer in list(self.consumer_groups.items()):
            keep = self.consumer.subscribed_topics(consumer)
            if (self.offset_handlers.expire_consumer_offsets(group_id, keep) and not consumer.members
                    and not self.pending.has_open(group_id)):
                self.consumer.remove(group_id)
        self.w.schedule(EXPIRE_KEY, self.config.offsets_retention_check_interval_ms, TimerKind.EXPIRE_OFFSETS)


# The shard's handler of each request type (a missing or extra entry fails at import).
_HANDLERS: dict[type, str] = {
    c.ConsumerGroupHeartbeatRequest: "_on_consumer_heartbeat",
    c.ConsumerGroupDescribeRequest: "_on_consumer_describe",
    c.ShareGroupHeartbeatRequest: "_on_share_heartbeat",
    c.ShareGroupDescribeRequest: "_on_share_describe",
    c.ShareStateRequest: "_on_share_state",
    c.ShareOffsetsRequest: "_on_share_offsets",
    c.JoinGroupRequest: "_on_join",
    c.SyncGroupRequest: "_on_sync",
    c.HeartbeatRequest: "_on_heartbeat",
    c.LeaveGroupRequest: "_on_leave",
    c.OffsetCommitRequest: "_on_offset_commit",
    c.TxnOffsetCommitRequest: "_on_offset_commit",
    c.OffsetFetchRequest: "_on_offset_fetch",
    c.OffsetDeleteRequest: "_on_offset_delete",
    c.DescribeGroupsRequest: "_on_describe",
    c.ListGroupsRequest: "_on_list",
    c.DeleteGroupsRequest: "_on_delete",
    c.EndTxnMarkerRequest: "_on_end_txn_marker",
}
c.check_covers(_HANDLERS, "shard._HANDLERS")
