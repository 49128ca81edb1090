"""Preferred-leader balancing is rare and bounded, as Kafka's (replication/raft/balance.py): a
leader hands a group back to its preferred node only in a round (every check interval), only
when that node is past the imbalance threshold, once per round, and never while the group's
owner says it is busy; every handover is logged.

One member of a three-node group, elected by hand (no other process), leads a group whose
preferred node is another member; the log module's clock is the test's.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import replication.raft.log as raft_log
import replication.raft.pysyncobj_adapter as adapter
from replication.raft import EntryStore, RaftHost, RaftLog, RaftTimings
from replication.raft.balance import BalanceRounds, imbalanced
from tests.cluster.harness import free_port


class Leader:
    """``me`` leads the group; ``p`` is its preferred node, connected since ``t0``."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timings: RaftTimings) -> None:
        self.p, self.me, self.q = sorted(f"127.0.0.1:{free_port()}" for _ in range(3))
        self.now = adapter.monotonic() + 1000.0
        monkeypatch.setattr(adapter, "monotonic", lambda: self.now)  # pysyncobj's clock
        monkeypatch.setattr(raft_log, "time", SimpleNamespace(monotonic=lambda: self.now))  # the balancer's
        self.host = RaftHost("secret", timings, listen=self.me)
        self.lg: RaftLog = self.host.add("p0", self.me, [self.p, self.q], self.p, str(tmp_path), EntryStore())
        g = self.group = self.lg.group
        sent: list[dict[str, Any]] = []

        def send(peer: str, gid: str, message: dict[str, Any]) -> bool:
            sent.append(message)
            return True

        self.host.hub.send = send  # type: ignore[method-assign]
        assert self.lg.transport is not None
        nodes = {n.id: n for n in self.lg.transport._node_of.values()}
        for node in nodes.values():
            self.lg.transport._onNodeConnected(node)
        g.__dict__["_SyncObj__raftElectionDeadline"] = 0.0  # pre-vote, campaign, win with p's votes
        g.doTick(0.0)
        pre_vote = [x for x in sent if x.get("type") == "pre_vote"][-1]
        g._SyncObj__onMessageReceived(nodes[self.p], {"type": "pre_vote_response", "term": pre_vote["term"],
                                                      "granted": True})
        g.doTick(0.0)
        g._SyncObj__onMessageReceived(nodes[self.p], {"type": "response_vote", "term": g.raftCurrentTerm})
        assert g._isLeader()
        self.t0 = self.now

    def wants_at(self, t: float) -> bool:
        """Asked ``t`` seconds after the election (the ticker asks every couple of seconds)."""
        self.now = self.t0 + t
        return bool(self.lg.wants_transfer())

    def close(self) -> None:
        self.group.__dict__["_SyncObj__raftLog"]._destroy()
        self.host.hub.close()


def leader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **timings: Any) -> Leader:
    return Leader(tmp_path, monkeypatch, RaftTimings(**timings))


def test_a_leader_hands_its_group_back_only_at_a_balancing_round_once(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    m = leader(tmp_path, monkeypatch)  # Kafka's defaults: a round every 300 s, 10 %
    try:
        # the preferred node has been connected well past transfer_settle (5 s): no round yet
        assert not any(m.wants_at(t) for t in (0.0, 6.0, 60.0, 299.0))
        assert m.wants_at(301.0)  # the first round, one interval after the first check
        assert not m.wants_at(303.0)  # once per round, even if the transfer did not go through
        assert not m.wants_at(599.0)
        assert m.wants_at(602.0)  # the next round
    finally:
        m.close()


def test_no_handover_below_the_threshold_or_when_disabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = leader(tmp_path, monkeypatch, leader_imbalance_per_broker_percentage=100.0,
               leader_imbalance_check_interval=10.0)
    try:  # the preferred node's one group led elsewhere is 100 %, not more
        assert not any(m.wants_at(t) for t in range(0, 60, 2))
    finally:
        m.close()
    m = leader(tmp_path / "off", monkeypatch, auto_leader_rebalance=False, leader_imbalance_check_interval=10.0)
    try:
        assert not any(m.wants_at(t) for t in range(0, 60, 2))
    finally:
        m.close()


def test_a_busy_group_stays_until_its_owner_is_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = leader(tmp_path, monkeypatch, leader_imbalance_check_interval=10.0)
    busy = [True]
    m.lg.set_busy(lambda: busy[0])  # e.g. a group of the partition rebalancing
    try:
        assert not any(m.wants_at(t) for t in range(0, 20, 2))  # rounds at 10 and 20
        busy[0] = False
        assert m.wants_at(22.0)  # later in the same round, once the owner is done
        assert not m.wants_at(24.0)
    finally:
        m.close()


def test_every_handover_is_logged_with_its_nodes_and_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    m = leader(tmp_path, monkeypatch)
    m.lg.set_node_names({m.p: "2", m.me: "0", m.q: "1"})
    m.group.transferLeadership = lambda to, callback: callback(None, adapter.FAIL_REASON.SUCCESS)  # type: ignore[method-assign]
    try:
        with caplog.at_level(logging.INFO, logger="kcoord.raft"):
            m.lg.start_transfer(m.now)
            m.lg.step_transfer(m.now)
        assert "event=leadership_transfer partition=p0 from=0 to=2 reason=balance" in caplog.text
    finally:
        m.close()


def test_the_imbalance_ratio_must_exceed_the_threshold() -> None:
    views = [("a", "a")] * 9 + [("a", "b")] + [("b", "b"), ("b", None)]
    assert imbalanced(views, 10.0) == {"b"}  # a: 1 of 10 led elsewhere is not more than 10 %
    assert imbalanced(views, 9.0) == {"a", "b"}
    assert imbalanced(views, 50.0) == frozenset()  # b: 1 of 2 (no known leader counts as elsewhere)


def test_rounds_come_one_interval_apart_and_see_every_member() -> None:
    class View:
        def __init__(self, pref: str, leader: str | None) -> None:
            self.view = (pref, leader)

        def balance_view(self) -> tuple[str, str | None]:
            return self.view

    rounds, t = BalanceRounds(), RaftTimings(leader_imbalance_check_interval=300.0)
    members = [View("a", "b"), View("b", "b")]
    for v in members:
        rounds.join(v)
    assert [rounds.advance(x, t) for x in (100.0, 200.0, 399.0)] == [0, 0, 0]
    assert rounds.advance(400.0, t) == 1 and rounds.imbalanced == {"a"}
    members[0].view = ("a", "a")
    assert rounds.advance(699.0, t) == 1 and rounds.imbalanced == {"a"}  # unchanged until the next round
    assert rounds.advance(700.0, t) == 2 and rounds.imbalanced == frozenset()
