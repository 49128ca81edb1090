"""SyncGroup behaviour, ported from Kafka's GroupMetadataManagerTest (reference §1.9, §4.5)."""

from __future__ import annotations

from coordinator.errors import ErrorCode
from coordinator.group import GroupState
from coordinator.records import GroupMetadataKey, GroupMetadataValue, Record
from coordinator.runtime import Reload

from .harness import Harness
from .offset_helpers import join_all, join_completing, join_static_stable

E = ErrorCode
S = GroupState


def _stable_single(h: Harness) -> tuple[str, int]:
    [m] = h.join_stable("g", 1)
    return m, h.group("g").generation_id


def test_sync_group_inconsistent_protocol_type() -> None:
    """testSyncGroupReturnsAnErrorWhenProtocolTypeIsInconsistent"""
    h = Harness()
    m, gen = _stable_single(h)
    r = h.sync("g", m, gen, protocol_type="connect").response
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert (r.protocol_type, r.protocol_name) == (None, None)


def test_sync_group_inconsistent_protocol_name() -> None:
    """testSyncGroupReturnsAnErrorWhenProtocolNameIsInconsistent"""
    h = Harness()
    m, gen = _stable_single(h)
    r = h.sync("g", m, gen, protocol_type="consumer", protocol_name="roundrobin").response
    assert r.error == E.INCONSISTENT_GROUP_PROTOCOL


def test_sync_group_succeeds_without_protocol_type_and_name() -> None:
    """testSyncGroupSucceedWhenProtocolTypeAndNameAreNotProvided"""
    h = Harness()
    m, gen = _stable_single(h)
    r = h.sync("g", m, gen).response
    assert r.error == E.NONE
    assert (r.protocol_type, r.protocol_name, r.assignment) == ("consumer", "range", m.encode())


def test_sync_group_succeeds_with_consistent_protocol_type_and_name() -> None:
    """testSyncGroupSucceedWhenProtocolTypeAndNameAreConsistent"""
    h = Harness()
    m, gen = _stable_single(h)
    r = h.sync("g", m, gen, protocol_type="consumer", protocol_name="range").response
    assert r.error == E.NONE
    assert (r.protocol_type, r.protocol_name) == ("consumer", "range")


def test_sync_group_from_unknown_group() -> None:
    """testSyncGroupFromUnknownGroup"""
    h = Harness()
    assert h.sync("unknown", "m", 1).response.error == E.UNKNOWN_MEMBER_ID
    assert "unknown" not in h.shard.groups
    assert h.log == []


def test_sync_group_empty_group_is_unknown_member() -> None:
    """testSyncGroupFromUnknownGroup (Empty group variant, §1.9 row 2)"""
    h = Harness()
    m, gen = _stable_single(h)
    assert h.leave("g", (m, None)).error == E.NONE
    assert h.group("g").state is S.EMPTY
    assert h.sync("g", m, gen + 1).response.error == E.UNKNOWN_MEMBER_ID


def test_sync_group_from_unknown_member() -> None:
    """testSyncGroupFromUnknownMember"""
    h = Harness()
    leader, followers, gen = join_completing(h, n=1)
    ok = h.sync("g", leader, gen, assignments={leader: b"a"}).response
    assert ok.error == E.NONE and ok.assignment == b"a"
    assert h.sync("g", "unknown-member", gen).response.error == E.UNKNOWN_MEMBER_ID
    assert h.group("g").state is S.STABLE


def test_sync_group_fenced_instance_id() -> None:
    """testSyncGroupFromUnknownMember (static variant: known instance id, wrong member id)"""
    h = Harness()
    ids = join_static_stable(h, "g", ["i1"])
    gen = h.group("g").generation_id
    assert h.sync("g", "other", gen, instance_id="i1").response.error == E.FENCED_INSTANCE_ID
    assert h.sync("g", ids["i1"], gen, instance_id="i2").response.error == E.UNKNOWN_MEMBER_ID


def test_sync_group_from_illegal_generation() -> None:
    """testSyncGroupFromIllegalGeneration"""
    h = Harness()
    leader, _, gen = join_completing(h, n=1)
    assert h.sync("g", leader, gen + 1).response.error == E.ILLEGAL_GENERATION
    assert h.group("g").state is S.COMPLETING_REBALANCE


