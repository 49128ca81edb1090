"""Consumer groups (KIP-848) served by a shard through the runtime: heartbeats commit before they
are answered, the session and rebalance timers fence, offsets are checked against member epochs,
the admin APIs see both kinds of group, a group id is classic or consumer but never both, and a
shard loaded from the log carries on with the same members, epochs and assignments."""

from __future__ import annotations

from typing import Any

from coordinator import commands as c
from coordinator.config import ConsumerConfig, GroupConfig
from coordinator.consumer_group import records as r
from coordinator.consumer_group.classic_protocol import encode_assignment, parse_assignment
from coordinator.consumer_group.heartbeat_request import ConsumerHeartbeat
from coordinator.consumer_group.member import MemberState
from coordinator.errors import ErrorCode as E
from coordinator.records import GroupMetadataKey, OffsetCommitKey
from coordinator.runtime import GroupsObserved
from coordinator.shard import GroupCoordinatorShard
from tests.unit.harness import TEST_CONFIG, Harness, consumer_subscription

FOO = bytes(range(16)).hex()
BAR = bytes(range(1, 17)).hex()
TOPICS = {"foo": (FOO, 4), "bar": (BAR, 2)}
CONFIG = GroupConfig(min_session_timeout_ms=TEST_CONFIG.min_session_timeout_ms,
                     consumer=ConsumerConfig(heartbeat_interval_ms=1000, session_timeout_ms=10_000))


def hb(h: Harness, member: str, epoch: int, owned: dict[str, frozenset[int]] | None = None, group: str = "g",
       **kw: Any) -> c.ConsumerGroupHeartbeatResponse:
    fields: dict[str, Any] = {"rebalance_timeout_ms": 5000, "subscribed_topic_names": ("foo",)} if epoch == 0 else {}
    fields.update(kw)
    beat = ConsumerHeartbeat(group, member, epoch, owned=owned if owned is not None or epoch != 0 else {}, **fields)
    resp = h.call(c.ConsumerGroupHeartbeatRequest(beat, TOPICS, "client", "/127.0.0.1"))
    assert isinstance(resp, c.ConsumerGroupHeartbeatResponse)
    return resp


def owned(resp: c.ConsumerGroupHeartbeatResponse) -> dict[str, frozenset[int]]:
    assert resp.assignment is not None
    return dict(resp.assignment)


def commit(h: Harness, member: str, epoch: int, partitions: tuple[int, ...] = (0,), v9: bool = True,
           group: str = "g") -> set[E]:
    resp = h.call(c.OffsetCommitRequest(group, (("foo", tuple(c.PartitionCommit(p, 10 + p) for p in partitions)),),
                                        epoch, member, None, -1, v9, {"foo": FOO}))
    return {e for _, ps in resp.topics for _, e in ps}


def two_stable_members(h: Harness) -> tuple[c.ConsumerGroupHeartbeatResponse, c.ConsumerGroupHeartbeatResponse]:
    a = hb(h, "a", 0)
    assert a.error == E.NONE and owned(a) == {FOO: frozenset({0, 1, 2, 3})} and a.member_epoch == 1
    b = hb(h, "b", 0)
    assert b.error == E.NONE and b.member_epoch == 2 and owned(b) == {}  # a still holds them
    a2 = hb(h, "a", 1, owned(a))
    assert a2.member_epoch == 1 and len(owned(a2)[FOO]) == 2  # told to revoke two
    a3 = hb(h, "a", 1, owned(a2))  # revoked
    assert a3.member_epoch == 2 and a3.assignment is None
    b2 = hb(h, "b", 2, {})
    assert owned(b2) and set(owned(b2)[FOO]).isdisjoint(owned(a2)[FOO])
    return c.ConsumerGroupHeartbeatResponse(E.NONE, None, "a", 2, 1000, owned(a2)), b2


def test_members_join_and_converge_and_the_answers_wait_for_the_commit() -> None:
    h = Harness(CONFIG, auto_commit=False)
    pending = h.send(c.ConsumerGroupHeartbeatRequest(
        ConsumerHeartbeat("g", "a", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("foo",), owned={}),
        TOPICS))
    assert not pending.done  # a heartbeat is a write: answered once its records are committed
    h.commit_all()
    assert pending.response.error == E.NONE and pending.response.member_epoch == 1
    h.auto_commit = True
    hb(h, "b", 0)
    assert h.shard.consumer_groups["g"].state.value == "Reconciling"


