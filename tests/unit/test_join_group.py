"""JoinGroup: creation, validation, protocols and per-state answers (GMMT §4.1, §4.2 entries 20-23)."""

from __future__ import annotations

from coordinator.errors import ErrorCode
from coordinator.group import GroupState
from coordinator.records import GroupMetadataKey, GroupMetadataValue, Record, empty_group_record
from coordinator.runtime import Reload
from tests.unit.harness import Harness
from tests.unit.join_helpers import complete_reload, member_id_of

E = ErrorCode
S = GroupState


# ---------------------------------------------------------------- 1. unknown member, new group


def test_unknown_dynamic_member_id_on_missing_group_is_rejected_without_creating_it() -> None:
    """testJoinGroupUnknownMemberNewGroup (dynamic)."""
    h = Harness()
    r = h.join("g", "member-id").response
    assert r.error == E.UNKNOWN_MEMBER_ID
    assert r.member_id == "member-id"
    assert r.generation_id == -1
    assert "g" not in h.shard.groups
    assert h.log == []


def test_unknown_static_member_id_on_missing_group_is_rejected_without_creating_it() -> None:
    """testJoinGroupUnknownMemberNewGroup (static)."""
    h = Harness()
    r = h.join("g", "member-id", instance_id="instance").response
    assert r.error == E.UNKNOWN_MEMBER_ID
    assert "g" not in h.shard.groups
    assert h.log == []


# ---------------------------------------------------------------- 2-3. records on a new group


def test_first_v4_join_creates_group_with_one_empty_group_metadata_record() -> None:
    """testGenerateRecordsOnNewClassicGroup."""
    h = Harness()
    r = h.join("g", version=4).response
    assert r.error == E.MEMBER_ID_REQUIRED
    assert member_id_of("client", r.member_id)
    assert h.log == [Record(GroupMetadataKey("g"), GroupMetadataValue("", 0, None, None, -1, ()))]
    assert h.log == [empty_group_record("g")]
    g = h.group("g")
    assert g.state is S.EMPTY and g.generation_id == 0
    assert g.pending_join_members == {r.member_id}
    assert g.members == {}


def test_failed_new_group_record_answers_not_coordinator_and_reload_forgets_the_group() -> None:
    """testGenerateRecordsOnNewClassicGroupFailureTransformsError (kcoord: runtime fails waiters + Reload)."""
    h = Harness(auto_commit=False)
    p = h.join("g", version=4)
    assert not p.done  # gated behind the uncommitted empty-group record
    assert h.log == [empty_group_record("g")]
    h.fail_appends(E.NOT_LEADER_OR_FOLLOWER)
    assert p.response.error == E.NOT_COORDINATOR
    assert p.response.member_id == ""
    assert h.reloads == [Reload(0, 1)]
    # Nothing was committed: the reloaded shard does not know the group.
    complete_reload(h, [])
    assert "g" not in h.shard.groups
    assert h.join("g", "client-x").response.error == E.UNKNOWN_MEMBER_ID


# ---------------------------------------------------------------- 4-8. protocols


def test_second_member_with_other_protocol_type_is_inconsistent() -> None:
    """testClassicGroupJoinInconsistentProtocolType."""
    h = Harness()
    first = h.join("g")
    second = h.join("g", protocol_type="connect").response
    assert second.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert second.member_id == ""
    assert len(h.group("g").members) == 1
    h.sleep(3000)
    assert first.response.error == E.NONE and first.response.generation_id == 1
    assert [m.member_id for m in first.response.members] == [first.response.member_id]


def test_empty_protocol_type_on_empty_group_is_inconsistent() -> None:
    """testJoinGroupWithEmptyProtocolType."""
    h = Harness()
    r = h.join("g", protocol_type="").response
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert r.member_id == ""
    assert h.group("g").state is S.EMPTY and h.group("g").members == {}
    # The new group is still persisted with the empty record.
    assert h.log == [empty_group_record("g")]


def test_empty_protocol_list_on_empty_group_is_inconsistent() -> None:
    """testJoinGroupWithEmptyGroupProtocol."""
    h = Harness()
    r = h.join("g", protocols=()).response
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.group("g").members == {}
    assert h.log == [empty_group_record("g")]


