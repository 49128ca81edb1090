"""Offset retention and expiry (KIP-211), ported from Kafka's testCleanupExpiredOffsets* (reference §1.17, §4.9 #117)."""

from __future__ import annotations

from coordinator.errors import ErrorCode
from coordinator.group import GroupState
from coordinator.records import GroupMetadataKey, GroupMetadataValue, Record
from coordinator.shard import GroupCoordinatorShard

from .harness import Harness, consumer_subscription
from .offset_helpers import config, describe, group_tombstone, offset_tombstone

E = ErrorCode
S = GroupState
RETENTION = 100_000
INTERVAL = 10_000
CFG = config(offsets_retention_ms=RETENTION, offsets_retention_check_interval_ms=INTERVAL)


def _h() -> Harness:
    return Harness(CFG)


def test_simple_group_offsets_expire_by_commit_timestamp() -> None:
    """testCleanupExpiredOffsets (simple group: base = commit timestamp)"""
    h = _h()
    h.commit("s", {("foo", 0): 1})  # t=0
    h.sleep(25_000)
    h.commit("s", {("foo", 1): 2})  # t=25000
    n = len(h.log)
    h.sleep(RETENTION - 25_000 - 1)  # t=99999: check at 90000 expired nothing
    assert h.log[n:] == []
    h.sleep(1)  # check at t=100000: foo-0 expires, foo-1 does not, group stays
    assert h.log[n:] == [offset_tombstone("s", "foo", 0)]
    assert h.fetch("s") == {("foo", 1): 2}
    n = len(h.log)
    h.sleep(30_000)  # check at t=130000: foo-1 expires and the now offset-less Empty group is deleted
    assert h.log[n:] == [offset_tombstone("s", "foo", 1), group_tombstone("s")]
    assert "s" not in h.shard.groups
    assert describe(h, "s").error is ErrorCode.GROUP_ID_NOT_FOUND


def test_empty_group_offsets_expire_by_state_timestamp() -> None:
    """testCleanupExpiredOffsets (Empty classic group: base = currentStateTimestamp)"""
    h = _h()
    [m] = h.join_stable("g", 1, session_ms=600_000)
    h.commit("g", {("foo", 0): 1}, generation=1, member_id=m)
    commit_time = h.now
    h.sleep(50_000)
    h.leave("g", (m, None))
    empty_since = h.now
    assert h.group("g").state is S.EMPTY and h.group("g").current_state_timestamp == empty_since
    n = len(h.log)
    h.sleep(commit_time + RETENTION + INTERVAL - h.now)  # retention since the commit passed: kept
    assert h.log[n:] == []
    h.sleep(empty_since + RETENTION + INTERVAL - h.now)
    assert h.log[n:] == [offset_tombstone("g", "foo", 0), group_tombstone("g")]
    assert "g" not in h.shard.groups


def test_empty_group_without_state_timestamp_uses_commit_timestamp() -> None:
    """testOffsetExpirationCondition (Empty group loaded from a record without currentStateTimestamp)"""
    records = [
        Record(GroupMetadataKey("g"), GroupMetadataValue("consumer", 3, None, None, -1, ())),
    ]
    shard, _ = GroupCoordinatorShard.load(records, 0, CFG)
    assert shard.groups["g"].current_state_timestamp is None
    h = _h()
    h.rt.begin_load(0, 2)
    h.epoch = 2
    h._handle(h.rt.complete_load(0, 2, records, h.now))
    h.commit("g", {("foo", 0): 1})  # admin commit to the Empty group at t=0
    n = len(h.log)
    h.sleep(RETENTION)
    assert h.log[n:] == [offset_tombstone("g", "foo", 0), group_tombstone("g")]


def test_explicit_expire_timestamp_from_retention() -> None:
    """testCleanupExpiredOffsets (record with an explicit expireTimestamp: now >= expireTimestamp)"""
    h = _h()
    h.commit("s", {("foo", 0): 1}, retention_ms=15_000)  # expires at t=15000
    h.commit("s", {("bar", 0): 1})  # default retention
    n = len(h.log)
    h.sleep(INTERVAL)
    assert h.log[n:] == []
    h.sleep(INTERVAL)  # t=20000
    assert h.log[n:] == [offset_tombstone("s", "foo", 0)]
    assert h.fetch("s") == {("bar", 0): 1}