def test_a_loaded_shard_carries_on_with_the_same_members_epochs_and_assignments() -> None:
    h = Harness(CONFIG)
    a, b = two_stable_members(h)
    shard, _ = GroupCoordinatorShard.load(list(h.log), h.now, CONFIG)
    live, loaded = h.shard.consumer_groups["g"], shard.consumer_groups["g"]
    assert (loaded.epoch, loaded.assignment_epoch, loaded.targets, loaded.partition_epochs) == (
        live.epoch, live.assignment_epoch, live.targets, live.partition_epochs)
    assert {m: (x.metadata, x.assignment) for m, x in loaded.members.items()} == {
        m: (x.metadata, x.assignment) for m, x in live.members.items()}
    assert "g" not in shard.groups  # no classic group of the same name
    assert {t.kind.value for t in map(shard.timers.get, shard.timers.keys()) if t} >= {"session-timeout"}


def test_the_session_timeout_fences_a_silent_member_and_the_other_gets_its_partitions() -> None:
    h = Harness(CONFIG)
    a, b = two_stable_members(h)
    for _ in range(12):  # b heartbeats, a does not
        h.sleep(1000)
        b = hb(h, "b", b.member_epoch, owned(b) if b.assignment is not None else None)
        if b.assignment is not None:
            last = b
    group = h.shard.consumer_groups["g"]
    assert set(group.members) == {"b"}
    assert owned(last) == {FOO: frozenset({0, 1, 2, 3})}


def test_the_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    h = Harness(CONFIG)
    a = hb(h, "a", 0)
    hb(h, "b", 0)
    a2 = hb(h, "a", 1, owned(a))  # told to revoke; keeps heartbeating without revoking
    assert h.shard.consumer_groups["g"].members["a"].assignment.state is MemberState.UNREVOKED_PARTITIONS
    for _ in range(6):
        h.sleep(1000)
        a2 = hb(h, "a", a2.member_epoch, owned(a))
        hb(h, "b", 2, {})
        if a2.error != E.NONE:
            break
    assert a2.error == E.UNKNOWN_MEMBER_ID  # fenced after its 5 s rebalance timeout
    assert set(h.shard.consumer_groups["g"].members) == {"b"}


def test_leaving_removes_the_member_and_cancels_its_timers() -> None:
    h = Harness(CONFIG)
    hb(h, "a", 0)
    left = hb(h, "a", -1)
    assert left.error == E.NONE and left.member_epoch == -1
    assert h.shard.consumer_groups["g"].members == {}
    assert not [k for k in h.shard.timers.keys() if "-g-a" in k]


def test_offset_commits_are_checked_against_the_member_epoch() -> None:
    h = Harness(CONFIG)
    a = hb(h, "a", 0)
    assert commit(h, "a", 1) == {E.NONE}
    assert commit(h, "a", 2) == {E.STALE_MEMBER_EPOCH}  # from the future
    assert commit(h, "zz", 1) == {E.UNKNOWN_MEMBER_ID}
    assert commit(h, "a", 1, v9=False) == {E.UNSUPPORTED_VERSION}
    assert commit(h, "", -1) == {E.UNKNOWN_MEMBER_ID}  # members exist: no anonymous commit
    hb(h, "b", 0)  # a moves to epoch 2 keeping some partitions it got at epoch 1
    a2 = hb(h, "a", 1, owned(a))
    a3 = hb(h, "a", 1, owned(a2))
    kept = tuple(sorted(owned(a2)[FOO]))
    assert a3.member_epoch == 2 and commit(h, "a", 1, kept) == {E.NONE}  # KIP-1251: still holds them since 1
    lost = tuple(sorted({0, 1, 2, 3} - set(kept)))
    b = hb(h, "b", 2, {})
    assert owned(b)[FOO] == frozenset(lost)
    assert commit(h, "a", 1, lost) == {E.STALE_MEMBER_EPOCH}  # a zombie commit for what it gave up


def test_offset_fetch_checks_the_exact_member_epoch() -> None:
    h = Harness(CONFIG)
    hb(h, "a", 0)
    commit(h, "a", 1)

    def fetch(member: str | None, epoch: int) -> c.OffsetFetchResponse:
        resp = h.call(c.OffsetFetchRequest("g", (("foo", (0,)),), member_id=member, member_epoch=epoch))
        assert isinstance(resp, c.OffsetFetchResponse)
        return resp

    assert fetch("a", 1).topics[0][1][0].offset == 10
    assert fetch(None, -1).topics[0][1][0].offset == 10  # an admin
    assert fetch("a", 0).error == E.STALE_MEMBER_EPOCH
    assert fetch("zz", 1).error == E.UNKNOWN_MEMBER_ID


