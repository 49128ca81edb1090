"""OffsetCommit / OffsetFetch, ported from Kafka's OffsetMetadataManagerTest (reference §1.14, §1.16, §4.9)."""

from __future__ import annotations

from coordinator import commands as c
from coordinator.errors import ErrorCode
from coordinator.group import GroupState
from coordinator.records import OffsetCommitKey, OffsetCommitValue, Record
from coordinator.runtime import Reload

from .harness import Harness
from .offset_helpers import (
    commit_request,
    config,
    fetch_full,
    heartbeat_deadline,
    join_completing,
    join_static_stable,
)

E = ErrorCode
S = GroupState


def test_offset_commit_with_unknown_group() -> None:
    """testOffsetCommitWithUnknownGroup"""
    h = Harness()
    assert h.commit("g", {("foo", 0): 1}, generation=10) == {("foo", 0): E.ILLEGAL_GENERATION}
    assert h.commit("g", {("foo", 0): 1}, generation=10, v9=True) == {("foo", 0): E.GROUP_ID_NOT_FOUND}
    assert h.log == [] and "g" not in h.shard.groups


def test_generic_group_offset_commit_with_dead_group() -> None:
    """testGenericGroupOffsetCommitWithDeadGroup"""
    h = Harness()
    [m] = h.join_stable("g", 1)
    h.group("g").transition_to(S.DEAD, h.now)
    n = len(h.log)
    assert h.commit("g", {("foo", 0): 1, ("foo", 1): 2}, generation=1, member_id=m) == {
        ("foo", 0): E.COORDINATOR_NOT_AVAILABLE, ("foo", 1): E.COORDINATOR_NOT_AVAILABLE}
    assert h.log[n:] == []


def test_generic_group_offset_commit_with_unknown_member_id() -> None:
    """testGenericGroupOffsetCommitWithUnknownMemberId"""
    h = Harness()
    h.join_stable("g", 1)
    assert h.commit("g", {("foo", 0): 1}, generation=1, member_id="unknown") == {
        ("foo", 0): E.UNKNOWN_MEMBER_ID}


def test_generic_group_offset_commit_with_unknown_instance_id() -> None:
    """testGenericGroupOffsetCommitWithUnknownInstanceId"""
    h = Harness()
    ids = join_static_stable(h, "g", ["i1"])
    assert h.commit("g", {("foo", 0): 1}, generation=1, member_id=ids["i1"], instance_id="unknown") == {
        ("foo", 0): E.UNKNOWN_MEMBER_ID}


def test_generic_group_offset_commit_with_fenced_instance_id() -> None:
    """testGenericGroupOffsetCommitWithFencedInstanceId"""
    h = Harness()
    join_static_stable(h, "g", ["i1"])
    assert h.commit("g", {("foo", 0): 1}, generation=1, member_id="other", instance_id="i1") == {
        ("foo", 0): E.FENCED_INSTANCE_ID}


def test_generic_group_offset_commit_with_illegal_generation() -> None:
    """testGenericGroupOffsetCommitWithIllegalGeneration"""
    h = Harness()
    [m] = h.join_stable("g", 1)
    n = len(h.log)
    assert h.commit("g", {("foo", 0): 1}, generation=2, member_id=m) == {("foo", 0): E.ILLEGAL_GENERATION}
    assert h.log[n:] == []


def test_generic_group_offset_commit_while_in_completing_rebalance_state() -> None:
    """testGenericGroupOffsetCommitWhileInCompletingRebalanceState"""
    h = Harness()
    leader, _, gen = join_completing(h, n=1)
    assert h.commit("g", {("foo", 0): 1}, generation=gen, member_id=leader) == {
        ("foo", 0): E.REBALANCE_IN_PROGRESS}


def test_generic_group_offset_commit_without_member_id_and_generation() -> None:
    """testGenericGroupOffsetCommitWithoutMemberIdAndGeneration"""
    h = Harness()
    h.join_stable("g", 1)
    assert h.commit("g", {("foo", 0): 1}) == {("foo", 0): E.UNKNOWN_MEMBER_ID}


def test_generic_group_offset_commit_member_to_empty_group() -> None:
    """testGenericGroupOffsetCommitWithUnknownMemberId (Empty group: generation >= 0 -> UNKNOWN_MEMBER_ID)"""
    h = Harness()
    [m] = h.join_stable("g", 1)
    h.leave("g", (m, None))
    assert h.commit("g", {("foo", 0): 1}, generation=2, member_id=m) == {("foo", 0): E.UNKNOWN_MEMBER_ID}
    # An admin commit (generation -1, no member) to the Empty group is accepted.
    assert h.commit("g", {("foo", 0): 1}) == {("foo", 0): E.NONE}


