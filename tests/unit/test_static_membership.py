"""KIP-345 static membership on JoinGroup (GMMT §4.4)."""

from __future__ import annotations

from coordinator.errors import ErrorCode
from coordinator.group import GroupState
from coordinator.records import GroupMetadataValue, Record
from coordinator.runtime import Reload
from coordinator.timers import join_key
from tests.unit.harness import CONSUMER_PROTOCOLS, Harness
from tests.unit.join_helpers import (
    canonical,
    complete_reload,
    group_record,
    member_id_of,
    member_record,
    static_members_join_and_rebalance,
)

E = ErrorCode
S = GroupState
LEADER, FOLLOWER = "leader-instance", "follower-instance"
KW = {"session_ms": 5000, "rebalance_ms": 10_000}


def stable_record(leader_id: str, follower_id: str, *, follower_sub: bytes = b"range-meta",
                  ts: int = 6000) -> Record:
    """The GroupMetadata record of the Stable two-static-member group built by the helper."""
    return group_record("g", GroupMetadataValue("consumer", 1, "range", leader_id, ts, (
        member_record(leader_id, instance_id=LEADER, assignment=b"\x01", session_ms=5000),
        member_record(follower_id, instance_id=FOLLOWER, assignment=b"\x02", session_ms=5000,
                      subscription=follower_sub),
    )))


# ---------------------------------------------------------------- 42-44


def test_static_member_can_create_and_join_a_group() -> None:
    """testStaticMemberJoinAsFirstMember."""
    h = Harness()
    p = h.join("g", instance_id="instance", version=9)
    h.sleep(3000)
    r = p.response
    assert (r.error, r.generation_id, r.leader) == (E.NONE, 1, r.member_id)
    assert member_id_of("instance", r.member_id)
    assert h.group("g").static_members == {"instance": r.member_id}


def test_wrong_member_id_with_known_instance_id_is_fenced() -> None:
    """testStaticMemberRejoinWithExplicitUnknownMemberId."""
    h = Harness()
    static_members_join_and_rebalance(h)
    r = h.join("g", "unknown-member-id", instance_id=FOLLOWER, **KW).response
    assert r.error == E.FENCED_INSTANCE_ID
    assert r.member_id == "unknown-member-id"
    assert h.group("g").state is S.STABLE


def test_unknown_id_with_known_instance_replaces_member_and_fences_old_parked_join() -> None:
    """testJoinGroupReplaceStaticMember."""
    h = Harness()
    old = h.join("g", instance_id="instance")
    old_id = h.group("g").static_members["instance"]
    new = h.join("g", instance_id="instance")
    assert old.response.error == E.FENCED_INSTANCE_ID
    assert old.response.member_id == old_id
    g = h.group("g")
    new_id = g.static_members["instance"]
    assert new_id != old_id and list(g.members) == [new_id] and g.leader_id == new_id
    assert not new.done
    h.sleep(3000)
    assert (new.response.error, new.response.member_id, new.response.generation_id) == (E.NONE, new_id, 1)


# ---------------------------------------------------------------- 45-49 replacement by state


