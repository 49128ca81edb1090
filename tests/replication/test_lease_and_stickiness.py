"""The leader lease against leadership transfers and one-sided link drops
(replication/raft/election.py).

One member of a three-node group is fed messages by hand and read through what it sends. The
election guard's clock (lease, stickiness, send times) is the test's: it starts far ahead of
pysyncobj's own clock, so no election deadline the guard sets runs out on its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import replication.raft.pysyncobj_adapter as adapter
from replication.raft import EntryStore, RaftHost, RaftLog, RaftTimings
from tests.cluster.harness import free_port


class Member:
    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        # p, me, q in address order: me stands first when p, as leader, is gone
        self.p, self.me, self.q = sorted(f"127.0.0.1:{free_port()}" for _ in range(3))
        self.pysyncobj_clock = adapter.monotonic  # election deadlines are on it
        self.now = self.pysyncobj_clock() + 1000.0
        monkeypatch.setattr(adapter, "monotonic", lambda: self.now)  # the group's clock
        self.timings = RaftTimings()
        self.host = RaftHost("secret", self.timings, listen=self.me)
        self.lg: RaftLog = self.host.add("p0", self.me, [self.p, self.q], self.me, str(tmp_path), EntryStore())
        self.group = self.lg.group
        self.sent: list[tuple[str, dict[str, Any]]] = []

        def send(peer: str, gid: str, message: dict[str, Any]) -> bool:
            self.sent.append((peer, message))
            return True

        self.host.hub.send = send  # type: ignore[method-assign]
        assert self.lg.transport is not None
        self.transport = self.lg.transport
        self.nodes = {n.id: n for n in self.transport._node_of.values()}
        for node in self.nodes.values():
            self.transport._onNodeConnected(node)

    def receive(self, sender: str, message: dict[str, Any]) -> None:
        self.group._SyncObj__onMessageReceived(self.nodes[sender], message)

    def sent_of(self, kind: str, to: str | None = None) -> list[dict[str, Any]]:
        return [m for peer, m in self.sent if m.get("type") == kind and to in (None, peer)]

    def elect(self) -> None:
        """Pre-vote, campaign and win with p's votes."""
        g = self.group
        g.__dict__["_SyncObj__raftElectionDeadline"] = 0.0
        g.doTick(0.0)
        self.receive(self.p, {"type": "pre_vote_response", "term": self.sent_of("pre_vote")[-1]["term"],
                              "granted": True})
        g.doTick(0.0)
        self.receive(self.p, {"type": "response_vote", "term": g.raftCurrentTerm})
        assert g._isLeader()

    def heartbeat(self) -> float:
        """An AppendEntries to each follower now; returns its send time."""
        self.group._SyncObj__sendAppendEntries()
        return float(self.sent_of("append_entries", self.q)[-1]["lts"])

    def ack(self, sender: str, lts: float) -> None:
        """``sender``'s answer to the AppendEntries sent at ``lts``: it holds all the log."""
        last = self.group.__dict__["_SyncObj__raftLog"][-1][1]
        self.receive(sender, {"type": "next_node_idx", "next_node_idx": last + 1, "success": True,
                              "reset": False, "lts": lts})

    def close(self) -> None:
        self.group.__dict__["_SyncObj__raftLog"]._destroy()
        self.host.hub.close()