def test_generic_group_offset_commit_with_retention_time() -> None:
    """testGenericGroupOffsetCommitWithRetentionTime"""
    h = Harness()
    [m] = h.join_stable("g", 1)
    h.sleep(500)
    n = len(h.log)
    assert h.commit("g", {("foo", 0): 100}, generation=1, member_id=m, metadata="meta",
                    retention_ms=1_234) == {("foo", 0): E.NONE}
    assert h.log[n:] == [Record(OffsetCommitKey("g", "foo", 0),
                                OffsetCommitValue(100, -1, "meta", h.now, h.now + 1_234))]


def test_generic_group_offset_commit_record() -> None:
    """testGenericGroupOffsetCommit"""
    h = Harness()
    [m] = h.join_stable("g", 1)
    n = len(h.log)
    req = c.OffsetCommitRequest("g", (("foo", (c.PartitionCommit(0, 100, leader_epoch=5, metadata=None),)),),
                                1, m)
    assert h.call(req) == c.OffsetCommitResponse((("foo", ((0, E.NONE),)),))
    assert h.log[n:] == [Record(OffsetCommitKey("g", "foo", 0), OffsetCommitValue(100, 5, "", h.now, -1))]
    f = fetch_full(h, "g", {"foo": [0]}).response
    assert f == c.OffsetFetchResponse(E.NONE, (("foo", (c.FetchedOffset(0, 100, 5, ""),)),))


def test_offset_commit_v1_commit_timestamp() -> None:
    """testGenericGroupOffsetCommit (v1 explicit CommitTimestamp is kept)"""
    h = Harness()
    h.sleep(1_000)
    req = c.OffsetCommitRequest("s", (("foo", (c.PartitionCommit(0, 7, commit_timestamp=42),)),))
    h.call(req)
    assert h.log[-1].value == OffsetCommitValue(7, -1, "", 42, -1)


def test_generic_group_offset_commit_maintains_session() -> None:
    """testGenericGroupOffsetCommitMaintainsSession"""
    h = Harness()
    [m] = h.join_stable("g", 1, session_ms=5_000)
    h.sleep(4_000)
    assert h.commit("g", {("foo", 0): 1}, generation=1, member_id=m) == {("foo", 0): E.NONE}
    assert heartbeat_deadline(h, "g", m) == h.now + 5_000
    h.sleep(4_000)  # past the original session deadline
    assert h.group("g").state is S.STABLE and list(h.group("g").members) == [m]
    h.sleep(1_000)
    assert h.group("g").members == {}


def test_offset_commit_in_preparing_rebalance_maintains_session() -> None:
    """testGenericGroupOffsetCommitMaintainsSession (PreparingRebalance: current generation may commit)"""
    h = Harness()
    leader, follower = h.join_stable("g", 2, session_ms=5_000, rebalance_ms=30_000)
    h.join("g", leader, session_ms=5_000, rebalance_ms=30_000)
    assert h.group("g").state is S.PREPARING_REBALANCE
    h.sleep(3_000)
    assert h.commit("g", {("foo", 0): 1}, generation=1, member_id=follower) == {("foo", 0): E.NONE}
    assert heartbeat_deadline(h, "g", follower) == h.now + 5_000


def test_simple_group_offset_commit() -> None:
    """testSimpleGroupOffsetCommit"""
    h = Harness()
    assert h.commit("simple", {("foo", 0): 100}) == {("foo", 0): E.NONE}
    g = h.group("simple")
    assert (g.state, g.protocol_type, g.generation_id) == (S.EMPTY, None, 0)
    assert h.log == [Record(OffsetCommitKey("simple", "foo", 0), OffsetCommitValue(100, -1, "", 0, -1))]
    assert h.commit("simple", {("foo", 0): 101}) == {("foo", 0): E.NONE}
    assert h.fetch("simple", {"foo": [0]}) == {("foo", 0): 101}


def test_simple_group_offset_commit_with_instance_id() -> None:
    """testSimpleGroupOffsetCommitWithInstanceId"""
    h = Harness()
    assert h.commit("simple", {("foo", 0): 100}, member_id="m", instance_id="i") == {("foo", 0): E.NONE}
    assert h.commit("simple", {("foo", 0): 101}, member_id="m", instance_id="i") == {("foo", 0): E.NONE}
    assert h.fetch("simple") == {("foo", 0): 101}


def test_offset_commit_with_offset_metadata_too_large() -> None:
    """testConsumerGroupOffsetCommitWithOffsetMetadataTooLarge"""
    h = Harness(config(offset_metadata_max_bytes=5))
    req = c.OffsetCommitRequest("g", (("foo", (c.PartitionCommit(0, 1, metadata="toolarge"),
                                                c.PartitionCommit(1, 2, metadata="small"))),))
    assert h.call(req) == c.OffsetCommitResponse((("foo", ((0, E.OFFSET_METADATA_TOO_LARGE), (1, E.NONE))),))
    assert h.log == [Record(OffsetCommitKey("g", "foo", 1), OffsetCommitValue(2, -1, "small", 0, -1))]