def test_replacement_in_stable_without_protocol_change_writes_record_and_does_not_rebalance() -> None:
    """testReplaceStaticMemberInStableStateNoError."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    before = len(h.log)
    r = h.join("g", instance_id=FOLLOWER, **KW).response
    new_id = r.member_id
    assert r.error == E.NONE and new_id != rr.follower_id and member_id_of(FOLLOWER, new_id)
    assert canonical(h.log[before:]) == canonical([stable_record(rr.leader_id, new_id)])
    g = h.group("g")
    assert g.state is S.STABLE and g.generation_id == 1
    assert g.static_members == {LEADER: rr.leader_id, FOLLOWER: new_id}


def test_replacement_changing_the_selected_protocol_triggers_rebalance() -> None:
    """testReplaceStaticMemberInStableStateWithUpdatedProtocolTriggersRebalance."""
    h = Harness()
    p = h.join("g", instance_id="instance", **KW)
    h.sleep(3000)
    old_id = p.response.member_id
    h.sync("g", old_id, 1, instance_id="instance", assignments={old_id: b"a"})
    before = len(h.log)
    r = h.join("g", instance_id="instance", protocols=(("roundrobin", b"rr"),), **KW).response
    # Sole member: the rebalance completes at once with the new protocol, nothing persisted yet.
    assert (r.error, r.generation_id, r.protocol_name, r.leader) == (E.NONE, 2, "roundrobin", r.member_id)
    assert r.member_id != old_id
    assert h.group("g").state is S.COMPLETING_REBALANCE
    assert h.log[before:] == []


def test_failed_replacement_record_answers_mapped_error_and_reload_restores_old_member() -> None:
    """testReplaceStaticMemberInStableStateErrors (kcoord: runtime fails waiters + Reload)."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    committed = list(h.log)
    h.auto_commit = False
    p = h.join("g", instance_id=FOLLOWER, **KW)
    assert not p.done
    assert len(h.log) == len(committed) + 1
    h.fail_appends(E.NOT_LEADER_OR_FOLLOWER)
    assert p.response.error == E.NOT_COORDINATOR
    assert p.response.member_id == ""
    assert h.reloads == [Reload(0, 1)]
    h.auto_commit = True
    complete_reload(h, committed)
    g = h.group("g")
    assert g.static_members == {LEADER: rr.leader_id, FOLLOWER: rr.follower_id}
    assert h.heartbeat("g", rr.follower_id, 1, FOLLOWER) == E.NONE


def test_successful_replacement_keeps_generation_and_assignment() -> None:
    """testReplaceStaticMemberInStableStateSucceeds."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    r = h.join("g", instance_id=FOLLOWER, **KW).response
    assert (r.error, r.generation_id, r.leader, r.members) == (E.NONE, 1, rr.leader_id, ())
    assert (r.protocol_type, r.protocol_name) == ("consumer", "range")
    sync = h.sync("g", r.member_id, 1, instance_id=FOLLOWER).response
    assert (sync.error, sync.assignment) == (E.NONE, b"\x02")
    assert h.heartbeat("g", r.member_id, 1, FOLLOWER) == E.NONE
    assert h.heartbeat("g", rr.follower_id, 1, FOLLOWER) == E.FENCED_INSTANCE_ID


def test_replacement_in_completing_rebalance_triggers_a_new_rebalance() -> None:
    """testReplaceStaticMemberInCompletingRebalanceStateTriggersRebalance."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    lj = h.join("g", rr.leader_id, instance_id=LEADER, **KW)
    fj = h.join("g", rr.follower_id, instance_id=FOLLOWER, **KW)
    assert lj.response.generation_id == fj.response.generation_id == 2
    g = h.group("g")
    assert g.state is S.COMPLETING_REBALANCE
    dup = h.join("g", instance_id=FOLLOWER, **KW)
    assert not dup.done
    assert g.state is S.PREPARING_REBALANCE and g.generation_id == 2
    assert all(m.assignment == b"" for m in g.members.values())
    lj2 = h.join("g", rr.leader_id, instance_id=LEADER, **KW)
    assert lj2.response.generation_id == dup.response.generation_id == 3
    assert {m.member_id for m in lj2.response.members} == {rr.leader_id, dup.response.member_id}


# ---------------------------------------------------------------- 50-52 fencing duplicates