def test_second_member_without_common_protocol_is_inconsistent_first_completes() -> None:
    """testJoinGroupInconsistentGroupProtocol."""
    h = Harness()
    first = h.join("g", protocols=(("range", b"r"),))
    second = h.join("g", protocols=(("roundrobin", b"rr"),)).response
    assert second.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert not first.done
    h.sleep(3000)
    r = first.response
    assert (r.error, r.generation_id, r.protocol_name, r.leader) == (E.NONE, 1, "range", r.member_id)
    assert list(h.group("g").members) == [r.member_id]


def test_rejoin_after_member_id_required_with_empty_protocols_is_refused_then_valid_rejoin_completes() -> None:
    """testJoinGroupSecondJoinInconsistentProtocol."""
    h = Harness()
    member_id = h.join("g", version=4).response.member_id
    bad = h.join("g", member_id, protocols=(), version=4).response
    assert bad.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert bad.member_id == member_id
    assert h.group("g").pending_join_members == {member_id}
    ok = h.join("g", member_id, version=4)
    assert not ok.done
    h.sleep(2999)
    assert not ok.done
    h.sleep(1)
    r = ok.response
    assert (r.error, r.member_id, r.leader, r.generation_id) == (E.NONE, member_id, member_id, 1)
    assert h.group("g").state is S.COMPLETING_REBALANCE


# ---------------------------------------------------------------- 9-13. member validation and Dead groups


def test_unknown_member_id_on_existing_group_is_rejected() -> None:
    """testJoinGroupUnknownConsumerExistingGroup."""
    h = Harness()
    h.join_stable("g")
    before = len(h.log)
    r = h.join("g", "unknown-member").response
    assert r.error == E.UNKNOWN_MEMBER_ID
    assert r.member_id == "unknown-member"
    assert h.group("g").state is S.STABLE
    assert h.log[before:] == []


def test_new_member_joining_dead_group_gets_coordinator_not_available() -> None:
    """testJoinGroupUnknownConsumerNewDeadGroup."""
    h = Harness()
    h.join("g", version=4)
    h.group("g").transition_to(S.DEAD, h.now)
    r = h.join("g").response
    assert r.error == E.COORDINATOR_NOT_AVAILABLE
    assert r.member_id == ""
    assert h.group("g").members == {}


def test_existing_member_joining_dead_group_gets_coordinator_not_available() -> None:
    """testExistingMemberJoinDeadGroup."""
    h = Harness()
    [m] = h.join_stable("g")
    h.group("g").transition_to(S.DEAD, h.now)
    r = h.join("g", m).response
    assert r.error == E.COORDINATOR_NOT_AVAILABLE
    assert r.member_id == m
    assert r.protocol_type is None


def test_successful_join_responses_carry_the_protocol_type() -> None:
    """testJoinGroupReturnsTheProtocolType."""
    h = Harness()
    a = h.join("g")
    b = h.join("g")
    h.sleep(6000)
    for p in (a, b):
        assert p.response.error == E.NONE
        assert p.response.protocol_type == "consumer"
        assert p.response.protocol_name == "range"


def test_error_join_responses_carry_no_protocol_type() -> None:
    """testJoinGroupProtocolTypeIsNotProvidedWhenAnErrorOccurs."""
    h = Harness()
    h.join_stable("g")
    r = h.join("g", "unknown-member").response
    assert r.error == E.UNKNOWN_MEMBER_ID
    assert r.protocol_type is None
    assert r.protocol_name is None


def test_member_present_in_empty_group_gets_unknown_member_id_and_generation_minus_one() -> None:
    """testJoinGroupExistingMemberInEmptyState."""
    h = Harness()
    [m] = h.join_stable("g")
    g = h.group("g")
    g.transition_to(S.PREPARING_REBALANCE, h.now)
    g.transition_to(S.EMPTY, h.now)
    r = h.join("g", m).response
    assert r.error == E.UNKNOWN_MEMBER_ID
    assert r.generation_id == -1
    assert r.member_id == m


# ---------------------------------------------------------------- 20-23. existing member per state


