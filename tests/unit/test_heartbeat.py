"""Heartbeat and session behaviour, ported from Kafka's GroupMetadataManagerTest (reference §1.10, §4.6)."""

from __future__ import annotations

from coordinator.errors import ErrorCode
from coordinator.group import GroupState
from coordinator.records import GroupMetadataKey, GroupMetadataValue, Record

from .harness import Harness
from .offset_helpers import heartbeat_deadline, join_completing, join_static_stable

E = ErrorCode
S = GroupState


def test_heartbeat_unknown_group() -> None:
    """testHeartbeatUnknownGroup"""
    h = Harness()
    assert h.heartbeat("unknown", "m", 1) == E.UNKNOWN_MEMBER_ID
    assert h.log == []


def test_heartbeat_empty_group() -> None:
    """testHeartbeatEmptyGroup"""
    h = Harness()
    [m] = h.join_stable("g", 1)
    h.leave("g", (m, None))
    assert h.group("g").state is S.EMPTY
    gen = h.group("g").generation_id
    assert h.heartbeat("g", m, gen) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("g", "", gen) == E.UNKNOWN_MEMBER_ID


def test_heartbeat_unknown_member_existing_group() -> None:
    """testHeartbeatUnknownMemberExistingGroup"""
    h = Harness()
    h.join_stable("g", 1)
    assert h.heartbeat("g", "unknown-member", 1) == E.UNKNOWN_MEMBER_ID


def test_heartbeat_fenced_and_unknown_instance() -> None:
    """testHeartbeatUnknownMemberExistingGroup (static: FENCED_INSTANCE_ID / unknown instance)"""
    h = Harness()
    ids = join_static_stable(h, "g", ["i1"])
    gen = h.group("g").generation_id
    assert h.heartbeat("g", "wrong-id", gen, "i1") == E.FENCED_INSTANCE_ID
    assert h.heartbeat("g", ids["i1"], gen, "i-unknown") == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("g", ids["i1"], gen, "i1") == E.NONE


def test_heartbeat_dead_group() -> None:
    """testHeartbeatDeadGroup"""
    h = Harness()
    [m] = h.join_stable("g", 1)
    h.group("g").transition_to(S.DEAD, h.now)
    assert h.heartbeat("g", m, 1) == E.COORDINATOR_NOT_AVAILABLE


def test_heartbeat_illegal_generation() -> None:
    """testHeartbeatIllegalGeneration"""
    h = Harness()
    [m] = h.join_stable("g", 1)
    before = heartbeat_deadline(h, "g", m)
    h.sleep(100)
    assert h.heartbeat("g", m, 2) == E.ILLEGAL_GENERATION
    assert heartbeat_deadline(h, "g", m) == before  # no session refresh


def test_heartbeat_during_preparing_rebalance() -> None:
    """testHeartbeatDuringPreparingRebalance"""
    h = Harness()
    pending = h.join("g", session_ms=10_000, rebalance_ms=10_000)
    assert not pending.done
    m = next(iter(h.group("g").members))
    assert h.group("g").state is S.PREPARING_REBALANCE
    assert h.heartbeat("g", m, 0) == E.REBALANCE_IN_PROGRESS


def test_heartbeat_during_rebalance_causes_rebalance_in_progress() -> None:
    """testHeartbeatDuringRebalanceCausesRebalanceInProgress"""
    h = Harness()
    leader, follower = h.join_stable("g", 2, session_ms=10_000, rebalance_ms=30_000)
    h.join("g", leader)  # leader rejoins: rebalance
    assert h.group("g").state is S.PREPARING_REBALANCE
    h.sleep(1_000)
    assert h.heartbeat("g", follower, 1) == E.REBALANCE_IN_PROGRESS
    assert heartbeat_deadline(h, "g", follower) == h.now + 10_000  # session refreshed


def test_heartbeat_during_completing_rebalance() -> None:
    """testHeartbeatDuringCompletingRebalance"""
    h = Harness()
    leader, _, gen = join_completing(h, n=1)
    assert h.group("g").state is S.COMPLETING_REBALANCE
    assert h.heartbeat("g", leader, gen) == E.NONE
    assert heartbeat_deadline(h, "g", leader) == h.now + 10_000


def test_valid_heartbeat() -> None:
    """testValidHeartbeat"""
    h = Harness()
    leader, follower = h.join_stable("g", 2)
    n = len(h.log)
    assert h.heartbeat("g", leader, 1) == E.NONE
    assert h.heartbeat("g", follower, 1) == E.NONE
    assert h.log[n:] == []  # heartbeats write nothing


def test_classic_group_member_session_timeout() -> None:
    """testClassicGroupMemberSessionTimeout"""
    h = Harness()
    [m] = h.join_stable("g", 1, session_ms=5_000)
    n = len(h.log)
    h.sleep(4_999)
    assert m in h.group("g").members
    h.sleep(1)
    g = h.group("g")
    assert g.state is S.EMPTY and g.members == {} and g.generation_id == 2
    assert h.log[n:] == [Record(GroupMetadataKey("g"), GroupMetadataValue("consumer", 2, None, None, h.now, ()))]
    assert h.heartbeat("g", m, 1) == E.UNKNOWN_MEMBER_ID


def test_classic_group_member_heartbeat_maintains_session() -> None:
    """testClassicGroupMemberHeartbeatMaintainsSession"""
    h = Harness()
    [m] = h.join_stable("g", 1, session_ms=5_000)
    for _ in range(10):
        h.sleep(2_500)
        assert h.heartbeat("g", m, 1) == E.NONE
    assert h.group("g").state is S.STABLE and list(h.group("g").members) == [m]


def test_classic_group_member_session_timeout_during_rebalance() -> None:
    """testClassicGroupMemberSessionTimeoutDuringRebalance"""
    h = Harness()
    leader, follower = h.join_stable("g", 2, session_ms=5_000, rebalance_ms=30_000)
    rejoin = h.join("g", leader, session_ms=5_000, rebalance_ms=30_000)
    assert h.group("g").state is S.PREPARING_REBALANCE
    h.sleep(5_000)  # the follower never rejoins nor heartbeats
    r = rejoin.response
    assert (r.error, r.generation_id, r.leader) == (E.NONE, 2, leader)
    g = h.group("g")
    assert list(g.members) == [leader] and g.state is S.COMPLETING_REBALANCE
    assert h.heartbeat("g", follower, 2) == E.UNKNOWN_MEMBER_ID


def test_awaiting_join_member_session_does_not_expire() -> None:
    """testClassicGroupMemberSessionTimeoutDuringRebalance (a member awaiting join is not expired)"""
    h = Harness()
    leader, follower = h.join_stable("g", 2, session_ms=5_000, rebalance_ms=30_000)
    rejoin = h.join("g", leader, session_ms=5_000, rebalance_ms=30_000)
    h.sleep(2_500)
    assert h.heartbeat("g", follower, 1) == E.REBALANCE_IN_PROGRESS
    h.sleep(4_999)  # the leader's session passed while it waits in JoinGroup
    assert not rejoin.done
    assert leader in h.group("g").members
