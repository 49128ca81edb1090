"""JoinGroup rebalance mechanics and timing: initial delay, new-member and session expiry (GMMT §4.2)."""

from __future__ import annotations

import pytest

from coordinator.errors import ErrorCode
from coordinator.group import GroupState
from coordinator.records import GroupMetadataKey, GroupMetadataValue, Record
from coordinator.runtime import Reload
from coordinator.timers import heartbeat_key, join_key
from tests.unit.harness import Harness
from tests.unit.join_helpers import config

E = ErrorCode
S = GroupState


def empty_group_value(generation: int, ts: int) -> GroupMetadataValue:
    return GroupMetadataValue("consumer", generation, None, None, ts, ())


# ---------------------------------------------------------------- 14-16. initial delay


def test_first_join_waits_exactly_the_initial_rebalance_delay() -> None:
    """testDelayInitialRebalanceByGroupInitialRebalanceDelayOnEmptyGroup."""
    h = Harness()
    p = h.join("g")
    assert h.group("g").state is S.PREPARING_REBALANCE
    h.sleep(2999)
    assert not p.done
    h.sleep(1)
    assert (p.response.error, p.response.generation_id) == (E.NONE, 1)
    assert h.group("g").state is S.COMPLETING_REBALANCE


def test_member_joining_during_initial_delay_extends_it() -> None:
    """testResetRebalanceDelayWhenNewMemberJoinsGroupDuringInitialRebalance."""
    h = Harness()
    first = h.join("g", rebalance_ms=9000)
    h.sleep(2999)
    second = h.join("g", rebalance_ms=9000)
    h.sleep(2)  # t=3001: past the first delay, but it was extended
    assert not first.done and not second.done
    h.sleep(1501)  # t=4502
    assert not first.done and not second.done
    h.sleep(1497)  # t=5999
    assert not first.done
    h.sleep(1)  # t=6000 = 3000 + recomputed delay of 3000
    assert first.response.generation_id == second.response.generation_id == 1
    assert first.response.leader == first.response.member_id
    assert {m.member_id for m in first.response.members} == {first.response.member_id, second.response.member_id}


def test_initial_delay_extensions_stop_at_the_rebalance_timeout() -> None:
    """testDelayRebalanceUptoRebalanceTimeout."""
    h = Harness()
    first = h.join("g", rebalance_ms=6000)
    second = h.join("g", rebalance_ms=6000)
    h.sleep(3001)
    assert not first.done and not second.done
    third = h.join("g", rebalance_ms=6000)  # would extend again, but the rebalance timeout is reached
    h.sleep(2998)  # t=5999
    assert not third.done
    h.sleep(1)  # t=6000
    for p in (first, second, third):
        assert (p.response.error, p.response.generation_id) == (E.NONE, 1)
    assert len(h.group("g").members) == 3


def test_no_new_member_during_initial_delay_completes_after_one_delay_despite_long_timeout() -> None:
    """testDelayInitialRebalanceByGroupInitialRebalanceDelayOnEmptyGroup (rebalance timeout >> delay)."""
    h = Harness()
    p = h.join("g", rebalance_ms=300_000)
    h.sleep(3000)
    assert p.response.generation_id == 1


# ---------------------------------------------------------------- 17-19. new members vs session expiry


def test_new_member_parked_in_long_rebalance_expires_after_new_member_join_timeout() -> None:
    """testNewMemberJoinExpiration."""
    h = Harness()
    first = h.join("g", session_ms=500_000, rebalance_ms=600_000)
    h.sleep(3000)
    first_id = first.response.member_id
    assert (first.response.leader, first.response.generation_id) == (first_id, 1)
    assert h.group("g").state is S.COMPLETING_REBALANCE
    newcomer = h.join("g", session_ms=5000, rebalance_ms=5000)
    g = h.group("g")
    assert g.state is S.PREPARING_REBALANCE
    assert len(g.members) == 2 and g.num_awaiting_join() == 1
    new_id = next(m for m in g.members if m != first_id)
    assert g.members[new_id].is_new
    h.sleep(299_999)
    assert not newcomer.done
    h.sleep(1)
    assert newcomer.response.error == E.UNKNOWN_MEMBER_ID
    assert newcomer.response.member_id == ""
    assert list(g.members) == [first_id]
    assert heartbeat_key("g", new_id) not in h.shard.timers