def test_duplicate_follower_during_preparing_rebalance_fences_earlier_parked_join() -> None:
    """testStaticMemberFenceDuplicateRejoinedFollower."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    h.join("g")  # a third (dynamic) member triggers a rebalance
    g = h.group("g")
    assert g.state is S.PREPARING_REBALANCE
    old = h.join("g", rr.follower_id, instance_id=FOLLOWER, **KW)
    assert not old.done
    dup = h.join("g", instance_id=FOLLOWER, **KW)
    r = old.response
    assert (r.error, r.member_id, r.generation_id, r.leader) == (E.FENCED_INSTANCE_ID, rr.follower_id, -1, "")
    assert (r.protocol_type, r.protocol_name) == (None, None)
    assert g.state is S.PREPARING_REBALANCE and not dup.done
    new_id = g.static_members[FOLLOWER]
    assert new_id != rr.follower_id and rr.follower_id not in g.members
    assert g.members[new_id].awaiting_join is not None


def test_old_follower_parked_in_sync_is_fenced_when_its_id_is_replaced() -> None:
    """testStaticMemberFenceDuplicateSyncingFollowerAfterMemberIdChanged."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    lj = h.join("g", rr.leader_id, instance_id=LEADER, **KW)
    assert h.group("g").state is S.PREPARING_REBALANCE
    oj = h.join("g", rr.follower_id, instance_id=FOLLOWER, **KW)
    assert lj.response.generation_id == oj.response.generation_id == 2
    assert [m.member_id for m in lj.response.members] == [rr.leader_id, rr.follower_id]
    assert (oj.response.leader, oj.response.members) == (rr.leader_id, ())
    old_sync = h.sync("g", rr.follower_id, 2, instance_id=FOLLOWER)
    assert not old_sync.done
    dup = h.join("g", instance_id=FOLLOWER, **KW)
    g = h.group("g")
    assert g.state is S.PREPARING_REBALANCE and not dup.done
    assert old_sync.response.error == E.FENCED_INSTANCE_ID
    # The leader neither rejoins nor heartbeats: its session expires and the join completes without it.
    before = len(h.log)
    # Both sessions end at t=11000; the leader's (not awaiting anything) removes it, the duplicate's
    # is satisfied by its parked join. (Kafka's MockTime jumps 10 s at once; this clock fires in order.)
    h.sleep(5000)
    r = dup.response
    assert (r.error, r.generation_id, r.leader) == (E.NONE, 3, r.member_id)
    assert list(g.members) == [r.member_id] and g.state is S.COMPLETING_REBALANCE
    assert h.log[before:] == []


def test_old_follower_rejoining_with_stale_id_after_replacement_is_fenced() -> None:
    """testStaticMemberFenceDuplicateRejoiningFollowerAfterMemberIdChanged."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    dup = h.join("g", instance_id=FOLLOWER, **KW).response
    assert dup.error == E.NONE
    before = len(h.log)
    stale = h.join("g", rr.follower_id, instance_id=FOLLOWER, **KW).response
    assert stale.error == E.FENCED_INSTANCE_ID
    assert stale.member_id == rr.follower_id
    assert h.group("g").state is S.STABLE
    assert h.log[before:] == []


# ---------------------------------------------------------------- 53-60 rejoin variants


def test_static_leader_rejoin_with_unknown_id_v9_gets_members_and_skip_assignment() -> None:
    """testStaticMemberRejoinWithLeaderIdAndUnknownMemberId (v9)."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    before = len(h.log)
    r = h.join("g", instance_id=LEADER, version=9, **KW).response
    new_id = r.member_id
    assert (r.error, r.generation_id, r.leader, r.skip_assignment) == (E.NONE, 1, new_id, True)
    assert {(m.member_id, m.group_instance_id, m.metadata) for m in r.members} == {
        (new_id, LEADER, b"range-meta"), (rr.follower_id, FOLLOWER, b"range-meta")}
    assert h.group("g").state is S.STABLE
    expected = group_record("g", GroupMetadataValue("consumer", 1, "range", new_id, 6000, (
        member_record(rr.follower_id, instance_id=FOLLOWER, assignment=b"\x02", session_ms=5000),
        member_record(new_id, instance_id=LEADER, assignment=b"\x01", session_ms=5000))))
    assert canonical(h.log[before:]) == canonical([expected])
    assert h.join("g", rr.leader_id, instance_id=LEADER, **KW).response.error == E.FENCED_INSTANCE_ID
    assert h.sync("g", rr.leader_id, 1, instance_id=LEADER).response.error == E.FENCED_INSTANCE_ID


