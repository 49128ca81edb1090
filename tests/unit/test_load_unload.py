"""Load (replay) and unload of a coordinator partition (reference §1.19, §3.4, §3.5, §4.8 #99-100)."""

from __future__ import annotations

from coordinator import commands as c
from coordinator.errors import ErrorCode
from coordinator.group import GroupState
from coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from coordinator.runtime import ContextState, CoordinatorRuntime, GroupEvents
from coordinator.shard import GroupCoordinatorShard

from .harness import TEST_CONFIG, Harness
from .offset_helpers import apply, config, describe, group_tombstone, join_completing

E = ErrorCode
S = GroupState


def _member(mid: str, instance: str | None = None, rebalance: int = 20_000, session: int = 8_000,
            assignment: bytes = b"asg") -> MemberMetadata:
    return MemberMetadata(mid, instance, "client", "/10.0.0.1", rebalance, session, b"sub-" + mid.encode(),
                          assignment)


def _stable_record(group: str = "g", generation: int = 7) -> Record:
    return Record(GroupMetadataKey(group), GroupMetadataValue(
        "consumer", generation, "range", "m2", 1_000,
        (_member("m1", assignment=b"a1"), _member("m2", "i2", assignment=b"a2"))))


def test_replay_group_metadata_records() -> None:
    """testReplayGroupMetadataRecords"""
    shard, _ = GroupCoordinatorShard.load([_stable_record()], 5_000, TEST_CONFIG)
    g = shard.groups["g"]
    assert (g.state, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id) == (
        S.STABLE, 7, "consumer", "range", "m2")
    assert g.current_state_timestamp == 1_000
    assert {m: (x.assignment, x.protocols, x.session_timeout_ms, x.rebalance_timeout_ms)
            for m, x in g.members.items()} == {
        "m1": (b"a1", [("range", b"sub-m1")], 8_000, 20_000),
        "m2": (b"a2", [("range", b"sub-m2")], 8_000, 20_000),
    }
    assert g.static_members == {"i2": "m2"}


def test_replay_without_members_builds_empty_group() -> None:
    """testReplayGroupMetadataRecords (no members: Empty, "" protocol type is absent)"""
    rec = Record(GroupMetadataKey("g"), GroupMetadataValue("", 0, None, None, -1, ()))
    shard, _ = GroupCoordinatorShard.load([rec], 0, TEST_CONFIG)
    g = shard.groups["g"]
    assert (g.state, g.protocol_type, g.current_state_timestamp) == (S.EMPTY, None, None)


def test_replay_rebalance_timeout_defaults_to_session_timeout() -> None:
    """testReplayGroupMetadataRecords (rebalanceTimeout -1 -> sessionTimeout)"""
    rec = Record(GroupMetadataKey("g"), GroupMetadataValue(
        "consumer", 1, "range", "m1", -1, (_member("m1", rebalance=-1, session=9_000),)))
    shard, _ = GroupCoordinatorShard.load([rec], 0, TEST_CONFIG)
    assert shard.groups["g"].members["m1"].rebalance_timeout_ms == 9_000


def test_replay_tombstones_and_simple_groups() -> None:
    """testReplay (tombstone removes the group; offsets of an unknown group create a simple group)"""
    records = [
        _stable_record("gone"),
        Record(OffsetCommitKey("gone", "t", 0), OffsetCommitValue(1, -1, "", 0)),
        Record(OffsetCommitKey("gone", "t", 0), None),
        group_tombstone("gone"),
        Record(OffsetCommitKey("simple", "t", 3), OffsetCommitValue(42, 2, "m", 10)),
    ]
    shard, _ = GroupCoordinatorShard.load(records, 0, TEST_CONFIG)
    assert set(shard.groups) == {"simple"}
    assert (shard.groups["simple"].state, shard.groups["simple"].protocol_type) == (S.EMPTY, None)
    assert shard.offsets == {"simple": {("t", 3): OffsetCommitValue(42, 2, "m", 10)}}


