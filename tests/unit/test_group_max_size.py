"""KIP-389 group size limit (``group.max.size``) (GMMT §4.3)."""

from __future__ import annotations

from coordinator.errors import ErrorCode
from coordinator.group import GroupState
from coordinator.records import GroupMetadataValue, Record
from coordinator.timers import heartbeat_key, join_key
from tests.unit.harness import Harness, Pending
from tests.unit.join_helpers import config, group_record, member_record, reload

E = ErrorCode
S = GroupState
MAX = 10


def verify_join_responses(pendings: list[Pending], expected_ok: int, expected_error: ErrorCode) -> list[str]:
    """Kafka's verifyClassicGroupJoinResponses: ``expected_ok`` NONE, the rest ``expected_error``."""
    responses = [p.response for p in pendings]
    ok = [r for r in responses if r.error == E.NONE]
    failed = [r for r in responses if r.error != E.NONE]
    assert len(ok) == expected_ok, responses
    assert all(r.error == expected_error for r in failed), failed
    assert all(r.member_id == "" for r in failed if expected_error == E.GROUP_MAX_SIZE_REACHED)
    return [r.member_id for r in responses]


def test_join_beyond_max_size_gets_group_max_size_reached() -> None:
    """testJoinGroupShouldReceiveErrorIfGroupOverMaxSize."""
    h = Harness(config(max_size=MAX))
    first = [h.join("g", reason="exceed max group size") for _ in range(MAX)]
    assert not any(p.done for p in first)
    before = len(h.log)
    extra = h.join("g", reason="exceed max group size").response
    assert extra.error == E.GROUP_MAX_SIZE_REACHED
    assert extra.member_id == ""
    assert len(h.group("g").members) == MAX
    assert h.log[before:] == []


def test_v4_dynamic_members_only_max_admitted() -> None:
    """testDynamicMembersJoinGroupWithMaxSizeAndRequiredKnownMember."""
    h = Harness(config(max_size=MAX, initial_rebalance_delay_ms=50))
    first_round = [h.join("g", version=4) for _ in range(MAX + 1)]
    g = h.group("g")
    assert g.members == {} and len(g.pending_join_members) == MAX + 1 and g.state is S.EMPTY
    ids = verify_join_responses(first_round, 0, E.MEMBER_ID_REQUIRED)
    second_round = [h.join("g", m, version=4) for m in ids]
    assert len(g.members) == MAX and g.num_awaiting_join() == MAX
    assert g.state is S.PREPARING_REBALANCE
    h.sleep(50)
    h.sleep(50)
    verify_join_responses(second_round, MAX, E.GROUP_MAX_SIZE_REACHED)
    assert len(g.members) == MAX and g.num_awaiting_join() == 0
    assert g.state is S.COMPLETING_REBALANCE
    assert g.pending_join_members == set()


def test_v3_dynamic_members_only_max_admitted_and_accepted_ones_can_rejoin() -> None:
    """testDynamicMembersJoinGroupWithMaxSizeAndNotRequiredKnownMember."""
    h = Harness(config(max_size=MAX, initial_rebalance_delay_ms=50))
    first_round = [h.join("g") for _ in range(MAX + 1)]
    g = h.group("g")
    assert len(g.members) == MAX and g.num_awaiting_join() == MAX and g.state is S.PREPARING_REBALANCE
    h.sleep(50)
    h.sleep(50)
    ids = verify_join_responses(first_round, MAX, E.GROUP_MAX_SIZE_REACHED)
    second_round = [h.join("g", m) for m in ids]
    verify_join_responses(second_round, MAX, E.GROUP_MAX_SIZE_REACHED)
    assert len(g.members) == MAX and g.num_awaiting_join() == 0
    assert g.state is S.COMPLETING_REBALANCE and g.generation_id == 1


def test_static_members_only_max_admitted() -> None:
    """testStaticMembersJoinGroupWithMaxSize."""
    h = Harness(config(max_size=MAX, initial_rebalance_delay_ms=50))
    instances = [f"instance-id-{i}" for i in range(MAX + 1)]
    first_round = [h.join("g", instance_id=i) for i in instances]
    g = h.group("g")
    assert len(g.members) == MAX and g.num_awaiting_join() == MAX and g.state is S.PREPARING_REBALANCE
    assert "instance-id-10" not in g.static_members
    h.sleep(50)
    h.sleep(50)
    ids = verify_join_responses(first_round, MAX, E.GROUP_MAX_SIZE_REACHED)
    second_round = [h.join("g", m, instance_id=i) for m, i in zip(ids, instances, strict=True)]
    verify_join_responses(second_round, MAX, E.GROUP_MAX_SIZE_REACHED)
    assert len(g.members) == MAX and g.num_awaiting_join() == 0
    assert g.state is S.COMPLETING_REBALANCE


