"""LeaveGroup behaviour, ported from Kafka's GroupMetadataManagerTest (reference §1.11, §4.7)."""

from __future__ import annotations

from coordinator import commands as c
from coordinator.errors import ErrorCode
from coordinator.group import GroupState
from coordinator.records import GroupMetadataKey, GroupMetadataValue, Record

from .harness import Harness
from .offset_helpers import join_all, join_static_stable, leave_errors, pending_member

E = ErrorCode
S = GroupState


def test_leave_group_unknown_group() -> None:
    """testLeaveGroupUnknownGroup"""
    h = Harness()
    resp = h.leave("unknown", ("m1", None), ("", "i1"))
    assert resp.error == E.NONE
    assert resp.members == (c.LeaveMemberResult("m1", None, E.UNKNOWN_MEMBER_ID),
                            c.LeaveMemberResult("", "i1", E.UNKNOWN_MEMBER_ID))
    assert h.log == []


def test_leave_group_invalid_group() -> None:
    """testLeaveGroupInvalidGroup"""
    h = Harness()
    assert h.leave("", ("m1", None)).error == E.INVALID_GROUP_ID


def test_leave_group_unknown_member_id_existing_group() -> None:
    """testLeaveGroupUnknownMemberIdExistingGroup"""
    h = Harness()
    [m] = h.join_stable("g", 1)
    n = len(h.log)
    resp = h.leave("g", ("unknown", None))
    assert (resp.error, leave_errors(resp)) == (E.NONE, [E.UNKNOWN_MEMBER_ID])
    assert h.group("g").state is S.STABLE and list(h.group("g").members) == [m]
    assert h.log[n:] == []


def test_leave_dead_group() -> None:
    """testLeaveDeadGroup"""
    h = Harness()
    [m] = h.join_stable("g", 1)
    h.group("g").transition_to(S.DEAD, h.now)
    resp = h.leave("g", (m, None))
    assert resp.error == E.COORDINATOR_NOT_AVAILABLE
    assert resp.members == ()


def test_valid_leave_group() -> None:
    """testValidLeaveGroup"""
    h = Harness()
    [m] = h.join_stable("g", 1)
    n = len(h.log)
    h.sleep(10)
    resp = h.leave("g", (m, None))
    assert (resp.error, resp.members) == (E.NONE, (c.LeaveMemberResult(m, None, E.NONE),))
    g = h.group("g")
    assert g.state is S.EMPTY and g.members == {} and g.generation_id == 2
    assert h.log[n:] == [Record(GroupMetadataKey("g"), GroupMetadataValue("consumer", 2, None, None, h.now, ()))]
    assert f"heartbeat-g-{m}" not in h.shard.timers


def test_leave_group_triggers_rebalance_for_remaining_members() -> None:
    """testValidLeaveGroup (non-last member: Stable -> PreparingRebalance, nothing written)"""
    h = Harness()
    leader, follower = h.join_stable("g", 2)
    n = len(h.log)
    assert leave_errors(h.leave("g", (follower, None))) == [E.NONE]
    g = h.group("g")
    assert g.state is S.PREPARING_REBALANCE and list(g.members) == [leader]
    assert h.log[n:] == []
    assert h.heartbeat("g", leader, 1) == E.REBALANCE_IN_PROGRESS
    r = h.join("g", leader).response
    assert (r.error, r.generation_id) == (E.NONE, 2)


def test_leave_group_answers_parked_join_unknown_member() -> None:
    """testValidLeaveGroup (a leaving member's parked JoinGroup is answered UNKNOWN_MEMBER_ID)"""
    h = Harness()
    leader, follower = h.join_stable("g", 2, rebalance_ms=30_000)
    rejoin = h.join("g", leader)
    assert not rejoin.done
    assert leave_errors(h.leave("g", (leader, None))) == [E.NONE]
    assert rejoin.response.error == E.UNKNOWN_MEMBER_ID


def test_leave_group_with_fenced_instance_id() -> None:
    """testLeaveGroupWithFencedInstanceId"""
    h = Harness()
    join_static_stable(h, "g", ["i1"])
    resp = h.leave("g", ("other-member-id", "i1"))
    assert resp.members == (c.LeaveMemberResult("other-member-id", "i1", E.FENCED_INSTANCE_ID),)
    assert h.group("g").state is S.STABLE


def test_leave_group_static_member_with_unknown_member_id() -> None:
    """testLeaveGroupStaticMemberWithUnknownMemberId"""
    h = Harness()
    ids = join_static_stable(h, "g", ["i1"])
    resp = h.leave("g", ("", "i1"))
    assert resp.members == (c.LeaveMemberResult("", "i1", E.NONE),)
    g = h.group("g")
    assert g.state is S.EMPTY and ids["i1"] not in g.members and g.static_members == {}