def test_explicit_expire_timestamp_can_outlive_retention() -> None:
    """testCleanupExpiredOffsets (an explicit expireTimestamp overrides offsets.retention.ms)"""
    h = _h()
    h.commit("s", {("foo", 0): 1}, retention_ms=3 * RETENTION)
    n = len(h.log)
    h.sleep(2 * RETENTION)
    assert h.log[n:] == []
    h.sleep(RETENTION)
    assert h.log[n:] == [offset_tombstone("s", "foo", 0), group_tombstone("s")]


def test_stable_consumer_group_expires_only_unsubscribed_topics() -> None:
    """testCleanupExpiredOffsets (Stable consumer group: only topics it is not subscribed to)"""
    h = _h()
    [m] = h.join_stable("g", 1, protocols=(("range", consumer_subscription("foo")),), session_ms=600_000)
    assert h.group("g").subscribed_topics == {"foo"}
    h.commit("g", {("foo", 0): 1, ("bar", 0): 2}, generation=1, member_id=m)
    t = h.now
    n = len(h.log)
    h.sleep(t + RETENTION + INTERVAL - h.now)
    assert h.log[n:] == [offset_tombstone("g", "bar", 0)]
    assert h.group("g").state is S.STABLE
    n = len(h.log)
    h.sleep(3 * RETENTION)
    assert h.log[n:] == []
    assert h.fetch("g") == {("foo", 0): 1}


def test_stable_group_with_unknown_subscription_never_expires() -> None:
    """testCleanupExpiredOffsetsWithEmptyOffsetExpirationCondition (Stable, subscriptions unknown)"""
    h = _h()
    [m] = h.join_stable("g", 1, session_ms=600_000)  # CONSUMER_PROTOCOLS metadata does not parse
    assert h.group("g").subscribed_topics is None
    h.commit("g", {("foo", 0): 1}, generation=1, member_id=m)
    n = len(h.log)
    h.sleep(3 * RETENTION)
    assert h.log[n:] == []


def test_non_consumer_group_and_rebalancing_group_never_expire() -> None:
    """testCleanupExpiredOffsetsWithEmptyOffsetExpirationCondition (non-consumer Stable, PreparingRebalance)"""
    h = _h()
    [m] = h.join_stable("connect", 1, protocol_type="connect", session_ms=600_000)
    h.commit("connect", {("foo", 0): 1}, generation=1, member_id=m)
    leader, follower = h.join_stable("rebal", 2, session_ms=600_000, rebalance_ms=600_000,
                                     protocols=(("range", consumer_subscription("x")),))
    h.commit("rebal", {("foo", 0): 1}, generation=1, member_id=leader)
    h.join("rebal", leader, session_ms=600_000, rebalance_ms=600_000,
           protocols=(("range", consumer_subscription("x")),))
    assert h.group("rebal").state is S.PREPARING_REBALANCE
    n = len(h.log)
    h.sleep(3 * RETENTION)
    assert h.log[n:] == []


def test_empty_group_without_offsets_is_deleted() -> None:
    """testCleanupExpiredOffsetsGroupHasNoOffsets"""
    h = _h()
    [m] = h.join_stable("g", 1)
    h.leave("g", (m, None))
    n = len(h.log)
    h.sleep(INTERVAL)
    assert h.log[n:] == [group_tombstone("g")]
    assert "g" not in h.shard.groups
    assert describe(h, "g").error is ErrorCode.GROUP_ID_NOT_FOUND


def test_non_empty_group_without_offsets_is_kept() -> None:
    """testCleanupExpiredOffsetsGroupHasNoOffsets (maybeDeleteGroup only deletes Empty groups)"""
    h = _h()
    h.join_stable("g", 1, session_ms=600_000)
    n = len(h.log)
    h.sleep(INTERVAL)
    assert h.log[n:] == []
    assert h.group("g").state is S.STABLE


def test_cleanup_group_does_not_exist() -> None:
    """testCleanupExpiredOffsetsGroupDoesNotExist"""
    h = _h()
    h.sleep(3 * INTERVAL)
    assert h.log == []
    assert "expire-group-metadata" in h.shard.timers
