"""ClassicGroup unit behaviour, ported from Kafka's ClassicGroupTest (reference §1.2, §1.3, §4.10)."""

from __future__ import annotations

import pytest

from coordinator.errors import ErrorCode
from coordinator.group import ClassicGroup, GroupState, IllegalStateTransition, Member

from .harness import consumer_subscription

S = GroupState
ALLOWED = {
    S.EMPTY: {S.PREPARING_REBALANCE},
    S.PREPARING_REBALANCE: {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY},
    S.COMPLETING_REBALANCE: {S.PREPARING_REBALANCE},
    S.STABLE: {S.COMPLETING_REBALANCE},
    S.DEAD: set(S),
}


def member(mid: str, *protocols: str, protocol_type: str = "consumer", meta: bytes = b"",
           instance: str | None = None) -> Member:
    return Member(mid, instance, "client", "/h", 10_000, 5_000, protocol_type,
                  [(p, meta) for p in protocols])


@pytest.mark.parametrize("source", list(S))
@pytest.mark.parametrize("target", list(S))
def test_state_transitions(source: GroupState, target: GroupState) -> None:
    """test*Transition (ClassicGroupTest): exactly the transition table"""
    g = ClassicGroup("g", state=source)
    if source in ALLOWED[target]:
        g.transition_to(target, 123)
        assert (g.state, g.previous_state, g.current_state_timestamp) == (target, source, 123)
    else:
        with pytest.raises(IllegalStateTransition):
            g.transition_to(target, 123)
        assert g.state is source


@pytest.mark.parametrize("state", list(S))
def test_can_rebalance(state: GroupState) -> None:
    """testCanRebalanceWhen* / testCannotRebalanceWhen*"""
    assert ClassicGroup("g", state=state).can_rebalance() is (
        state in (S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY))


def test_select_protocol() -> None:
    """testSelectProtocol"""
    g = ClassicGroup("g")
    g.add(member("m1", "range", "roundrobin"))
    assert g.select_protocol() == "range"
    g.add(member("m2", "roundrobin", "range"))
    assert g.select_protocol() in ("range", "roundrobin")  # a tie
    g.add(member("m3", "roundrobin", "blah"))
    assert g.select_protocol() == "roundrobin"


def test_select_protocol_raises_if_no_members() -> None:
    """testSelectProtocolRaisesIfNoMembers"""
    with pytest.raises(IllegalStateTransition):
        ClassicGroup("g").select_protocol()


def test_select_protocol_chooses_compatible_protocol() -> None:
    """testSelectProtocolChoosesCompatibleProtocol"""
    g = ClassicGroup("g")
    g.add(member("m1", "range", "roundrobin"))
    g.add(member("m2", "roundrobin", "blah"))
    assert g.select_protocol() == "roundrobin"


def test_supports_protocols() -> None:
    """testSupportsProtocols"""
    g = ClassicGroup("g")
    assert g.supports_protocols("consumer", ["range", "roundrobin"])  # an Empty group supports everything
    assert not g.supports_protocols("", ["range"])
    assert not g.supports_protocols("consumer", [])
    g.add(member("m1", "range", "roundrobin"))
    g.transition_to(S.PREPARING_REBALANCE, 0)
    assert g.supports_protocols("consumer", ["roundrobin", "foo"])
    assert not g.supports_protocols("consumer", ["foo", "bar"])
    assert not g.supports_protocols("connect", ["range"])
    g.add(member("m2", "roundrobin", "blah"))
    assert g.supports_protocols("consumer", ["roundrobin", "foo"])
    assert not g.supports_protocols("consumer", ["range", "foo"])


def test_first_member_sets_protocol_type_and_leader() -> None:
    """testAddMember / leader election on removal (CG.add, CG.remove)"""
    g = ClassicGroup("g")
    g.add(member("m1", "range", protocol_type="connect"))
    g.add(member("m2", "range", protocol_type="connect"))
    assert (g.protocol_type, g.leader_id) == ("connect", "m1")
    g.remove("m1")
    assert g.leader_id == "m2"
    g.remove("m2")
    assert g.leader_id is None and g.members == {}


def test_subscribed_topics() -> None:
    """testSubscribedTopics"""
    g = ClassicGroup("g")
    g.add(member("m1", "range", meta=consumer_subscription("foo", "bar")))
    g.transition_to(S.PREPARING_REBALANCE, 0)
    g.init_next_generation(0)
    assert g.subscribed_topics == {"foo", "bar"}
    g.add(member("m2", "range", meta=consumer_subscription("baz")))
    assert g.compute_subscribed_topics() == {"foo", "bar", "baz"}
    g.add(member("m3", "range", meta=b"\x00\x00garbage"))
    assert g.compute_subscribed_topics() is None  # any unparsable subscription: unknown


def test_subscribed_topics_non_consumer_group() -> None:
    """testSubscribedTopicsNonConsumerGroup"""
    g = ClassicGroup("g")
    g.add(member("m1", "range", protocol_type="connect", meta=consumer_subscription("foo")))
    g.transition_to(S.PREPARING_REBALANCE, 0)
    g.init_next_generation(0)
    assert g.subscribed_topics is None