def test_on_loaded_schedules_classic_group_member_heartbeats() -> None:
    """testOnLoadedSchedulesClassicGroupMemberHeartbeats"""
    shard, result = GroupCoordinatorShard.load([_stable_record()], 5_000, TEST_CONFIG)
    assert result.records == [] and result.completions == []
    for mid in ("m1", "m2"):
        timer = shard.timers.get(f"heartbeat-g-{mid}")
        assert timer is not None and timer.deadline_ms == 5_000 + 8_000
    assert shard.timers.get("expire-group-metadata").deadline_ms == 5_000 + TEST_CONFIG.offsets_retention_check_interval_ms


def test_on_loaded_rebalances_groups_over_max_size() -> None:
    """testOnLoaded (a loaded group over group.max.size is rebalanced)"""
    shard, _ = GroupCoordinatorShard.load([_stable_record()], 0, config(max_size=1))
    assert shard.groups["g"].state is S.PREPARING_REBALANCE


def test_load_keeps_stable_group_serving() -> None:
    """testOnLoaded (failover: members, generation and assignments survive; sessions restart)"""
    h = Harness()
    leader, follower = h.join_stable("g", 2)
    h.commit("g", {("foo", 0): 9}, generation=1, member_id=leader)
    log = list(h.log)
    h.sleep(1_000)
    apply(h, h.rt.begin_load(0, 2))
    h.epoch = 2
    assert h.rt.state_of(0) is ContextState.LOADING
    assert h.heartbeat("g", leader, 1) == E.NONE  # answered blindly while loading
    assert describe(h, "g").error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.sync("g", leader, 1).response.error == E.COORDINATOR_LOAD_IN_PROGRESS
    apply(h, h.rt.complete_load(0, 2, log, h.now))
    g = h.group("g")
    assert (g.state, g.generation_id, g.leader_id, list(g.members)) == (S.STABLE, 1, leader, [leader, follower])
    assert h.sync("g", follower, 1).response.assignment == follower.encode()
    assert h.fetch("g") == {("foo", 0): 9}
    h.sleep(5_000)
    assert h.heartbeat("g", leader, 1) == E.NONE
    h.sleep(5_000)  # the follower never heartbeats after the failover: removed after one session
    assert list(h.group("g").members) == [leader]
    assert h.group("g").state is S.PREPARING_REBALANCE


def test_stale_load_and_unload_are_ignored() -> None:
    """testOnLoaded (ownership changes carry an epoch; stale ones are ignored)"""
    h = Harness()
    h.join_stable("g", 1)
    assert h.rt.begin_load(0, 1) == []
    assert h.rt.unload(0, 0) == []
    assert h.rt.state_of(0) is ContextState.ACTIVE and "g" in h.shard.groups


def test_classic_group_on_unloaded_empty_and_preparing_rebalance() -> None:
    """testClassicGroupOnUnloadedEmptyAndPreparingRebalance"""
    h = Harness()
    h.commit("empty", {("t", 0): 1})
    join = h.join("preparing")  # parked in the initial rebalance delay
    assert not join.done
    shard = h.shard
    apply(h, h.rt.unload(0, 2))
    assert join.response.error == E.NOT_COORDINATOR
    assert shard.groups["empty"].state is S.DEAD and shard.groups["preparing"].state is S.DEAD
    assert len(shard.timers) == 0
    assert h.rt.state_of(0) is None
    assert h.heartbeat("preparing", "m", 0) == E.NOT_COORDINATOR
    assert h.call(c.OffsetFetchRequest("empty", None)).error == E.NOT_COORDINATOR


def test_classic_group_on_unloaded_completing_rebalance() -> None:
    """testClassicGroupOnUnloadedCompletingRebalance"""
    h = Harness()
    leader, [follower], gen = join_completing(h, n=2)
    sync = h.sync("g", follower, gen)
    assert not sync.done
    shard = h.shard
    apply(h, h.rt.unload(0, 2))
    assert sync.response.error == E.NOT_COORDINATOR
    assert shard.groups["g"].state is S.DEAD
    assert shard.parked_tokens() == []