def test_members_already_in_group_can_rejoin_while_rebalancing_at_max_size() -> None:
    """testDynamicMembersCanRejoinGroupWithMaxSizeWhileRebalancing."""
    h = Harness(config(max_size=MAX, initial_rebalance_delay_ms=50))
    ids = verify_join_responses([h.join("g", version=4) for _ in range(MAX + 1)], 0, E.MEMBER_ID_REQUIRED)
    second_round = [h.join("g", m, version=4) for m in ids]
    assert all(not p.done for p in second_round[:MAX])
    assert second_round[MAX].response.error == E.GROUP_MAX_SIZE_REACHED
    g = h.group("g")
    assert len(g.members) == MAX and g.num_awaiting_join() == MAX and g.state is S.PREPARING_REBALANCE
    # Rejoining while parked replaces the parked request (kcoord answers the old one REBALANCE_IN_PROGRESS).
    third_round = [h.join("g", m, version=4) for m in ids]
    for p in second_round[:MAX]:
        assert p.response.error == E.REBALANCE_IN_PROGRESS
    h.sleep(50)
    h.sleep(50)
    verify_join_responses(third_round, MAX, E.GROUP_MAX_SIZE_REACHED)
    assert third_round[MAX].response.error == E.GROUP_MAX_SIZE_REACHED
    assert len(g.members) == MAX and g.num_awaiting_join() == 0 and g.state is S.COMPLETING_REBALANCE


def over_capacity_group(n: int) -> Record:
    members = tuple(member_record(f"member-{i}", session_ms=5000, rebalance_ms=10_000, assignment=b"\x02")
                    for i in range(n))
    return group_record("g", GroupMetadataValue("consumer", 1, "range", "member-0", 0, members))


def test_last_members_to_rejoin_a_group_above_a_lowered_limit_are_kicked_out() -> None:
    """testLastJoiningMembersAreKickedOutWhenRejoiningGroupWithMaxSize."""
    h = Harness(config(max_size=MAX, initial_rebalance_delay_ms=50))
    reload(h, [over_capacity_group(MAX + 2)])
    g = h.group("g")
    assert g.state is S.PREPARING_REBALANCE and len(g.members) == MAX + 2
    ids = [f"member-{i}" for i in range(MAX + 2)]
    joins = [h.join("g", m, session_ms=5000, rebalance_ms=10_000) for m in ids]
    assert [p.response.error for p in joins[MAX:]] == [E.GROUP_MAX_SIZE_REACHED] * 2
    assert len(g.members) == MAX and g.num_awaiting_join() == MAX and g.state is S.PREPARING_REBALANCE
    assert all(heartbeat_key("g", m) not in h.shard.timers for m in ids[MAX:])
    h.sleep(10_000)
    verify_join_responses(joins, MAX, E.GROUP_MAX_SIZE_REACHED)
    assert g.state is S.COMPLETING_REBALANCE and g.generation_id == 2
    assert list(g.members) == ids[:MAX]


def test_loaded_group_over_max_size_is_put_into_rebalance() -> None:
    """testOnLoadedExceedGroupMaxSizeTriggersRebalance."""
    h = Harness(config(max_size=1))
    reload(h, [over_capacity_group(2)])
    g = h.group("g")
    assert g.state is S.PREPARING_REBALANCE
    assert len(g.members) == 2
    assert h.shard.timers.get(join_key("g")).deadline_ms == h.now + 10_000


def test_loaded_group_within_max_size_stays_stable() -> None:
    """testOnLoadedExceedGroupMaxSizeTriggersRebalance (negative side)."""
    h = Harness(config(max_size=2))
    reload(h, [over_capacity_group(2)])
    g = h.group("g")
    assert g.state is S.STABLE and len(g.members) == 2
    assert join_key("g") not in h.shard.timers