def test_offset_metadata_length_counts_utf16_units() -> None:
    """testConsumerGroupOffsetCommitWithOffsetMetadataTooLarge (Java String.length())"""
    h = Harness(config(offset_metadata_max_bytes=2))
    ok = c.OffsetCommitRequest("g", (("t", (c.PartitionCommit(0, 1, metadata="éé"),)),))  # 4 UTF-8 bytes
    too_large = c.OffsetCommitRequest("g", (("t", (c.PartitionCommit(0, 1, metadata="\U0001F600a"),)),))
    assert h.call(ok).topics == (("t", ((0, E.NONE),)),)
    assert h.call(too_large).topics == (("t", ((0, E.OFFSET_METADATA_TOO_LARGE),)),)


def test_fetch_offsets_with_unknown_group() -> None:
    """testFetchOffsetsWithUnknownGroup"""
    h = Harness()
    f = fetch_full(h, "unknown", {"foo": [0, 1]}).response
    assert f == c.OffsetFetchResponse(E.NONE, (("foo", (c.FetchedOffset(0, -1, -1, ""),
                                                         c.FetchedOffset(1, -1, -1, ""))),))


def test_fetch_all_offsets_with_unknown_group() -> None:
    """testFetchAllOffsetsWithUnknownGroup"""
    h = Harness()
    assert fetch_full(h, "unknown").response == c.OffsetFetchResponse(E.NONE, ())


def test_generic_group_fetch_offsets_with_dead_group() -> None:
    """testGenericGroupFetchOffsetsWithDeadGroup + testGenericGroupFetchAllOffsetsWithDeadGroup"""
    h = Harness()
    h.commit("g", {("foo", 0): 5})
    h.group("g").transition_to(S.PREPARING_REBALANCE, h.now)
    h.group("g").transition_to(S.DEAD, h.now)
    assert h.fetch("g", {"foo": [0]}) == {("foo", 0): -1}
    assert fetch_full(h, "g").response == c.OffsetFetchResponse(E.NONE, ())


def test_fetch_unknown_partition_in_existing_group() -> None:
    """testFetchOffsetsAtDifferentCommittedOffset (unknown partition: -1, no error)"""
    h = Harness()
    h.commit("g", {("foo", 0): 5})
    assert h.fetch("g", {"foo": [0, 1], "bar": [0]}) == {("foo", 0): 5, ("foo", 1): -1, ("bar", 0): -1}
    assert h.fetch("g") == {("foo", 0): 5}


def test_reads_wait_for_earlier_writes_to_commit() -> None:
    """testFetchOffsetsAtDifferentCommittedOffset (kcoord: a read is released after earlier writes commit)"""
    h = Harness(auto_commit=False)
    first = h.send(commit_request("g", {("foo", 0): 1}))
    assert not first.done  # an OffsetCommit is answered only once its record commits
    fetch = fetch_full(h, "g", {"foo": [0]})
    fetch_all = fetch_full(h, "g", None, require_stable=True)
    assert not fetch.done and not fetch_all.done
    h.commit_all()
    assert first.response.topics == (("foo", ((0, E.NONE),)),)
    assert fetch.response.topics == (("foo", (c.FetchedOffset(0, 1, -1, ""),)),)
    assert fetch_all.response.topics == (("foo", (c.FetchedOffset(0, 1, -1, ""),)),)
    # Nothing in flight: a read is answered at once.
    assert fetch_full(h, "g", {"foo": [0]}).done


def test_fetch_all_offsets_at_different_committed_offset() -> None:
    """testFetchAllOffsetsAtDifferentCommittedOffset"""
    h = Harness(auto_commit=False)
    h.send(commit_request("g", {("foo", 0): 1}))
    h.commit_all()
    second = h.send(commit_request("g", {("foo", 1): 2, ("bar", 0): 3}))
    fetch = fetch_full(h, "g")
    assert not second.done and not fetch.done
    h.commit_all()
    assert dict(fetch.response.topics) == {
        "bar": (c.FetchedOffset(0, 3, -1, ""),),
        "foo": (c.FetchedOffset(0, 1, -1, ""), c.FetchedOffset(1, 2, -1, "")),
    }


def test_failed_commit_is_never_exposed() -> None:
    """testFetchOffsetsAtDifferentCommittedOffset (kcoord: a failed append fails waiters and reloads)"""
    h = Harness(auto_commit=False)
    h.send(commit_request("g", {("foo", 0): 1}))
    h.commit_all()
    committed = list(h.log)
    pending_commit = h.send(commit_request("g", {("foo", 0): 2}))
    fetch = fetch_full(h, "g", {"foo": [0]})
    h.fail_appends(E.NOT_LEADER_OR_FOLLOWER)
    assert pending_commit.response.topics == (("foo", ((0, E.NOT_COORDINATOR),)),)
    assert fetch.response.error == E.NOT_COORDINATOR
    assert h.reloads == [Reload(0, 1)]
    assert fetch_full(h, "g", {"foo": [0]}).response.error == E.COORDINATOR_LOAD_IN_PROGRESS
    h._handle(h.rt.complete_load(0, 1, committed, h.now))
    assert h.fetch("g", {"foo": [0]}) == {("foo", 0): 1}