def test_static_leader_rejoin_with_unknown_id_before_v9_gets_old_leader_id_and_no_members() -> None:
    """testStaticMemberRejoinWithLeaderIdAndUnknownMemberId (v<9)."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    r = h.join("g", instance_id=LEADER, version=5, **KW).response
    assert (r.error, r.generation_id, r.skip_assignment, r.members) == (E.NONE, 1, False, ())
    assert r.leader == rr.leader_id != r.member_id
    assert h.group("g").leader_id == r.member_id
    assert h.group("g").state is S.STABLE


def test_static_leader_rejoin_with_known_id_triggers_rebalance() -> None:
    """testStaticMemberRejoinWithLeaderIdAndKnownMemberId."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    p = h.join("g", rr.leader_id, instance_id=LEADER, **KW)
    assert not p.done
    assert h.group("g").state is S.PREPARING_REBALANCE
    assert h.shard.timers.get(join_key("g")).deadline_ms == h.now + 10_000


def test_static_leader_rejoin_on_dead_group_gets_coordinator_not_available() -> None:
    """testStaticMemberRejoinWithLeaderIdAndUnexpectedDeadGroup."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    h.group("g").transition_to(S.DEAD, h.now)
    assert h.join("g", rr.leader_id, instance_id=LEADER, **KW).response.error == E.COORDINATOR_NOT_AVAILABLE
    assert h.join("g", instance_id=LEADER, **KW).response.error == E.COORDINATOR_NOT_AVAILABLE


def test_static_leader_rejoin_on_empty_group_gets_unknown_member_id() -> None:
    """testStaticMemberRejoinWithLeaderIdAndUnexpectedEmptyGroup."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    g = h.group("g")
    g.transition_to(S.PREPARING_REBALANCE, h.now)
    g.transition_to(S.EMPTY, h.now)
    assert h.join("g", rr.leader_id, instance_id=LEADER, **KW).response.error == E.UNKNOWN_MEMBER_ID


def test_static_follower_rejoin_with_changed_protocols_triggers_rebalance() -> None:
    """testStaticMemberRejoinWithFollowerIdAndChangeOfProtocol."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    fj = h.join("g", rr.follower_id, instance_id=FOLLOWER, protocols=(("roundrobin", b"rr2"),), **KW)
    assert not fj.done
    assert h.group("g").state is S.PREPARING_REBALANCE
    lj = h.join("g", rr.leader_id, instance_id=LEADER, **KW)
    assert lj.response.generation_id == fj.response.generation_id == 2
    assert lj.response.protocol_name == "roundrobin"


def test_replacement_with_protocol_change_that_changes_selected_protocol_rebalances() -> None:
    """testStaticMemberRejoinWithUnknownMemberIdAndChangeOfProtocolWithSelectedProtocolChanged."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    before = len(h.log)
    dup = h.join("g", instance_id=FOLLOWER, protocols=(("roundrobin", b"rr2"),), **KW)
    assert not dup.done
    g = h.group("g")
    assert g.state is S.PREPARING_REBALANCE
    assert g.static_members[FOLLOWER] != rr.follower_id
    assert h.log[before:] == []
    lj = h.join("g", rr.leader_id, instance_id=LEADER, **KW)
    assert (lj.response.generation_id, lj.response.protocol_name) == (2, "roundrobin")
    assert dup.response.generation_id == 2