def test_static_members_valid_batch_leave_group() -> None:
    """testStaticMembersValidBatchLeaveGroup"""
    h = Harness()
    ids = join_static_stable(h, "g", ["i1", "i2"])
    resp = h.leave("g", (ids["i1"], "i1"), ("", "i2"))
    assert (resp.error, leave_errors(resp)) == (E.NONE, [E.NONE, E.NONE])
    assert h.group("g").state is S.EMPTY


def test_static_members_fenced_instance_batch_leave_group() -> None:
    """testStaticMembersFencedInstanceBatchLeaveGroup"""
    h = Harness()
    ids = join_static_stable(h, "g", ["i1", "i2"])
    resp = h.leave("g", (ids["i1"], "i1"), ("wrong", "i2"))
    assert leave_errors(resp) == [E.NONE, E.FENCED_INSTANCE_ID]
    g = h.group("g")
    assert list(g.members) == [ids["i2"]] and g.state is S.PREPARING_REBALANCE


def test_static_members_unknown_instance_batch_leave_group() -> None:
    """testStaticMembersUnknownInstanceBatchLeaveGroup"""
    h = Harness()
    ids = join_static_stable(h, "g", ["i1", "i2"])
    resp = h.leave("g", ("", "unknown-instance"), (ids["i2"], "i2"), ("", None))
    assert leave_errors(resp) == [E.UNKNOWN_MEMBER_ID, E.NONE, E.UNKNOWN_MEMBER_ID]
    assert list(h.group("g").members) == [ids["i1"]]


def _prepare_with_pending(h: Harness) -> tuple[str, str, str, object, object]:
    """Stable group of two, a pending (KIP-394) member, then both members rejoin."""
    leader, follower = h.join_stable("g", 2, rebalance_ms=30_000)
    pending = pending_member(h)
    assert h.group("g").state is S.STABLE and pending in h.group("g").pending_join_members
    j1, j2 = h.join("g", leader, rebalance_ms=30_000), h.join("g", follower, rebalance_ms=30_000)
    assert not j1.done and not j2.done  # the pending member blocks join completion
    assert h.group("g").has_all_members_joined() is False
    return leader, follower, pending, j1, j2


def test_pending_members_leave_group() -> None:
    """testPendingMembersLeaveGroup"""
    h = Harness()
    leader, follower, pending, j1, j2 = _prepare_with_pending(h)
    resp = h.leave("g", (pending, None))
    assert resp.members == (c.LeaveMemberResult(pending, None, E.NONE),)
    assert f"heartbeat-g-{pending}" not in h.shard.timers
    assert j1.response.generation_id == 2 and j2.response.generation_id == 2  # the rebalance completes
    assert set(h.group("g").members) == {leader, follower}


def test_pending_member_batch_leave_group() -> None:
    """testPendingMemberBatchLeaveGroup"""
    h = Harness()
    leader, follower, pending, j1, j2 = _prepare_with_pending(h)
    pending2 = pending_member(h)
    resp = h.leave("g", (pending, None), (pending2, None))
    assert leave_errors(resp) == [E.NONE, E.NONE]
    assert h.group("g").pending_join_members == set()
    assert (j1.response.error, j2.response.error) == (E.NONE, E.NONE)


def test_joined_member_pending_member_batch_leave_group() -> None:
    """testJoinedMemberPendingMemberBatchLeaveGroup"""
    h = Harness()
    leader, follower, pending, j1, j2 = _prepare_with_pending(h)
    resp = h.leave("g", (follower, None), (pending, None))
    assert leave_errors(resp) == [E.NONE, E.NONE]
    assert j2.response.error == E.UNKNOWN_MEMBER_ID
    r = j1.response
    assert (r.error, r.generation_id, r.leader) == (E.NONE, 2, leader)
    assert list(h.group("g").members) == [leader]


def test_joined_member_pending_member_batch_leave_group_with_unknown_member() -> None:
    """testJoinedMemberPendingMemberBatchLeaveGroupWithUnknownMember"""
    h = Harness()
    leader, follower, pending, j1, j2 = _prepare_with_pending(h)
    resp = h.leave("g", (follower, None), (pending, None), ("unknown", None))
    assert leave_errors(resp) == [E.NONE, E.NONE, E.UNKNOWN_MEMBER_ID]
    assert j1.response.generation_id == 2


def test_leave_during_completing_rebalance_rebalances() -> None:
    """testValidLeaveGroup (CompletingRebalance: parked syncs get REBALANCE_IN_PROGRESS)"""
    h = Harness()
    responses = join_all(h, [h.join("g"), h.join("g")])
    leader = responses[0].leader
    follower = next(r.member_id for r in responses if r.member_id != leader)
    sync = h.sync("g", follower, 1)
    assert leave_errors(h.leave("g", (leader, None))) == [E.NONE]
    assert sync.response.error == E.REBALANCE_IN_PROGRESS
    assert h.group("g").state is S.PREPARING_REBALANCE