def test_sync_group_during_preparing_rebalance() -> None:
    """testSyncGroupFromIllegalGeneration (PreparingRebalance row: REBALANCE_IN_PROGRESS)"""
    h = Harness()
    leader, follower = h.join_stable("g", 2)
    gen = h.group("g").generation_id
    rejoin = h.join("g", leader)  # the leader rejoining starts a rebalance
    assert not rejoin.done
    assert h.group("g").state is S.PREPARING_REBALANCE
    assert h.sync("g", follower, gen).response.error == E.REBALANCE_IN_PROGRESS


def test_sync_group_as_leader_append_failure_fails_every_waiter() -> None:
    """testSyncGroupAsLeaderAppendFailureTransformsError (kcoord: all waiters fail, shard reloads)"""
    h = Harness(auto_commit=False)
    leader, [follower], gen = join_completing(h, n=2)
    h.commit_all()  # the group creation record
    n = len(h.log)
    follower_sync = h.sync("g", follower, gen)
    leader_sync = h.sync("g", leader, gen, assignments={leader: b"l", follower: b"f"})
    assert len(h.log) == n + 1 and isinstance(h.log[n].key, GroupMetadataKey)
    assert not follower_sync.done and not leader_sync.done
    h.fail_appends(E.NOT_LEADER_OR_FOLLOWER)
    assert leader_sync.response.error == E.NOT_COORDINATOR
    assert follower_sync.response.error == E.NOT_COORDINATOR
    assert leader_sync.response.assignment == b"" and follower_sync.response.assignment == b""
    assert h.reloads == [Reload(0, 1)]
    # Until the partition is reloaded every request is answered LOAD_IN_PROGRESS.
    assert h.sync("g", leader, gen).response.error == E.COORDINATOR_LOAD_IN_PROGRESS


def test_sync_group_append_failure_maps_storage_errors() -> None:
    """testSyncGroupAsLeaderAppendFailureTransformsError (UNKNOWN_TOPIC_OR_PARTITION -> COORDINATOR_NOT_AVAILABLE)"""
    h = Harness(auto_commit=False)
    leader, _, gen = join_completing(h, n=1)
    h.commit_all()
    p = h.sync("g", leader, gen, assignments={leader: b"x"})
    h.fail_appends(E.UNKNOWN_TOPIC_OR_PARTITION)
    assert p.response.error == E.COORDINATOR_NOT_AVAILABLE


def test_leader_failure_in_sync_group() -> None:
    """testLeaderFailureInSyncGroup"""
    h = Harness()
    leader, [follower], gen = join_completing(h, n=2, session_ms=5_000, rebalance_ms=10_000)
    h.sleep(1_000)
    assert h.heartbeat("g", follower, gen) == E.NONE  # moves the follower's deadline past the leader's
    follower_sync = h.sync("g", follower, gen)
    assert not follower_sync.done
    h.sleep(4_000)  # the leader's session expires
    assert follower_sync.response.error == E.REBALANCE_IN_PROGRESS
    g = h.group("g")
    assert g.state is S.PREPARING_REBALANCE
    assert list(g.members) == [follower]
    # The follower rejoins and becomes the leader of the next generation.
    r = h.join("g", follower).response
    assert (r.error, r.generation_id, r.leader) == (E.NONE, gen + 1, follower)


def test_sync_group_follower_after_leader() -> None:
    """testSyncGroupFollowerAfterLeader"""
    h = Harness(auto_commit=False)
    leader, [follower], gen = join_completing(h, n=2)
    h.commit_all()
    n = len(h.log)
    leader_sync = h.sync("g", leader, gen, assignments={leader: b"L", follower: b"F"})
    assert not leader_sync.done  # released only once the GroupMetadata record commits
    follower_sync = h.sync("g", follower, gen)
    assert not follower_sync.done
    h.commit_all()
    assert (leader_sync.response.error, leader_sync.response.assignment) == (E.NONE, b"L")
    assert (follower_sync.response.error, follower_sync.response.assignment) == (E.NONE, b"F")
    assert follower_sync.response.protocol_name == "range"
    assert h.group("g").state is S.STABLE
    [rec] = h.log[n:]
    assert isinstance(rec.value, GroupMetadataValue)
    assert rec.value.generation == gen and rec.value.leader == leader and rec.value.protocol == "range"
    assert {m.member_id: m.assignment for m in rec.value.members} == {leader: b"L", follower: b"F"}