def test_list_describe_and_delete_see_consumer_groups() -> None:
    h = Harness(CONFIG)
    hb(h, "a", 0, server_assignor="range")
    h.join_stable("classic")
    listed = h.call(c.ListGroupsRequest()).groups
    assert {(g.group_id, g.group_type, g.protocol_type) for g in listed} == {
        ("g", "consumer", "consumer"), ("classic", "classic", "consumer")}
    assert [g.group_id for g in h.call(c.ListGroupsRequest(types_filter=("Consumer",))).groups] == ["g"]
    assert [g.group_id for g in h.call(c.ListGroupsRequest(types_filter=("classic",))).groups] == ["classic"]
    described = h.call(c.DescribeGroupsRequest("g"))  # DescribeGroups never describes them
    assert (described.error, described.state, described.error_message) == (
        E.GROUP_ID_NOT_FOUND, "Dead", "Group g is not a classic group.")

    described = h.call(c.ConsumerGroupDescribeRequest("g", TOPICS))
    assert (described.error, described.state, described.group_epoch, described.assignment_epoch,
            described.assignor) == (E.NONE, "Stable", 1, 1, "range")
    (m,) = described.members
    assert (m.member_id, m.member_epoch, m.subscribed_topic_names) == ("a", 1, ("foo",))
    assert m.assignment == m.target_assignment == (c.DescribedTopicPartitions(FOO, "foo", (0, 1, 2, 3)),)
    assert h.call(c.ConsumerGroupDescribeRequest("classic", TOPICS)).error == E.GROUP_ID_NOT_FOUND

    commit(h, "a", 1)
    assert h.call(c.DeleteGroupsRequest(("g",))).results == (("g", E.NON_EMPTY_GROUP),)
    hb(h, "a", -1)
    n = len(h.log)
    assert h.call(c.DeleteGroupsRequest(("g",))).results == (("g", E.NONE),)
    written = h.records_since(n)
    assert all(rec.value is None for rec in written)
    assert OffsetCommitKey("g", "foo", 0) in {rec.key for rec in written}
    assert written[-1].key == r.GroupKey(r.GROUP_METADATA, "g")
    assert "g" not in h.shard.consumer_groups
    shard, _ = GroupCoordinatorShard.load(list(h.log), h.now, CONFIG)
    assert "g" not in shard.consumer_groups and "g" not in shard.groups


def test_a_group_id_is_classic_or_consumer_never_both() -> None:
    h = Harness(CONFIG)
    # offsets only: an empty classic group, replaced by the consumer group; the offsets stay
    assert h.commit("g", {("foo", 0): 7}) == {("foo", 0): E.NONE}
    n = len(h.log)
    assert hb(h, "a", 0).error == E.NONE
    assert h.records_since(n)[0].key == GroupMetadataKey("g") and h.records_since(n)[0].value is None
    assert "g" not in h.shard.groups and h.fetch("g", {"foo": [0]}) == {("foo", 0): 7}
    # a classic JoinGroup into a consumer group with members: as a classic member, if it can be one
    assert h.join("g").response.error == E.INCONSISTENT_GROUP_PROTOCOL  # no consumer protocol subscription
    assert h.join("g", protocol_type="connect").response.error == E.INCONSISTENT_GROUP_PROTOCOL
    # a consumer member into a classic group with members whose subscriptions cannot be read
    h.join_stable("classic")
    assert hb(h, "x", 0, group="classic").error == E.GROUP_ID_NOT_FOUND
    # an empty consumer group gives way to a classic one
    hb(h, "a", -1)
    h.join_stable("g")
    assert "g" in h.shard.groups and "g" not in h.shard.consumer_groups
    shard, _ = GroupCoordinatorShard.load(list(h.log), h.now, CONFIG)
    assert "g" in shard.groups and "g" not in shard.consumer_groups


def test_an_empty_consumer_group_expires_with_its_offsets() -> None:
    config = GroupConfig(min_session_timeout_ms=10, offsets_retention_ms=60_000,
                         offsets_retention_check_interval_ms=10_000, consumer=CONFIG.consumer)
    h = Harness(config)
    hb(h, "a", 0)
    commit(h, "a", 1)
    h.sleep(120_000)
    assert "g" not in h.shard.consumer_groups  # fenced at 10 s, then empty; its offsets expired
    assert h.fetch("g", {"foo": [0]}) == {("foo", 0): -1}
    shard, _ = GroupCoordinatorShard.load(list(h.log), h.now, config)
    assert shard.consumer_groups == {} and shard.offsets == {}


# ---------------------------------------------------------------- classic members (KIP-848 §7)

