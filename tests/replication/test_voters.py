"""Votes by replica (replication/raft/voters.py): a node back with an empty disk under its old id
must not help elect anyone until it has caught up and the cluster made it the voter again.

One member of a three-node group (p, me, q: nodes 0, 1, 2) is fed (pre-)vote answers by hand.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from replication.raft.voters import VoterSet
from tests.replication.test_lease_and_stickiness import Member


@pytest.fixture
def member(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Member]:
    m = Member(tmp_path, monkeypatch)
    v = m.group.voters
    v.directory, v.me = "d-me", 1
    v.node_of = {m.p: 0, m.me: 1, m.q: 2}.get
    v.update({0: "d-p", 1: "d-me", 2: "d-q"}, 1)
    yield m
    m.close()


def _campaign(m: Member, pre_vote_dir: str) -> bool:
    """A pre-vote granted by p from replica ``pre_vote_dir``: whether this node then campaigns."""
    g = m.group
    g.__dict__["_SyncObj__raftElectionDeadline"] = 0.0
    g.doTick(0.0)
    m.receive(m.p, {"type": "pre_vote_response", "term": m.sent_of("pre_vote")[-1]["term"], "granted": True,
                    "dir": pre_vote_dir})
    g.doTick(0.0)
    return bool(m.sent_of("request_vote"))


def test_a_pre_vote_from_a_replica_that_is_not_its_nodes_voter_does_not_count(member: Member) -> None:
    m = member
    assert not _campaign(m, "d-p-wiped")
    assert m.group.voters.refused == 1
    assert _campaign(m, "d-p")


def test_a_vote_counts_only_from_the_voting_replica_and_once(member: Member) -> None:
    m, g = member, member.group
    assert _campaign(m, "d-p")
    term = g.raftCurrentTerm
    m.receive(m.p, {"type": "response_vote", "term": term, "dir": "d-p-wiped"})
    assert not g._isLeader()  # p's disk was replaced: its empty log's vote is not p's vote
    m.receive(m.q, {"type": "response_vote", "term": term, "dir": "d-q"})
    assert g._isLeader()


class _Voter:
    """A member as pysyncobj names one (``id``: its address)."""

    def __init__(self, addr: str) -> None:
        self.id = addr


def test_a_vote_from_a_member_that_is_no_voter_of_the_group_does_not_count() -> None:
    """A learner of the group's configuration, or a member removed from it, answers a vote
    request it should not have had: pysyncobj would count it."""
    from replication.raft.election import ElectionGuard

    guard = ElectionGuard()
    guard._election_init(lambda: 0.0, 1.0, 2.0, VoterSet())
    guard.__dict__["_SyncObj__otherNodes"] = {_Voter("p")}
    guard.__dict__["_SyncObj__raftCurrentTerm"] = 3
    assert not guard._vote_counts("learner", {"term": 3})
    assert guard._vote_counts("p", {"term": 3})


def test_a_repeated_vote_answer_is_counted_once() -> None:
    """pysyncobj counts every response_vote it gets: a duplicated one (a link that duplicates,
    a hostile peer) would count twice toward a five-node majority."""
    from replication.raft.election import ElectionGuard

    guard = ElectionGuard()
    guard._election_init(lambda: 0.0, 1.0, 2.0, VoterSet())
    guard.__dict__["_SyncObj__otherNodes"] = {_Voter("p"), _Voter("q")}
    guard.__dict__["_SyncObj__raftCurrentTerm"] = 3
    assert guard._vote_counts("p", {"term": 3})
    assert not guard._vote_counts("p", {"term": 3})
    assert guard._vote_counts("q", {"term": 3})
    guard.__dict__["_SyncObj__raftCurrentTerm"] = 4
    assert guard._vote_counts("p", {"term": 4})


def test_a_learner_grants_no_vote_and_does_not_campaign(member: Member) -> None:
    m, g = member, member.group
    g.voters.update({0: "d-p", 1: "d-me-before-the-wipe", 2: "d-q"}, 2)
    assert not g.voters.may_vote()
    m.receive(m.q, {"type": "pre_vote", "term": 5, "last_log_index": 100, "last_log_term": 4})
    assert m.sent_of("pre_vote_response")[-1]["granted"] is False
    m.receive(m.q, {"type": "request_vote", "term": 5, "last_log_index": 100, "last_log_term": 4})
    assert not m.sent_of("response_vote")
    g.__dict__["_SyncObj__raftElectionDeadline"] = 0.0
    g.doTick(0.0)
    assert not m.sent_of("pre_vote") and not m.sent_of("request_vote")
    g.voters.update({0: "d-p", 1: "d-me", 2: "d-q"}, 3)  # promoted
    m.receive(m.q, {"type": "request_vote", "term": 6, "last_log_index": 100, "last_log_term": 4})
    answer = m.sent_of("response_vote")[-1]
    assert answer["dir"] == "d-me"  # the voter says which replica of its node it is


def test_the_voters_are_kept_on_disk_and_never_go_back_to_an_older_version(tmp_path: Path) -> None:
    """A restarted node folds its metadata log again from an old commit point: the voters it
    knew stay in force until the log reaches them again."""
    path = str(tmp_path / "voters.json")
    v = VoterSet("d1", 1, lambda a: 0, path)
    assert v.update({0: "a", 1: "d1"}, 4) and not v.update({0: "a", 1: "d1"}, 4)
    again = VoterSet("d1", 1, lambda a: 0, path)
    assert again.voters == {0: "a", 1: "d1"} and again.version == 4
    assert not again.counts("x", "b") and again.counts("x", "a")
    assert not again.update({0: "old"}, 3) and again.voters == {0: "a", 1: "d1"}
    (tmp_path / "voters.json").write_text("{not json")
    assert VoterSet("d1", 1, lambda a: 0, path).voters == {}  # rebuilt from the metadata log


def test_a_directory_that_never_voted_and_knows_no_voters_votes_only_while_a_cluster_forms() -> None:
    """A wiped disk before its metadata log caught up knows nothing: it must not vote for a
    candidate that knows the cluster formed (which may lack what the old disk acknowledged)."""
    fresh = VoterSet("d-new", 1, lambda a: 0, fresh=True)
    assert fresh.may_vote(asked_by_formed=False) and not fresh.may_vote(asked_by_formed=True)
    assert VoterSet("d-old", 1, lambda a: 0).may_vote(asked_by_formed=True)  # its node's voter before
    fresh.update({0: "a", 1: "d-new"}, 1)  # registered
    assert fresh.may_vote(asked_by_formed=True)


def test_a_fresh_replica_refuses_a_formed_candidates_vote_request(member: Member) -> None:
    m, g = member, member.group
    g.voters.voters, g.voters.fresh = {}, True  # a wiped disk: nothing known yet
    m.receive(m.q, {"type": "request_vote", "term": 5, "last_log_index": 100, "last_log_term": 4, "formed": True})
    assert not m.sent_of("response_vote")
    m.receive(m.q, {"type": "request_vote", "term": 6, "last_log_index": 100, "last_log_term": 4, "formed": False})
    assert m.sent_of("response_vote")  # a cluster forming


def test_a_learners_acknowledgements_count_toward_no_commit(member: Member) -> None:
    """A leader with one voter (p) unreachable and q a learner: an entry q acknowledged is not
    committed; once p acknowledges it, it is."""
    m, g = member, member.group
    _campaign(m, "d-p")
    m.receive(m.p, {"type": "response_vote", "term": g.raftCurrentTerm, "dir": "d-p"})
    assert g._isLeader()
    g.voters.update({0: "d-p", 1: "d-me", 2: "d-q"}, 9)
    d = g.__dict__
    last = d["_SyncObj__raftLog"][-1][1]
    before = d["_SyncObj__raftCommitIndex"]
    m.receive(m.q, {"type": "next_node_idx", "next_node_idx": last + 1, "success": True, "reset": False,
                    "lts": m.now, "dir": "d-q-wiped"})
    g.doTick(0.0)
    assert d["_SyncObj__raftCommitIndex"] == before and m.q in g.learners
    assert d["_SyncObj__raftNextIndex"][m.nodes[m.q]] == last + 1  # its replication goes on
    m.receive(m.p, {"type": "next_node_idx", "next_node_idx": last + 1, "success": True, "reset": False,
                    "lts": m.now, "dir": "d-p"})
    g.doTick(0.0)
    assert d["_SyncObj__raftCommitIndex"] == last


def test_an_answer_of_another_term_does_not_reset_the_votes_counted() -> None:
    from replication.raft.election import ElectionGuard

    guard = ElectionGuard()
    guard._election_init(lambda: 0.0, 1.0, 2.0, VoterSet())
    guard.__dict__["_SyncObj__otherNodes"] = {_Voter("a"), _Voter("b")}
    guard.__dict__["_SyncObj__raftCurrentTerm"] = 5
    assert guard._vote_counts("a", {"term": 5})
    guard._vote_counts("b", {"term": 4})  # a late answer to an older campaign
    assert not guard._vote_counts("a", {"term": 5})


def test_a_learner_declines_a_leadership_transfer(member: Member) -> None:
    """Balancing hands a partition back to its preferred node: not to a learner, which would not
    campaign (and the leader would have given up its lease for the transfer)."""
    m, g = member, member.group
    m.receive(m.p, {"type": "append_entries", "term": 1, "prevLogIdx": 1, "prevLogTerm": 0, "entries": [],
                    "commit_index": 1, "lts": 5.0})
    g.voters.update({0: "d-p", 1: "d-me-before-the-wipe", 2: "d-q"}, 6)
    m.receive(m.p, {"type": "timeout_now", "term": 1, "until": 9.0})
    assert not g.__dict__["_SyncObj__transferInProgress"]
    g.voters.update({0: "d-p", 1: "d-me", 2: "d-q"}, 7)
    m.receive(m.p, {"type": "timeout_now", "term": 1, "until": 9.0})
    assert g.__dict__["_SyncObj__transferInProgress"]