def test_replacement_with_protocol_change_keeping_selected_protocol_writes_record_no_rebalance() -> None:
    """testStaticMemberRejoinWithUnknownMemberIdAndChangeOfProtocolWhileSelectProtocolUnchanged."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    before = len(h.log)
    protocols = (("range", b"new-range"), ("roundrobin", b"rr"))
    r = h.join("g", instance_id=FOLLOWER, protocols=protocols, version=9, **KW).response
    assert (r.error, r.generation_id, r.leader, r.members, r.skip_assignment) == (
        E.NONE, 1, rr.leader_id, (), False)
    assert canonical(h.log[before:]) == canonical(
        [stable_record(rr.leader_id, r.member_id, follower_sub=b"new-range")])
    assert h.group("g").state is S.STABLE


def test_replacement_with_protocol_change_persistence_failure_is_reverted() -> None:
    """testStaticMemberRejoinWithUnknownMemberIdAndChangeOfProtocolWhileSelectProtocolUnchangedPersistenceFailure."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    committed = list(h.log)
    h.auto_commit = False
    protocols = (("range", b"new-range"), ("roundrobin", b"rr"))
    p = h.join("g", instance_id=FOLLOWER, protocols=protocols, **KW)
    h.fail_appends(E.MESSAGE_TOO_LARGE)
    assert p.response.error == E.UNKNOWN_SERVER_ERROR
    assert p.response.member_id == ""
    assert h.reloads == [Reload(0, 1)]
    h.auto_commit = True
    complete_reload(h, committed)
    g = h.group("g")
    assert g.static_members[FOLLOWER] == rr.follower_id
    assert g.members[rr.follower_id].metadata("range") == b"range-meta"
    assert g.state is S.STABLE and g.generation_id == 1


def test_static_follower_rejoin_with_unknown_id_gets_current_generation() -> None:
    """testStaticMemberRejoinAsFollowerWithUnknownMemberId."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    r = h.join("g", instance_id=FOLLOWER, **KW).response
    assert (r.error, r.generation_id, r.leader, r.members) == (E.NONE, 1, rr.leader_id, ())
    assert r.member_id != rr.follower_id
    assert h.group("g").state is S.STABLE


def test_static_follower_rejoin_with_known_id_unchanged_gets_current_generation() -> None:
    """testStaticMemberRejoinAsFollowerWithKnownMemberIdAndNoProtocolChange."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    before = len(h.log)
    r = h.join("g", rr.follower_id, instance_id=FOLLOWER, protocols=CONSUMER_PROTOCOLS, **KW).response
    assert (r.error, r.member_id, r.generation_id, r.leader, r.members) == (
        E.NONE, rr.follower_id, 1, rr.leader_id, ())
    assert h.group("g").state is S.STABLE
    assert h.log[before:] == []


# ---------------------------------------------------------------- 61-66 validation


def test_follower_id_with_leader_instance_id_is_fenced() -> None:
    """testStaticMemberRejoinAsFollowerWithMismatchedInstanceId."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    assert h.join("g", rr.follower_id, instance_id=LEADER, **KW).response.error == E.FENCED_INSTANCE_ID


def test_leader_id_with_follower_instance_id_is_fenced() -> None:
    """testStaticMemberRejoinAsLeaderWithMismatchedInstanceId."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    assert h.join("g", rr.leader_id, instance_id=FOLLOWER, **KW).response.error == E.FENCED_INSTANCE_ID
    assert h.group("g").state is S.STABLE


def test_sync_with_instance_id_and_wrong_member_id_is_fenced() -> None:
    """testStaticMemberSyncAsLeaderWithInvalidMemberId."""
    h = Harness()
    static_members_join_and_rebalance(h)
    assert h.sync("g", "invalid-member", 1, instance_id=LEADER).response.error == E.FENCED_INSTANCE_ID


def test_heartbeat_with_instance_id_and_wrong_member_id_is_fenced() -> None:
    """testStaticMemberHeartbeatLeaderWithInvalidMemberId."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    assert h.heartbeat("g", rr.leader_id, 1, LEADER) == E.NONE
    assert h.heartbeat("g", "invalid-member", 1, LEADER) == E.FENCED_INSTANCE_ID


def test_each_unknown_id_rejoin_of_an_instance_gets_a_new_member_id() -> None:
    """testGetDifferentStaticMemberIdAfterEachRejoin."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    seen = {rr.leader_id}
    for _ in range(3):
        r = h.join("g", instance_id=LEADER, **KW).response
        assert r.error == E.NONE and member_id_of(LEADER, r.member_id)
        assert r.member_id not in seen
        seen.add(r.member_id)
        assert h.group("g").static_members[LEADER] == r.member_id