def classic_group(h: Harness, n: int = 2) -> tuple[list[str], int]:
    """A stable classic group "g" of ``n`` eager consumers of foo, split by range; (member ids, generation)."""
    protocols = (("range", consumer_subscription("foo")),)
    pending = [h.join("g", protocols=protocols) for _ in range(n)]
    while not all(p.done for p in pending):
        h.sleep(1000)
    responses = [p.response for p in pending]
    gen, leader, ids = responses[0].generation_id, responses[0].leader, [r.member_id for r in responses]
    split = {m: encode_assignment(0, {"foo": [p for p in range(4) if p % n == i]}) for i, m in enumerate(ids)}
    syncs = [h.sync("g", m, gen, assignments=split if m == leader else None) for m in ids]
    assert all(s.done and s.response.error == E.NONE for s in syncs)
    return ids, gen


def classic_join(h: Harness, member_id: str) -> c.JoinGroupResponse:
    resp = h.call(c.JoinGroupRequest("g", member_id, 10_000, 10_000, "consumer",
                                     (("range", consumer_subscription("foo")),), client_id="client",
                                     client_host="/127.0.0.1", topics=TOPICS))
    assert isinstance(resp, c.JoinGroupResponse)
    return resp


def classic_sync(h: Harness, member_id: str, generation: int) -> c.SyncGroupResponse:
    resp = h.call(c.SyncGroupRequest("g", generation, member_id, topics=TOPICS))
    assert isinstance(resp, c.SyncGroupResponse)
    return resp


def test_a_consumer_member_upgrades_a_classic_group_that_keeps_its_members_and_assignments() -> None:
    h = Harness(CONFIG)
    (m0, m1), gen = classic_group(h)
    n = len(h.log)
    joined = hb(h, "new", 0)
    assert joined.error == E.NONE and owned(joined) == {}  # everything is still held by the classic members
    written = h.records_since(n)
    assert written[0].key == GroupMetadataKey("g") and written[0].value is None
    assert "g" not in h.shard.groups
    group = h.shard.consumer_groups["g"]
    assert {m: (x.assignment.epoch, x.metadata.classic is not None) for m, x in group.members.items()} == {
        m0: (gen, True), m1: (gen, True), "new": (gen + 1, False)}
    assert group.epoch == gen + 1

    # the classic members learn from their heartbeats that they must rejoin; eager, they own nothing then
    assert h.heartbeat("g", m0, gen) == E.REBALANCE_IN_PROGRESS
    assert commit(h, m0, gen, v9=False) == {E.NONE}  # their generation is their member epoch
    assert commit(h, m0, gen + 5, v9=False) == {E.ILLEGAL_GENERATION}
    for m in (m0, m1):
        j = classic_join(h, m)
        assert (j.error, j.generation_id, j.protocol_type, j.protocol_name, j.leader) == (
            E.NONE, gen + 1, "consumer", "range", "")
        s = classic_sync(h, m, j.generation_id)
        assert s.error == E.NONE and s.protocol_type == "consumer"
        parts, _ = parse_assignment(s.assignment)
        assert len(parts.get("foo", ())) <= 2
    books = {(t, p): mid for mid, x in group.members.items()
             for t, ps in {**x.assignment.assigned}.items() for p in ps}
    assert len(books) <= 4
    got = hb(h, "new", gen + 1, {})
    assert owned(got) and all(books.get((FOO, p)) in (None, "new") for p in owned(got)[FOO])
    # a classic member now heartbeats normally, and one leaving is fenced
    assert h.heartbeat("g", m0, gen + 1) in (E.NONE, E.REBALANCE_IN_PROGRESS)
    assert h.leave("g", (m1, None)).members[0].error == E.NONE
    assert set(group.members) == {m0, "new"}
    shard, _ = GroupCoordinatorShard.load(list(h.log), h.now, CONFIG)
    loaded = shard.consumer_groups["g"]
    assert {m: (x.metadata, x.assignment) for m, x in loaded.members.items()} == {
        m: (x.metadata, x.assignment) for m, x in group.members.items()}


def test_an_upgrade_that_cannot_keep_the_assignments_is_refused() -> None:
    h = Harness(CONFIG)
    ids, gen = classic_group(h)
    with_user_data = encode_assignment(0, {"foo": [0, 2]})[:-4] + b"\x00\x00\x00\x02ud"  # a client-side assignor
    h.shard.groups["g"].members[ids[0]].assignment = with_user_data
    assert hb(h, "new", 0).error == E.GROUP_ID_NOT_FOUND
    assert "g" in h.shard.groups and "g" not in h.shard.consumer_groups
    h2 = Harness(CONFIG)
    h2.join_stable("g", protocol_type="connect")
    assert hb(h2, "new", 0).error == E.GROUP_ID_NOT_FOUND