def test_changed_metadata_in_completing_rebalance_starts_a_new_rebalance() -> None:
    """testJoinGroupExistingMemberUpdatedMetadataTriggersRebalance."""
    h = Harness()
    first = h.join("g")
    h.sleep(3000)
    r1 = first.response
    assert (r1.generation_id, r1.protocol_name) == (1, "range")
    assert h.group("g").state is S.COMPLETING_REBALANCE
    rejoin = h.join("g", r1.member_id, protocols=(("roundrobin", b"rr2"), ("range", b"r2"))).response
    # Sole member rejoined: the new rebalance completes at once with the new protocol.
    assert (rejoin.error, rejoin.generation_id, rejoin.protocol_name) == (E.NONE, 2, "roundrobin")
    assert rejoin.leader == r1.member_id
    assert [(m.member_id, m.metadata) for m in rejoin.members] == [(r1.member_id, b"rr2")]
    assert h.group("g").state is S.COMPLETING_REBALANCE


def test_unchanged_metadata_in_completing_rebalance_returns_current_generation() -> None:
    """testJoinGroupExistingMemberUpdatedMetadataTriggersRebalance (lost-response retry side)."""
    h = Harness()
    a, b = h.join("g"), h.join("g")
    h.sleep(6000)
    leader = a.response.member_id
    again = h.join("g", leader).response
    assert (again.error, again.generation_id, again.leader) == (E.NONE, 1, leader)
    assert [m.member_id for m in again.members] == [leader, b.response.member_id]
    follower = h.join("g", b.response.member_id).response
    assert (follower.error, follower.generation_id, follower.members) == (E.NONE, 1, ())
    assert h.group("g").state is S.COMPLETING_REBALANCE


def test_leader_rejoin_in_stable_triggers_rebalance() -> None:
    """testJoinGroupAsExistingLeaderTriggersRebalanceInStableState."""
    h = Harness()
    leader, follower = h.join_stable("g", 2)
    before = len(h.log)
    lj = h.join("g", leader)
    assert not lj.done
    assert h.group("g").state is S.PREPARING_REBALANCE
    assert h.heartbeat("g", follower, 1) == E.REBALANCE_IN_PROGRESS
    fj = h.join("g", follower)
    assert lj.response.generation_id == fj.response.generation_id == 2
    assert lj.response.leader == leader
    assert h.log[before:] == []


def test_unchanged_sole_leader_rejoin_in_stable_rebalances_immediately() -> None:
    """testJoinGroupFromUnchangedLeaderShouldRebalance."""
    h = Harness()
    [leader] = h.join_stable("g")
    r = h.join("g", leader).response
    assert (r.error, r.generation_id, r.leader) == (E.NONE, 2, leader)
    assert [m.member_id for m in r.members] == [leader]
    assert h.group("g").state is S.COMPLETING_REBALANCE


def test_follower_with_changed_metadata_in_stable_triggers_rebalance() -> None:
    """testJoinGroupAsExistingMemberWithUpdatedMetadataTriggersRebalanceInStableState."""
    h = Harness()
    leader, follower = h.join_stable("g", 2)
    fj = h.join("g", follower, protocols=(("range", b"new-meta"),))
    assert not fj.done
    assert h.group("g").state is S.PREPARING_REBALANCE
    lj = h.join("g", leader)
    assert fj.response.generation_id == lj.response.generation_id == 2
    assert {(m.member_id, m.metadata) for m in lj.response.members} == {
        (leader, b"range-meta"), (follower, b"new-meta")}


def test_unchanged_follower_in_stable_gets_current_generation_without_rebalance() -> None:
    """testJoinGroupExistingMemberDoesNotTriggerRebalanceInStableState / testJoinGroupFromUnchangedFollowerDoesNotRebalance."""
    h = Harness()
    leader, follower = h.join_stable("g", 2)
    before = len(h.log)
    r = h.join("g", follower).response
    assert (r.error, r.member_id, r.generation_id, r.leader) == (E.NONE, follower, 1, leader)
    assert (r.protocol_type, r.protocol_name, r.members, r.skip_assignment) == ("consumer", "range", (), False)
    assert h.group("g").state is S.STABLE
    assert h.heartbeat("g", follower, 1) == E.NONE
    assert h.log[before:] == []