def test_unload_fails_uncommitted_responses() -> None:
    """testClassicGroupOnUnloadedCompletingRebalance (kcoord: responses waiting for commit fail too)"""
    h = Harness(auto_commit=False)
    commit = h.send(c.OffsetCommitRequest("g", (("t", (c.PartitionCommit(0, 1),)),)))
    assert not commit.done
    apply(h, h.rt.unload(0, 2))
    assert commit.response.topics == (("t", ((0, E.NOT_COORDINATOR),)),)


def test_reload_after_unload_rebuilds_the_group() -> None:
    """testReplayGroupMetadataRecords (a context can be reloaded later from scratch)"""
    h = Harness()
    leader, follower = h.join_stable("g", 2)
    log = list(h.log)
    apply(h, h.rt.unload(0, 2))
    apply(h, h.rt.begin_load(0, 3))
    h.epoch = 3
    apply(h, h.rt.complete_load(0, 3, log, h.now))
    d = describe(h, "g")
    assert (d.state, d.protocol_data, [m.member_id for m in d.members]) == ("Stable", "range", [leader, follower])


def test_load_from_a_prereplayed_image_equals_a_full_replay() -> None:
    """A follower's image of a prefix plus the rest of the log loads the same shard as the whole log."""
    from coordinator.image import DurableImage

    records = [
        _stable_record("gone"),
        Record(OffsetCommitKey("gone", "t", 0), OffsetCommitValue(1, -1, "", 0)),
        _stable_record("g", 3),
        Record(OffsetCommitKey("simple", "t", 3), OffsetCommitValue(42, 2, "m", 10)),
        Record(OffsetCommitKey("gone", "t", 0), None),
        group_tombstone("gone"),
        _stable_record("g", 4),
        Record(OffsetCommitKey("simple", "t", 3), OffsetCommitValue(43, 2, "m", 11)),
        Record(OffsetCommitKey("g", "t", 1), OffsetCommitValue(7, -1, "", 12)),
    ]
    full, full_result = GroupCoordinatorShard.load(records, 5_000, TEST_CONFIG)
    for cut in range(len(records) + 1):
        image = DurableImage()
        image.replay(records[:cut])
        shard, result = GroupCoordinatorShard.load(records[cut:], 5_000, TEST_CONFIG, image=image)
        assert shard.durable_state() == full.durable_state(), cut
        assert set(shard.groups) == set(full.groups) == {"g", "simple"}
        assert shard.groups["g"].generation_id == 4
        keys = ["expire-group-metadata", "heartbeat-g-m1", "heartbeat-g-m2"]
        assert len(shard.timers) == len(full.timers) == 3
        assert [shard.timers.get(k) for k in keys] == [full.timers.get(k) for k in keys]
        assert result.records == full_result.records


def test_a_member_that_stops_heartbeating_is_logged_with_the_rebalance_it_starts() -> None:
    """What an operator reads when a group rebalances: the member that expired (and its session
    timeout), the rebalance with its reason, then the new generation."""
    rt = CoordinatorRuntime(TEST_CONFIG)
    rt.begin_load(0, 1)
    loaded = rt.complete_load(0, 1, [_stable_record()], 5_000)
    assert not [e for e in loaded if isinstance(e, GroupEvents)], "loading a stable group is not an event"
    effects = rt.advance(5_000 + 8_000)  # neither member heartbeat within its 8 s session
    events = [(name, dict(fields)) for e in effects if isinstance(e, GroupEvents) for name, fields in e.events]
    assert all(isinstance(e, GroupEvents) and e.partition == 0 for e in effects if isinstance(e, GroupEvents))
    names = [name for name, _ in events]
    assert names[:2] == ["member_expired", "group_rebalance"], events
    assert events[0][1] == {"group": "g", "member": events[0][1]["member"], "session_timeout_ms": 8_000}
    assert events[1][1]["reason"] == f"session of {events[0][1]['member']} expired"
    assert (events[1][1]["state"], events[1][1]["generation"]) == ("STABLE", 7)
    assert names.count("member_expired") == 2 and names[-1] == "group_generation"
    assert events[-1][1] == {"group": "g", "generation": 8, "members": 0}