def test_known_member_id_with_unknown_instance_id_gets_unknown_member_id() -> None:
    """testStaticMemberJoinWithUnknownInstanceIdAndKnownMemberId."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    r = h.join("g", rr.leader_id, instance_id="unknown-instance", **KW).response
    assert r.error == E.UNKNOWN_MEMBER_ID
    assert r.member_id == rr.leader_id


def test_static_unknown_id_rejoin_on_artificially_empty_group_is_an_illegal_state() -> None:
    """testStaticMemberReJoinWithIllegalStateAsUnknownMember (Kafka throws; kcoord answers UNKNOWN_SERVER_ERROR)."""
    h = Harness()
    rr = static_members_join_and_rebalance(h)
    g = h.group("g")
    g.transition_to(S.PREPARING_REBALANCE, h.now)
    g.transition_to(S.EMPTY, h.now)
    r = h.join("g", instance_id=FOLLOWER, version=9, **KW).response
    assert r.error == E.UNKNOWN_SERVER_ERROR
    assert g.static_members[FOLLOWER] == rr.follower_id


# ---------------------------------------------------------------- 67-68 absent static members


def test_static_follower_missing_the_join_deadline_stays_in_the_group() -> None:
    """testStaticMemberFollowerFailToRejoinBeforeRebalanceTimeout."""
    h = Harness()
    rr = static_members_join_and_rebalance(h, session_ms=15_000)
    new = h.join("g", instance_id="new-instance", version=9)
    assert h.group("g").state is S.PREPARING_REBALANCE
    lj = h.join("g", rr.leader_id, instance_id=LEADER, session_ms=15_000)
    assert not new.done and not lj.done
    h.sleep(10_000)
    r = lj.response
    assert (r.error, r.generation_id, r.leader) == (E.NONE, 2, rr.leader_id)
    assert {m.member_id for m in r.members} == {rr.leader_id, rr.follower_id, new.response.member_id}
    g = h.group("g")
    assert g.state is S.COMPLETING_REBALANCE
    assert set(g.static_members) == {LEADER, FOLLOWER, "new-instance"}
    assert rr.follower_id in g.pending_sync_members


def test_static_leader_missing_the_join_deadline_stays_and_leadership_moves() -> None:
    """testStaticMemberLeaderFailToRejoinBeforeRebalanceTimeout."""
    h = Harness()
    rr = static_members_join_and_rebalance(h, session_ms=15_000)
    new = h.join("g", instance_id="new-instance", version=9)
    fj = h.join("g", rr.follower_id, instance_id=FOLLOWER, session_ms=15_000)
    h.sleep(10_000)
    r = fj.response
    assert (r.error, r.generation_id, r.leader) == (E.NONE, 2, rr.follower_id)
    assert {m.member_id for m in r.members} == {rr.leader_id, rr.follower_id, new.response.member_id}
    assert new.response.leader == rr.follower_id
    g = h.group("g")
    assert g.leader_id == rr.follower_id and rr.leader_id in g.members


def test_group_with_only_non_rejoining_static_members_keeps_extending_join_phase() -> None:
    """testGroupStuckInRebalanceTimeoutDueToNonjoinedStaticMember."""
    h = Harness()
    rr = static_members_join_and_rebalance(h, rebalance_ms=5000, session_ms=10_000)
    dyn = h.join("g", session_ms=10_000, rebalance_ms=5000)
    h.sleep(5000)
    r = dyn.response
    assert (r.error, r.leader, r.generation_id, len(r.members)) == (E.NONE, r.member_id, 2, 3)
    g = h.group("g")
    assert g.state is S.COMPLETING_REBALANCE
    assert set(g.members) == {rr.leader_id, rr.follower_id, r.member_id}
    leave = h.leave("g", (rr.follower_id, FOLLOWER))
    assert [(m.member_id, m.group_instance_id, m.error) for m in leave.members] == [
        (rr.follower_id, FOLLOWER, E.NONE)]
    assert g.state is S.PREPARING_REBALANCE
    h.sleep(5000)
    assert list(g.members) == [rr.leader_id]
    assert (g.generation_id, g.state) == (2, S.PREPARING_REBALANCE)
    assert h.shard.timers.get(join_key("g")).deadline_ms == h.now + 5000