def test_sync_group_leader_after_follower() -> None:
    """testSyncGroupLeaderAfterFollower"""
    h = Harness(auto_commit=False)
    leader, [follower], gen = join_completing(h, n=2)
    h.commit_all()
    follower_sync = h.sync("g", follower, gen)
    assert not follower_sync.done
    assert h.group("g").state is S.COMPLETING_REBALANCE
    leader_sync = h.sync("g", leader, gen, assignments={leader: b"L", follower: b"F"})
    assert not follower_sync.done and not leader_sync.done
    h.commit_all()
    assert (follower_sync.response.error, follower_sync.response.assignment) == (E.NONE, b"F")
    assert (leader_sync.response.error, leader_sync.response.assignment) == (E.NONE, b"L")
    assert (follower_sync.response.protocol_type, follower_sync.response.protocol_name) == ("consumer", "range")


def test_sync_group_empty_assignment() -> None:
    """testSyncGroupEmptyAssignment"""
    h = Harness()
    leader, [follower], gen = join_completing(h, n=2)
    follower_sync = h.sync("g", follower, gen)
    leader_sync = h.sync("g", leader, gen, assignments={})
    assert (leader_sync.response.error, leader_sync.response.assignment) == (E.NONE, b"")
    assert (follower_sync.response.error, follower_sync.response.assignment) == (E.NONE, b"")
    rec = h.log[-1]
    assert isinstance(rec.value, GroupMetadataValue)
    assert [m.assignment for m in rec.value.members] == [b"", b""]
    assert h.heartbeat("g", leader, gen) == E.NONE
    assert h.heartbeat("g", follower, gen) == E.NONE


def test_sync_group_missing_member_gets_empty_assignment() -> None:
    """testSyncGroupEmptyAssignment (partial map: members missing from it get empty bytes)"""
    h = Harness()
    leader, [follower], gen = join_completing(h, n=2)
    h.sync("g", leader, gen, assignments={leader: b"L"})
    assert h.sync("g", follower, gen).response.assignment == b""


def test_rebalance_times_out_when_sync_request_is_not_received() -> None:
    """testRebalanceTimesOutWhenSyncRequestIsNotReceived"""
    h = Harness()
    leader, _, gen = join_completing(h, n=1, session_ms=30_000, rebalance_ms=10_000)
    n = len(h.log)
    h.sleep(9_999)
    assert h.group("g").state is S.COMPLETING_REBALANCE
    h.sleep(1)
    g = h.group("g")
    assert g.state is S.EMPTY and g.members == {} and g.generation_id == gen + 1
    assert h.log[n:] == [Record(GroupMetadataKey("g"), GroupMetadataValue("consumer", gen + 1, None, None, h.now, ()))]
    assert h.heartbeat("g", leader, gen) == E.UNKNOWN_MEMBER_ID


def test_rebalance_times_out_when_sync_not_received_from_followers() -> None:
    """testRebalanceTimesOutWhenSyncRequestIsNotReceivedFromFollowers"""
    h = Harness()
    leader, followers, gen = join_completing(h, n=3, session_ms=30_000, rebalance_ms=10_000)
    leader_sync = h.sync("g", leader, gen, assignments={m: b"x" for m in [leader, *followers]})
    assert leader_sync.response.error == E.NONE
    assert h.group("g").state is S.STABLE
    h.sleep(10_000)
    g = h.group("g")
    assert list(g.members) == [leader]
    assert g.state is S.PREPARING_REBALANCE
    assert h.heartbeat("g", leader, gen) == E.REBALANCE_IN_PROGRESS
    for f in followers:
        assert h.heartbeat("g", f, gen) == E.UNKNOWN_MEMBER_ID