@pytest.fixture
def member(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    m = Member(tmp_path, monkeypatch)
    yield m
    m.close()


def test_a_transfer_ends_the_lease_until_it_failed_and_fresh_acks_came(member: Member) -> None:
    """A leader that sent TimeoutNow may be deposed by its target at once (the followers let a
    transfer's election through): no echo of a message sent before or during the transfer
    renews its lease, only echoes of messages sent after it gave the transfer up."""
    m, g = member, member.group
    m.elect()
    m.now += 0.01
    before = m.heartbeat()
    m.now += 0.01
    m.ack(m.p, before)
    assert g.lease_valid()  # a majority (p and this node) echoed a recent send time
    g.transferLeadership(m.nodes[m.p])
    assert m.sent_of("timeout_now", m.p)
    handed_over = m.now
    assert not g.lease_valid()
    m.now += 0.01
    m.ack(m.q, before)  # q's answer to the AppendEntries sent before the TimeoutNow
    assert not g.lease_valid()
    during = m.heartbeat()  # and to one sent after it
    m.now += 0.01
    m.ack(m.q, during)
    m.ack(m.p, during)
    assert not g.lease_valid()
    # the transfer failed: this node still leads the longest election timeout later
    m.now = handed_over + m.timings.raft_max_timeout + 0.001
    assert g._isLeader()
    m.ack(m.q, during)  # a late echo of the transfer's time proves nothing still
    assert not g.lease_valid()
    fresh = m.heartbeat()
    m.now += 0.01
    m.ack(m.q, fresh)
    assert g.lease_valid()


def test_a_voter_whose_link_to_the_leader_dropped_stays_sticky_for_the_leaders_lease(member: Member) -> None:
    """The leader (p) may still count this node's last acknowledgement in its lease when the
    link drops on this side only: q gets neither a pre-vote nor a vote from it before that lease
    has run out, counted from the last message it got from p; after its stickiness, q does."""
    m, g = member, member.group
    sticky = m.timings.raft_min_timeout
    assert g.lease < sticky
    m.receive(m.p, {"type": "append_entries", "term": 1, "prevLogIdx": 1, "prevLogTerm": 0, "entries": [],
                    "commit_index": 1, "lts": 5.0})
    heard = m.now
    assert g.raftCurrentTerm == 1 and g._getLeader().id == m.p
    m.now += 0.01
    m.transport._onNodeDisconnected(m.nodes[m.p])
    vote = {"type": "request_vote", "term": 2, "last_log_index": 1, "last_log_term": 0}
    m.now = heard + g.lease  # the end of p's lease, on p's clock
    m.receive(m.q, {"type": "pre_vote", "term": 2, "last_log_index": 1, "last_log_term": 0})
    assert m.sent_of("pre_vote_response", m.q)[-1]["granted"] is False
    m.receive(m.q, dict(vote))
    assert not m.sent_of("response_vote", m.q) and g.raftCurrentTerm == 1
    m.now = heard + sticky + 0.001
    m.receive(m.q, dict(vote))
    assert m.sent_of("response_vote", m.q) and g.raftCurrentTerm == 2


def test_the_quick_election_after_a_link_drop_waits_out_the_stickiness(member: Member) -> None:
    """The shortcut that elects soon after the leader's connection drops no longer starts an
    election within this node's stickiness, and a deadline moved sooner still does not."""
    m, g = member, member.group
    m.receive(m.p, {"type": "append_entries", "term": 1, "prevLogIdx": 1, "prevLogTerm": 0, "entries": [],
                    "commit_index": 1, "lts": 5.0})
    heard = m.now
    m.lg.check_leadership()  # connected to its leader
    m.now += 0.01
    m.transport._onNodeDisconnected(m.nodes[m.p])
    before = m.pysyncobj_clock()
    m.lg.check_leadership()  # the link dropped: elect soon, but not yet
    left = heard + m.timings.raft_min_timeout - m.now
    assert g.__dict__["_SyncObj__raftElectionDeadline"] >= before + left
    g.__dict__["_SyncObj__raftElectionDeadline"] = 0.0  # anyone else's shortcut
    g.doTick(0.0)
    assert g.prevotes_started == 0 and not m.sent_of("pre_vote")


def test_a_transfer_vote_passes_a_sticky_voter_only_until_the_leader_gave_the_transfer_up(member: Member) -> None:
    """The leader counts echoes of what it sent after giving a transfer up toward a new lease; a
    voter that got such a message must not then help the transfer's target win (its
    TimeoutNow came late, or its campaign did)."""
    m, g = member, member.group
    m.receive(m.p, {"type": "append_entries", "term": 1, "prevLogIdx": 1, "prevLogTerm": 0, "entries": [],
                    "commit_index": 1, "lts": 100.7})
    vote = {"type": "request_vote", "term": 2, "last_log_index": 1, "last_log_term": 0, "transfer": True,
            "transfer_from": m.p}
    m.receive(m.q, dict(vote, transfer_until=100.6))  # p sent the message above after giving it up
    assert not m.sent_of("response_vote", m.q) and g.raftCurrentTerm == 1
    m.receive(m.q, dict(vote, transfer_until=101.0))  # a transfer p still waits for
    assert m.sent_of("response_vote", m.q) and g.raftCurrentTerm == 2