def test_new_member_timeout_no_longer_applies_after_join_then_session_expiry_empties_group() -> None:
    """testNewMemberTimeoutCompletion."""
    h = Harness()
    session = 300_000 + 5000
    p = h.join("g", session_ms=session)
    h.sleep(3000)
    r = p.response
    assert (r.error, r.generation_id) == (E.NONE, 1)
    assert not any(m.is_new for m in h.group("g").members.values())
    assert h.sync("g", r.member_id, 1).response.error == E.NONE
    h.sleep(300_000)
    assert list(h.group("g").members) == [r.member_id]
    before = len(h.log)
    h.sleep(5000)  # session (from the sync at t=3000) expires at t=308000
    g = h.group("g")
    assert g.members == {} and g.state is S.EMPTY and g.generation_id == 2
    assert h.log[before:] == [Record(GroupMetadataKey("g"), empty_group_value(2, 308_000))]


def test_members_added_mid_rebalance_follow_session_expiry_after_join_completes() -> None:
    """testNewMemberFailureAfterJoinGroupCompletion."""
    h = Harness()
    [leader] = h.join_stable("g", session_ms=5000, rebalance_ms=10_000)
    other = h.join("g", session_ms=5000, rebalance_ms=10_000)
    again = h.join("g", leader, session_ms=5000, rebalance_ms=10_000)
    assert other.response.error == again.response.error == E.NONE
    assert other.response.generation_id == again.response.generation_id == 2
    other_id = other.response.member_id
    assert not h.group("g").members[other_id].is_new
    # Nobody syncs or heartbeats: both sessions expire; the last one empties the group.
    before = len(h.log)
    h.sleep(5000)
    g = h.group("g")
    assert g.members == {} and g.state is S.EMPTY and g.generation_id == 3
    assert h.log[before:] == [Record(GroupMetadataKey("g"), empty_group_value(3, h.now))]


def test_next_rebalance_completes_for_remaining_members_after_a_member_expires() -> None:
    """testNewMemberFailureAfterJoinGroupCompletion (survivor keeps heartbeating)."""
    h = Harness()
    [leader] = h.join_stable("g", session_ms=5000, rebalance_ms=10_000)
    other = h.join("g", session_ms=5000, rebalance_ms=10_000)
    h.join("g", leader, session_ms=5000, rebalance_ms=10_000)
    assert other.response.generation_id == 2
    assert h.sync("g", leader, 2, assignments={leader: b"a"}).response.error == E.NONE
    h.sleep(4000)
    assert h.heartbeat("g", leader, 2) == E.NONE
    h.sleep(1000)  # other's session expires: Stable -> PreparingRebalance
    g = h.group("g")
    assert list(g.members) == [leader] and g.state is S.PREPARING_REBALANCE
    assert h.heartbeat("g", leader, 2) == E.REBALANCE_IN_PROGRESS
    r = h.join("g", leader, session_ms=5000, rebalance_ms=10_000).response
    assert (r.error, r.generation_id, r.leader) == (E.NONE, 3, leader)
    assert [m.member_id for m in r.members] == [leader]


# ---------------------------------------------------------------- 24-27. join completion


def test_generation_increments_by_one_on_every_completed_rebalance() -> None:
    """testGenerationIdIncrementsOnRebalance."""
    h = Harness()
    [m] = h.join_stable("g")
    assert h.group("g").generation_id == 1
    for expected in (2, 3, 4):
        r = h.join("g", m).response
        assert (r.error, r.generation_id) == (E.NONE, expected)
        assert h.sync("g", m, expected, assignments={m: b"x"}).response.error == E.NONE
        assert h.group("g").generation_id == expected


def test_dynamic_members_that_did_not_rejoin_are_removed_at_join_completion() -> None:
    """testCompleteJoinRemoveNotYetRejoinedDynamicMembers."""
    h = Harness()
    leader, follower = h.join_stable("g", 2, session_ms=30_000, rebalance_ms=10_000)
    lj = h.join("g", leader, session_ms=30_000, rebalance_ms=10_000)
    h.sleep(9999)
    assert not lj.done
    h.sleep(1)
    r = lj.response
    assert (r.error, r.generation_id, r.leader) == (E.NONE, 2, leader)
    assert [m.member_id for m in r.members] == [leader]
    g = h.group("g")
    assert list(g.members) == [leader]
    assert heartbeat_key("g", follower) not in h.shard.timers
    assert h.heartbeat("g", follower, 1) == E.UNKNOWN_MEMBER_ID


