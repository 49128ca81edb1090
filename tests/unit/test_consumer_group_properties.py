"""Properties of consumer groups (KIP-848) over random sequences of heartbeats, subscription
changes, leaves, silences (the clock runs, sessions expire) and coordinator failovers, driven
through the runtime like the wire layer drives it:

- no partition is ever held by two members at once, in the coordinator's books (assigned or
  pending revocation) nor in what the live members were told they own: a partition reaches its
  new owner only after the previous one acknowledged the revocation;
- the group epoch, the assignment epoch and each member's epoch never decrease;
- replay equals live state: a shard loaded from the log has the same group, and carries on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator import commands as c
from coordinator.config import ConsumerConfig, GroupConfig
from coordinator.consumer_group.group import ConsumerGroup
from coordinator.consumer_group.heartbeat_request import ConsumerHeartbeat
from coordinator.errors import ErrorCode as E
from coordinator.runtime import CoordinatorRuntime
from coordinator.shard import GroupCoordinatorShard
from tests.unit.harness import Harness

TOPICS = {"foo": (bytes(range(16)).hex(), 5), "bar": (bytes(range(1, 17)).hex(), 3)}
CONFIG = GroupConfig(min_session_timeout_ms=10,
                     consumer=ConsumerConfig(heartbeat_interval_ms=1000, session_timeout_ms=6000))
SUBSCRIPTIONS = [("foo",), ("bar",), ("foo", "bar")]


@dataclass
class Client:
    """A consumer as the protocol expects it to behave: it uses only what it was last told it
    owns, and reports exactly that."""

    member_id: str
    topics: tuple[str, ...] = ("foo",)
    active: bool = False
    epoch: int = 0
    owned: dict[str, frozenset[int]] = field(default_factory=dict)
    send_topics: bool = True


def beat(h: Harness, cl: Client, epoch: int | None = None) -> c.ConsumerGroupHeartbeatResponse:
    e = cl.epoch if epoch is None else epoch
    hb = ConsumerHeartbeat("g", cl.member_id, e, rebalance_timeout_ms=4000 if e == 0 else -1,
                           subscribed_topic_names=cl.topics if cl.send_topics or e == 0 else None,
                           owned={} if e == 0 else dict(cl.owned))
    resp = h.call(c.ConsumerGroupHeartbeatRequest(hb, TOPICS))
    assert isinstance(resp, c.ConsumerGroupHeartbeatResponse)
    return resp


def apply(cl: Client, resp: c.ConsumerGroupHeartbeatResponse) -> None:
    if resp.error in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
        cl.epoch, cl.owned, cl.send_topics = 0, {}, True  # drop everything and rejoin
        return
    assert resp.error == E.NONE, resp
    cl.epoch, cl.send_topics = resp.member_epoch, False
    if resp.assignment is not None:
        cl.owned = {t: ps for t, ps in resp.assignment.items() if ps}


def failover(h: Harness) -> None:
    """A new coordinator loads the partition from the log."""
    h.epoch += 1
    h.rt = CoordinatorRuntime(CONFIG)
    h._handle(h.rt.begin_load(h.partition, h.epoch))
    h._handle(h.rt.complete_load(h.partition, h.epoch, list(h.log), h.now))


def books(group: ConsumerGroup) -> dict[str, dict[int, str]]:
    held: dict[str, dict[int, str]] = {}
    for mid, m in group.members.items():
        for owned in (m.assignment.assigned, m.assignment.pending_revocation):
            for t, ps in owned.items():
                for p in ps:
                    other = held.setdefault(t, {}).setdefault(p, mid)
                    assert other == mid, f"{t}-{p} held by {other} and {mid}"
    return held


def same(a: ConsumerGroup, b: ConsumerGroup) -> None:
    assert (a.epoch, a.metadata_hash, a.assignment_epoch, a.targets, a.partition_epochs) == (
        b.epoch, b.metadata_hash, b.assignment_epoch, b.targets, b.partition_epochs)
    assert {m: (x.metadata, x.assignment) for m, x in a.members.items()} == {
        m: (x.metadata, x.assignment) for m, x in b.members.items()}


ACTIONS = st.one_of(
    st.tuples(st.just("beat"), st.integers(0, 3)),
    st.tuples(st.just("beat"), st.integers(0, 3)),
    st.tuples(st.just("beat"), st.integers(0, 3)),
    st.tuples(st.just("subscribe"), st.integers(0, 3), st.integers(0, len(SUBSCRIPTIONS) - 1)),
    st.tuples(st.just("leave"), st.integers(0, 3)),
    st.tuples(st.just("sleep"), st.integers(200, 7000)),
    st.tuples(st.just("failover")),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(ACTIONS, min_size=10, max_size=60))
def test_random_sequences_keep_ownership_exclusive_epochs_monotone_and_replay_equal(actions: list[tuple]) -> None:  # type: ignore[type-arg]
    h = Harness(CONFIG)
    clients = [Client(f"m{i}") for i in range(4)]
    last_epochs: dict[str, int] = {}
    group_epochs = (0, -1)
    for action in actions:
        kind = action[0]
        if kind == "beat":
            cl = clients[action[1]]
            if not cl.active:
                cl.active, cl.epoch, cl.owned, cl.send_topics = True, 0, {}, True
            apply(cl, beat(h, cl))
        elif kind == "subscribe":
            cl = clients[action[1]]
            cl.topics, cl.send_topics = SUBSCRIPTIONS[action[2]], True
            if cl.active:
                apply(cl, beat(h, cl))
        elif kind == "leave":
            cl = clients[action[1]]
            if cl.active:
                resp = beat(h, cl, -1)
                assert resp.error in (E.NONE, E.UNKNOWN_MEMBER_ID, E.GROUP_ID_NOT_FOUND), resp
                cl.active, cl.epoch, cl.owned = False, 0, {}
        elif kind == "sleep":
            h.sleep(action[1])
        else:
            failover(h)

        group = h.shard.consumer_groups.get("g")
        if group is None:
            continue
        held = books(group)
        # what the live members were told they own: theirs in the books, so never shared
        for cl in clients:
            if cl.active and cl.member_id in group.members:
                for t, ps in cl.owned.items():
                    for p in ps:
                        assert held.get(t, {}).get(p) == cl.member_id, (cl.member_id, t, p, held)
        assert (group.epoch, group.assignment_epoch) >= group_epochs
        group_epochs = (group.epoch, group.assignment_epoch)
        for mid, m in group.members.items():
            if m.assignment.epoch >= 0:
                assert m.assignment.epoch >= last_epochs.get(mid, 0), (mid, m.assignment.epoch)
                last_epochs[mid] = m.assignment.epoch
        for mid in set(last_epochs) - set(group.members):
            del last_epochs[mid]  # it left or was fenced; it rejoins from epoch 0
        loaded, _ = GroupCoordinatorShard.load(list(h.log), h.now, CONFIG)
        same(loaded.consumer_groups["g"], group)


def test_members_that_keep_heartbeating_converge_to_a_stable_balanced_group() -> None:
    h = Harness(CONFIG)
    clients = [Client(f"m{i}", topics=("foo", "bar")) for i in range(3)]
    for cl in clients:
        cl.active = True
        apply(cl, beat(h, cl))
    for _ in range(6):
        for cl in clients:
            apply(cl, beat(h, cl))
    group = h.shard.consumer_groups["g"]
    assert group.state.value == "Stable"
    sizes = sorted(sum(len(ps) for ps in cl.owned.values()) for cl in clients)
    assert sizes[-1] - sizes[0] <= 1 and sum(sizes) == 8