def test_is_subscribed_to_topic() -> None:
    """testIsSubscribedToTopic"""
    g = ClassicGroup("g")
    assert g.is_subscribed_to_topic("foo") is False  # no protocol type
    g.add(member("m1", "range", meta=consumer_subscription("foo")))
    g.transition_to(S.PREPARING_REBALANCE, 0)
    g.init_next_generation(0)
    assert g.is_subscribed_to_topic("foo") and not g.is_subscribed_to_topic("bar")
    g.subscribed_topics = None  # unknown subscriptions of a consumer group: everything counts
    assert g.is_subscribed_to_topic("bar")


def test_init_next_generation() -> None:
    """testInitNextGeneration"""
    g = ClassicGroup("g")
    m = member("m1", "roundrobin")
    g.add(m)
    g.transition_to(S.PREPARING_REBALANCE, 0)
    g.pending_sync_members.add("m1")
    g.init_next_generation(50)
    assert (g.generation_id, g.protocol_name, g.state, g.current_state_timestamp) == (
        1, "roundrobin", S.COMPLETING_REBALANCE, 50)
    assert g.pending_sync_members == set()  # testNewGenerationClearsPendingSyncMembers


def test_init_next_generation_empty_group() -> None:
    """testInitNextGenerationEmptyGroup"""
    g = ClassicGroup("g", protocol_name="range")
    g.transition_to(S.PREPARING_REBALANCE, 0)
    g.init_next_generation(7)
    assert (g.generation_id, g.protocol_name, g.state) == (1, None, S.EMPTY)


def test_elect_new_joined_leader() -> None:
    """testElectNewJoinedLeader / testMaybeElectNewJoinedLeaderChooseExisting"""
    g = ClassicGroup("g")
    for mid in ("leader", "m2", "m3"):
        g.add(member(mid, "range"))
    g.members["m3"].awaiting_join = "t3"
    assert g.maybe_elect_new_joined_leader() and g.leader_id == "m3"
    g.members["m2"].awaiting_join = "t2"
    assert g.maybe_elect_new_joined_leader() and g.leader_id == "m3"  # the current leader rejoined: kept
    for m in g.members.values():
        m.awaiting_join = None
    assert g.maybe_elect_new_joined_leader() is False


def test_has_all_members_joined_requires_no_pending_members() -> None:
    """testCannotAddPendingMemberIfStable / hasAllMembersJoined (pending KIP-394 members block completion)"""
    g = ClassicGroup("g")
    g.add(member("m1", "range"))
    g.members["m1"].awaiting_join = "t"
    assert g.has_all_members_joined()
    g.pending_join_members.add("p1")
    assert not g.has_all_members_joined()
    g.add(member("p1", "range"))  # joining removes it from the pending set
    assert g.pending_join_members == set() and not g.has_all_members_joined()


def test_removal_from_pending_when_member_is_removed() -> None:
    """testRemovalFromPendingWhenMemberIsRemoved / testCanAddAndRemovePendingSyncMember"""
    g = ClassicGroup("g")
    g.add(member("m1", "range", instance="i1"))
    g.pending_sync_members.add("m1")
    g.remove("m1")
    assert g.pending_sync_members == set() and g.static_members == {}


def test_has_satisfied_heartbeat() -> None:
    """testHasSatisfiedHeartbeat (CGM:208)"""
    m = member("m1", "range")
    assert not m.has_satisfied_heartbeat()
    m.awaiting_sync = "t"
    assert m.has_satisfied_heartbeat()
    m.is_new = True
    assert not m.has_satisfied_heartbeat()


def test_validate_member_and_rebalance_timeout() -> None:
    """testValidateOffsetCommit (validateMember ladder) / rebalanceTimeoutMs = max over members"""
    g = ClassicGroup("g")
    g.add(member("m1", "range", instance="i1"))
    m2 = member("m2", "range")
    m2.rebalance_timeout_ms = 30_000
    g.add(m2)
    assert g.validate_member("m1", "i1") == ErrorCode.NONE
    assert g.validate_member("x", "i1") == ErrorCode.FENCED_INSTANCE_ID
    assert g.validate_member("m1", "i9") == ErrorCode.UNKNOWN_MEMBER_ID
    assert g.validate_member("m2", None) == ErrorCode.NONE
    assert g.validate_member("zz", None) == ErrorCode.UNKNOWN_MEMBER_ID
    assert g.rebalance_timeout_ms() == 30_000


def test_matches_is_exact_ordered_equality() -> None:
    """testUpdateMember / matches(protocols)"""
    m = member("m1", "range", "roundrobin")
    assert m.matches((("range", b""), ("roundrobin", b"")))
    assert not m.matches((("roundrobin", b""), ("range", b"")))
    assert not m.matches((("range", b"x"), ("roundrobin", b"")))