def test_join_timer_on_dead_group_does_not_bump_generation() -> None:
    """testCompleteJoinPhaseInEmptyStateSkipsRebalance."""
    h = Harness()
    p = h.join("g", session_ms=1000, rebalance_ms=1000)
    g = h.group("g")
    assert (g.generation_id, g.state) == (0, S.PREPARING_REBALANCE)
    g.transition_to(S.DEAD, h.now)
    before = len(h.log)
    h.sleep(3000)
    assert g.generation_id == 0
    assert g.state is S.DEAD
    assert not p.done
    assert h.log[before:] == []


def test_join_phase_is_extended_while_only_absent_static_members_remain() -> None:
    """testCompleteJoinPhaseNoMembersRejoinedExtendsJoinPhase."""
    h = Harness()
    kw = {"session_ms": 30_000, "rebalance_ms": 10_000}
    first = h.join("g", instance_id="first", **kw)
    h.sleep(3000)
    first_id = first.response.member_id
    second = h.join("g", instance_id="second", **kw)
    assert not second.done
    again = h.join("g", first_id, instance_id="first", **kw)
    assert again.response.generation_id == second.response.generation_id == 2
    second_id = second.response.member_id
    # A dynamic member joins and leaves again: a rebalance in which no static member has rejoined.
    dyn = h.join("g", **kw)
    g = h.group("g")
    assert g.state is S.PREPARING_REBALANCE
    dyn_id = next(m for m in g.members if m not in (first_id, second_id))
    h.leave("g", (dyn_id, None))
    assert dyn.response.error == E.UNKNOWN_MEMBER_ID
    assert g.num_awaiting_join() == 0 and len(g.members) == 2
    h.sleep(10_000)
    assert h.shard.timers.get(join_key("g")).deadline_ms - h.now == 10_000
    h.sleep(10_000)
    assert h.shard.timers.get(join_key("g")).deadline_ms - h.now == 10_000
    assert (g.state, g.generation_id, set(g.members)) == (S.PREPARING_REBALANCE, 2, {first_id, second_id})
    j1 = h.join("g", first_id, instance_id="first", **kw)
    assert not j1.done
    j2 = h.join("g", second_id, instance_id="second", **kw)
    assert j1.response.error == j2.response.error == E.NONE
    assert (g.state, g.generation_id, len(g.members)) == (S.COMPLETING_REBALANCE, 3, 2)


# ---------------------------------------------------------------- 28-33. KIP-394 pending members


def setup_group_with_pending_member(h: Harness) -> tuple[str, str, str]:
    """Kafka's setupGroupWithPendingMember: 2 members Stable, leader rejoining, a pending (v4) third member."""
    first = h.join("g", session_ms=5000, rebalance_ms=10_000)
    second = h.join("g", session_ms=5000, rebalance_ms=10_000)
    h.sleep(3000)
    h.sleep(3000)
    leader, follower = first.response.member_id, second.response.member_id
    assert first.response.generation_id == 1
    h.sync("g", leader, 1, assignments={leader: b"1", follower: b"2"})
    h.sync("g", follower, 1)
    assert h.group("g").state is S.STABLE
    pending = h.join("g", session_ms=2500, version=4).response
    assert pending.error == E.MEMBER_ID_REQUIRED
    # Leader and follower rejoin; the pending member blocks join completion.
    lj = h.join("g", leader, session_ms=5000, rebalance_ms=10_000)
    fj = h.join("g", follower, session_ms=5000, rebalance_ms=10_000)
    assert not lj.done and not fj.done
    g = h.group("g")
    assert g.state is S.PREPARING_REBALANCE and g.pending_join_members == {pending.member_id}
    return leader, follower, pending.member_id


def test_pending_member_joining_completes_the_rebalance() -> None:
    """testJoinGroupCompletionWhenPendingMemberJoins."""
    h = Harness()
    leader, follower, pending = setup_group_with_pending_member(h)
    r = h.join("g", pending, version=4).response
    assert (r.error, r.member_id, r.generation_id) == (E.NONE, pending, 2)
    g = h.group("g")
    assert g.state is S.COMPLETING_REBALANCE
    assert set(g.members) == {leader, follower, pending}
    assert g.pending_join_members == set()


def test_pending_member_that_times_out_lets_the_rebalance_complete() -> None:
    """testJoinGroupCompletionWhenPendingMemberTimesOut."""
    h = Harness()
    leader, follower, pending = setup_group_with_pending_member(h)
    h.sleep(3000)  # > 2500 (pending session), < 5000 (members)
    g = h.group("g")
    assert g.state is S.COMPLETING_REBALANCE
    assert set(g.members) == {leader, follower}
    assert g.pending_join_members == set()
    assert g.generation_id == 2