def test_the_last_consumer_protocol_member_leaving_turns_the_group_classic_again() -> None:
    h = Harness(CONFIG)
    (m0, m1), gen = classic_group(h)
    hb(h, "new", 0)
    n = len(h.log)
    assert hb(h, "new", -1).error == E.NONE
    assert "g" not in h.shard.consumer_groups
    classic = h.shard.groups["g"]
    assert set(classic.members) == {m0, m1} and classic.state.value == "PreparingRebalance"
    assert classic.protocol_type == "consumer" and classic.protocol_name == "range"
    written = h.records_since(n)
    assert written[-1].key == GroupMetadataKey("g") and written[-1].value is not None
    # each member holds its target (the leaver's share is handed out by the classic rebalance)
    held = sorted(p for m in classic.members.values() for p in parse_assignment(m.assignment)[0].get("foo", ()))
    assert held == [0, 1, 2]
    assert h.heartbeat("g", m0, classic.generation_id) == E.REBALANCE_IN_PROGRESS
    joins = [h.join("g", m, protocols=(("range", consumer_subscription("foo")),)) for m in (m0, m1)]
    assert all(j.done and j.response.error == E.NONE for j in joins)
    shard, _ = GroupCoordinatorShard.load(list(h.log), h.now, CONFIG)
    assert "g" in shard.groups and "g" not in shard.consumer_groups


def test_a_migration_policy_can_forbid_the_upgrade_and_the_downgrade() -> None:
    config = GroupConfig(min_session_timeout_ms=10, consumer=ConsumerConfig(migration_policy="downgrade"))
    h = Harness(config)
    classic_group(h)
    assert hb(h, "new", 0).error == E.GROUP_ID_NOT_FOUND  # no upgrade
    config = GroupConfig(min_session_timeout_ms=10, consumer=ConsumerConfig(migration_policy="upgrade"))
    h = Harness(config)
    classic_group(h)
    hb(h, "new", 0)
    hb(h, "new", -1)
    assert "g" in h.shard.consumer_groups and "g" not in h.shard.groups  # no downgrade: classic members stay


def test_a_static_classic_member_restarting_takes_its_old_place_without_a_new_epoch() -> None:
    """Kafka's classic static join replacing the current holder: the new member id gets the old
    one's partitions and the group epoch stays."""
    h = Harness(CONFIG)
    a = hb(h, "a", 0)

    def static_join(member_id: str) -> c.JoinGroupResponse:
        resp = h.call(c.JoinGroupRequest("g", member_id, 10_000, 10_000, "consumer",
                                         (("range", consumer_subscription("foo")),), group_instance_id="s",
                                         client_id="client", client_host="/127.0.0.1", topics=TOPICS))
        assert isinstance(resp, c.JoinGroupResponse) and resp.error == E.NONE, resp
        return resp

    first = static_join("")
    told = hb(h, "a", a.member_epoch, owned(a))  # a is told to revoke what the static member gets
    hb(h, "a", a.member_epoch, owned(told))  # and does
    again = static_join(first.member_id)
    held = classic_sync(h, first.member_id, again.generation_id)
    assert parse_assignment(held.assignment)[0].get("foo")  # it holds partitions now
    epoch = h.shard.consumer_groups["g"].epoch
    restarted = static_join("")  # a new process of the same instance
    assert restarted.member_id != first.member_id
    group = h.shard.consumer_groups["g"]
    assert group.epoch == epoch and first.member_id not in group.members
    assert classic_sync(h, restarted.member_id, restarted.generation_id).assignment == held.assignment


def test_consumer_groups_are_counted_with_the_classic_ones() -> None:
    h = Harness(CONFIG)
    hb(h, "a", 0)
    h.join_stable("classic")
    views = {v.group_id: (v.state, v.members) for v in h.shard.census.everything(h.shard.groups,
                                                                                  h.shard.consumer_groups)}
    assert views == {"g": ("Stable", 1), "classic": ("Stable", 1)}
    beat = ConsumerHeartbeat("g", "b", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("foo",), owned={})
    effects = h.rt.submit(0, c.ConsumerGroupHeartbeatRequest(beat, TOPICS), 999, h.now)
    observed = [v for e in effects if isinstance(e, GroupsObserved) for v in e.groups]
    assert [(v.group_id, v.state, v.members) for v in observed] == [("g", "Reconciling", 2)]