def test_rebalance_times_out_when_sync_not_received_from_leader() -> None:
    """testRebalanceTimesOutWhenSyncRequestIsNotReceivedFromLeaders"""
    h = Harness()
    leader, followers, gen = join_completing(h, n=3, session_ms=30_000, rebalance_ms=10_000)
    syncs = [h.sync("g", f, gen) for f in followers]
    assert not any(s.done for s in syncs)
    h.sleep(10_000)
    assert [s.response.error for s in syncs] == [E.REBALANCE_IN_PROGRESS] * 2
    g = h.group("g")
    assert leader not in g.members and sorted(g.members) == sorted(followers)
    assert g.state is S.PREPARING_REBALANCE
    assert h.heartbeat("g", leader, gen) == E.UNKNOWN_MEMBER_ID


def test_rebalance_does_not_time_out_when_all_sync_are_received() -> None:
    """testRebalanceDoesNotTimeOutWhenAllSyncAreReceived"""
    h = Harness()
    leader, [follower], gen = join_completing(h, n=2, session_ms=30_000, rebalance_ms=10_000)
    assert "sync-g" in h.shard.timers
    h.sync("g", leader, gen, assignments={leader: b"L", follower: b"F"})
    assert "sync-g" in h.shard.timers  # the follower has not synced yet
    h.sync("g", follower, gen)
    assert "sync-g" not in h.shard.timers
    h.sleep(10_000)
    assert h.group("g").state is S.STABLE and len(h.group("g").members) == 2
    assert h.heartbeat("g", follower, gen) == E.NONE


def test_rebalance_completes_before_member_joins() -> None:
    """testRebalanceCompletesBeforeMemberJoins"""
    h = Harness()
    ids = join_static_stable(h, "g", ["leader-instance-id"], session_ms=5_000, rebalance_ms=10_000)
    static = ids["leader-instance-id"]
    assert h.group("g").generation_id == 1
    t0 = h.now
    dyn = h.join("g", session_ms=20_000, rebalance_ms=10_000)  # v3 dynamic join: rebalance starts
    assert h.group("g").state is S.PREPARING_REBALANCE
    for _ in range(3):  # the static member only heartbeats and keeps its session alive
        h.sleep(2_500)
        assert h.heartbeat("g", static, 1, "leader-instance-id") == E.REBALANCE_IN_PROGRESS
    h.sleep(t0 + 10_000 - h.now)  # the rebalance timeout completes the join without the static member
    r = dyn.response
    assert (r.error, r.generation_id, r.leader) == (E.NONE, 2, r.member_id)
    g = h.group("g")
    assert g.state is S.COMPLETING_REBALANCE and set(g.members) == {static, r.member_id}
    assert h.heartbeat("g", static, 1, "leader-instance-id") == E.ILLEGAL_GENERATION
    assert h.heartbeat("g", r.member_id, 2) == E.NONE
    h.sleep(5_000)  # the static member's session expires: one more rebalance
    assert list(g.members) == [r.member_id]
    assert g.state is S.PREPARING_REBALANCE
    assert "leader-instance-id" not in g.static_members


def test_sync_in_stable_ignores_leader_resend() -> None:
    """testSyncGroupFollowerAfterLeader (Stable row: leader re-sends are ignored)"""
    h = Harness()
    leader, follower = h.join_stable("g", 2)
    gen = h.group("g").generation_id
    n = len(h.log)
    r = h.sync("g", leader, gen, assignments={leader: b"new", follower: b"new"}).response
    assert (r.error, r.assignment) == (E.NONE, leader.encode())
    assert h.sync("g", follower, gen).response.assignment == follower.encode()
    assert h.log[n:] == []


def test_sync_of_completed_join_answers_after_rejoin() -> None:
    """testSyncGroupLeaderAfterFollower (a rebalance answers parked syncs REBALANCE_IN_PROGRESS)"""
    h = Harness()
    leader, [follower], gen = join_completing(h, n=2)
    follower_sync = h.sync("g", follower, gen)
    rejoin = h.join("g", leader, protocols=(("roundrobin", b"x"),))  # changed metadata: rebalance
    assert follower_sync.response.error == E.REBALANCE_IN_PROGRESS
    assert not rejoin.done
    [r] = join_all(h, [h.join("g", follower), rejoin])[1:]
    assert (r.error, r.generation_id) == (E.NONE, gen + 1)