def test_pending_member_id_with_group_instance_id_is_an_illegal_state() -> None:
    """testJoinGroupExistingPendingMemberWithGroupInstanceIdThrowsException."""
    h = Harness()
    pending = h.join("g", version=4).response.member_id
    r = h.join("g", pending, instance_id="some-instance", version=4).response
    assert r.error == E.UNKNOWN_SERVER_ERROR
    assert h.group("g").members == {}


def test_pending_member_is_removed_when_its_session_expires() -> None:
    """testHeartbeatExpirationShouldRemovePendingMember."""
    h = Harness()
    pending = h.join("g", session_ms=1000, version=4).response.member_id
    g = h.group("g")
    assert g.pending_join_members == {pending}
    h.sleep(999)
    assert g.pending_join_members == {pending}
    h.sleep(1)
    assert g.pending_join_members == set()
    assert g.members == {}
    assert h.join("g", pending, version=4).response.error == E.UNKNOWN_MEMBER_ID


def test_pending_member_expiring_during_initial_delay_completes_join_at_once() -> None:
    """testJoinGroupCompletionWhenPendingMemberTimesOut (initial rebalance: removePendingMember... has no delay guard)."""
    h = Harness()
    a_id = h.join("g", version=4).response.member_id
    a = h.join("g", a_id, version=4)
    pending = h.join("g", session_ms=1000, version=4).response.member_id
    g = h.group("g")
    assert g.pending_join_members == {pending} and g.state is S.PREPARING_REBALANCE
    h.sleep(999)
    assert not a.done
    h.sleep(1)
    assert (a.response.error, a.response.generation_id) == (E.NONE, 1)
    assert g.state is S.COMPLETING_REBALANCE and list(g.members) == [a_id]


def test_expired_member_is_removed_and_its_parked_join_gets_unknown_member_id() -> None:
    """testHeartbeatExpirationShouldRemoveMember."""
    h = Harness(config(initial_rebalance_delay_ms=600_000))
    p = h.join("g")
    g = h.group("g")
    member_id = g.leader_id
    before = len(h.log)
    h.sleep(300_000)  # new-member join timeout, well inside the initial delay
    assert p.response.error == E.UNKNOWN_MEMBER_ID
    assert g.members == {}
    # The group completed its (now memberless) join and went Empty, persisting that.
    assert g.state is S.EMPTY and g.generation_id == 1
    assert h.log[before:] == [Record(GroupMetadataKey("g"), empty_group_value(1, 300_000))]
    assert heartbeat_key("g", member_id) not in h.shard.timers


def test_member_that_never_completes_kip394_join_times_out_leaving_stable_group_untouched() -> None:
    """testSecondMemberPartiallyJoinAndTimeout."""
    h = Harness()
    first = h.join("g", instance_id="leader-instance", session_ms=5000, rebalance_ms=10_000)
    h.sleep(3000)
    leader = first.response.member_id
    assert h.sync("g", leader, 1).response.error == E.NONE
    pending = h.join("g", session_ms=5000, version=9).response
    assert pending.error == E.MEMBER_ID_REQUIRED
    g = h.group("g")
    assert g.pending_join_members == {pending.member_id} and g.state is S.STABLE
    before = len(h.log)
    for _ in range(2):
        h.sleep(2500)
        assert h.heartbeat("g", leader, 1) == E.NONE
    assert g.pending_join_members == set()
    assert (g.state, g.generation_id, list(g.members)) == (S.STABLE, 1, [leader])
    assert h.log[before:] == []


# ---------------------------------------------------------------- 34. append errors


@pytest.mark.parametrize(("append_error", "expected"), [
    (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
    (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
    (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
    (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
    (E.RECORD_LIST_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
    (E.INVALID_FETCH_SIZE, E.UNKNOWN_SERVER_ERROR),
    (E.UNKNOWN_SERVER_ERROR, E.UNKNOWN_SERVER_ERROR),
    (E.INVALID_REQUEST, E.INVALID_REQUEST),
])
def test_join_append_error_is_mapped_for_every_waiter(append_error: ErrorCode, expected: ErrorCode) -> None:
    """testJoinGroupAppendErrorConversion (kcoord: every waiter of the partition gets the mapped error)."""
    h = Harness(auto_commit=False)
    first = h.join("g", version=4)
    second = h.join("g2")  # another waiter on the same partition, behind the same uncommitted append
    assert not first.done and not second.done
    h.fail_appends(append_error)
    assert first.response.error == expected
    assert second.response.error == expected
    assert (first.response.member_id, first.response.generation_id) == ("", -1)
    assert h.reloads == [Reload(0, 1)]
