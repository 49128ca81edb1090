"""Elections that leave a healthy leader alone: pre-vote, sticky voters and term notices.

pysyncobj 0.3.17 campaigns whenever a node's election timer runs out and it is connected to
anyone, and any higher-term RequestVote makes every node (the leader included) adopt the term
and drop its leader. So a follower cut off for a while, or on a flapping link, comes back with
an inflated term and deposes a healthy leader, and every deposition fails in-flight commands
and moves shards. This mixin (ahead of ``SyncObj`` in ``replication.raft.pysyncobj_adapter.RaftGroup``) adds:

- **Pre-vote**: a node whose timer ran out first asks the others whether they would vote for it
  at ``term + 1``, without changing any term. It campaigns only when a majority says yes.
- **Sticky voters**: a node that heard from its leader within the minimum election timeout
  refuses pre-votes and ignores higher-term RequestVotes (without adopting the term), and does
  not campaign itself; a leader does both too (check-quorum makes it step down when it lost its
  majority). A dropped link does not end it early: the drop may be on this side only, and the
  leader may still count this node's last acknowledgements in its lease. A leadership
  transfer's election is marked and passes, unless the voter has heard a message the leader
  sent after it gave that transfer up.
- **Term notices**: a node answers an AppendEntries of an older term with its own term, so a
  leader that fell behind (say, cut off while the rest elected someone) steps down at once.
- **Voters by replica** (``replication.raft.voters``): (pre-)vote answers carry the voter's
  directory id, and a candidate counts one only from its node's recorded voting replica, once
  per term (pysyncobj counts every answer, duplicates too). A replica that is not its node's
  voter (a learner: a replaced or wiped disk) grants no vote and does not campaign, and its
  leader counts its acknowledgements toward no commit, check-quorum or lease.
- **A leader lease**: every AppendEntries carries its send time (``lts``, stamped by the
  transport) and a follower's answer echoes the last one it got. While a majority (the leader
  counted at "now") has echoed a send time newer than ``lease`` ago, and those followers are
  still connected, no other leader can have been elected: the voters are sticky for the
  minimum election timeout after hearing the leader, and ``lease`` is shorter than that
  (``settings.lease_for``). Reads are answered only under it (``lease_valid``). A leader that
  sent TimeoutNow has no lease: its followers may elect the target at once. Only when the
  transfer has failed (it still leads the longest election timeout later) do echoes count
  again, and only of messages sent after that.

Only pysyncobj's state is used, through the instance ``__dict__`` and its private methods
(``_SyncObj__…``); this module does not import pysyncobj (only ``pysyncobj_adapter`` does).
"""

from __future__ import annotations

from collections.abc import Callable
from time import monotonic
from typing import Any

from replication.raft.settings import lease_for
from replication.raft.voters import VoterSet

FOLLOWER, CANDIDATE, LEADER = 0, 1, 2  # pysyncobj's _RAFT_STATE


class ElectionGuard:
    """Mix in before ``SyncObj``; call ``_election_init(clock, min_timeout, max_timeout)`` before
    its init (``clock`` is pysyncobj's: election deadlines are compared with it)."""

    def _election_init(self, clock: Callable[[], float], min_timeout: float, max_timeout: float,
                       voters: VoterSet) -> None:
        self._clock = clock
        self.voters = voters
        self.member_voter: bool = getattr(self, "member_voter", True)  # a voter of the group's configuration
        self._votes_term = -1  # the term whose vote answers _votes_from holds
        self._votes_from: set[str] = set()
        self.learners: set[str] = set()  # leader: members whose acknowledgements came from a learner
        self.learner_dirs: dict[str, str] = {}  # ... the directory each said it is
        self.learner_match: dict[str, int] = {}  # ... the last index each acknowledged
        self.learner_heard: dict[str, float] = {}  # ... and when (pysyncobj's clock)
        self.sticky = min_timeout  # and the lease, below, derives from it (settings.lease_for)
        self.lease = lease_for(min_timeout)
        self._transfer_timeout = max_timeout  # a transfer not done by then has failed
        self._pv_term = -1  # the term this node is pre-voting for
        self._pv_votes: set[str] = set()
        self._pv_won = False  # a majority said yes: campaign on the next tick
        self._leader_heard = -1.0  # when an AppendEntries of the current leader last arrived
        self.campaign_is_transfer = False  # read by the transport while this node campaigns
        self._transfer_from: str | None = None  # the leader whose TimeoutNow this node follows...
        self._transfer_until: float | None = None  # ...and when it gives the transfer up (its clock)
        self.lts_from: dict[str, float] = {}  # follower: the last send time each leader stamped
        self._acked_lts: dict[str, float] = {}  # leader: the newest echoed send time per follower
        self._lease_floor = float("inf")  # leader: only echoes of messages sent at or after this count
        self.prevotes_started = 0  # counters for tests and logs
        self.votes_ignored = 0

    # ---------------------------------------------------------------- ticking

    def _onTick(self, timeToWait: float = 0.0) -> None:  # noqa: N802,N803 - pysyncobj's name
        d = self.__dict__
        now = self._clock()
        due = (d["_SyncObj__raftState"] != LEADER and d["_SyncObj__selfNode"] is not None
               and d["_SyncObj__raftElectionDeadline"] < now and self._SyncObj__connectedToAnyone())  # type: ignore[attr-defined]
        if due and not (self.voters.may_vote() and self.member_voter and not self.voters.retiring):
            # A learner: its log may lack what it once acknowledged; it catches up, it does not lead.
            # Nor does a member that its group's configuration does not name as a voter, nor a
            # node removed from the cluster (it hands its groups over and stops).
            d["_SyncObj__raftElectionDeadline"] = now + self._SyncObj__generateRaftTimeout()  # type: ignore[attr-defined]
            due = False
        if due and d["_SyncObj__transferInProgress"]:
            self.campaign_is_transfer = True  # TimeoutNow from the leader: campaign at once
        elif due and self._sticky():
            # Whoever moved the deadline (the quick election when the leader's link drops), this
            # node does not campaign while its own acknowledgements may hold up a lease.
            self._pv_won = False
            d["_SyncObj__raftElectionDeadline"] = now + self.sticky_left()
        elif due and self._pv_won:
            self._pv_won = False  # the base campaigns on this tick
        elif due:
            self._start_prevote(now)  # pushes the deadline back: the base does not campaign now
        try:
            super()._onTick(timeToWait)  # type: ignore[misc]
        finally:
            self.campaign_is_transfer = False

    def _start_prevote(self, now: float) -> None:
        d = self.__dict__
        self.prevotes_started += 1
        self._pv_term = d["_SyncObj__raftCurrentTerm"] + 1
        self._pv_votes = {d["_SyncObj__selfNode"].id}
        d["_SyncObj__raftElectionDeadline"] = now + self._SyncObj__generateRaftTimeout()  # type: ignore[attr-defined]
        message = {"type": "pre_vote", "term": self._pv_term, "formed": bool(self.voters.voters), "from": d["_SyncObj__selfNode"].id,
                   "last_log_index": self._SyncObj__getCurrentLogIndex(),  # type: ignore[attr-defined]
                   "last_log_term": self._SyncObj__getCurrentLogTerm()}  # type: ignore[attr-defined]
        for node in d["_SyncObj__otherNodes"]:
            d["_SyncObj__transport"].send(node, message)
        self._maybe_won()

    def _maybe_won(self) -> None:
        d = self.__dict__
        if len(self._pv_votes) > (len(d["_SyncObj__otherNodes"]) + 1) / 2:
            self._pv_won = True
            self._pv_term = -1
            d["_SyncObj__raftElectionDeadline"] = 0.0

    def _SyncObj__onBecomeLeader(self) -> None:  # noqa: N802
        self._lease_floor = self._clock()
        self._acked_lts = {}
        super()._SyncObj__onBecomeLeader()  # type: ignore[misc]

    def lease_valid(self) -> bool:
        """Leader only: no other node can lead now (see the module's lease rule). Any thread."""
        d = self.__dict__
        if d["_SyncObj__raftState"] != LEADER:
            return False
        now = self._clock()
        if now < self._lease_floor:
            return False  # a leadership transfer in flight
        counted = {n.id for n in d["_SyncObj__connectedNodes"]} & {n.id for n in d["_SyncObj__otherNodes"]}
        acked = sorted((t for peer, t in list(self._acked_lts.items()) if peer in counted), reverse=True)
        need = (len(d["_SyncObj__otherNodes"]) + 1) // 2  # followers needed besides this node
        if need == 0:
            return True
        return len(acked) >= need and acked[need - 1] + self.lease > now

    def leader_heard_within(self, seconds: float) -> bool:
        return self._clock() - self._leader_heard < seconds

    def sticky_left(self) -> float:
        """How long this node stays sticky to the leader it last heard (0: not any more)."""
        return max(0.0, self._leader_heard + self.sticky - self._clock())

    def outgoing(self, node_id: str, message: dict[str, Any]) -> dict[str, Any]:
        """The transport's hook: ``message`` to ``node_id`` as the lease and transfers need it."""
        kind = message.get("type")
        if kind == "append_entries":  # the lease's anchor; the sender, for a replica that does not know it yet
            return dict(message, lts=self._clock(), **{"from": self.__dict__["_SyncObj__selfNode"].id})
        if kind == "next_node_idx":  # echo the leader's last send time; say which replica acknowledges
            return dict(message, lts=self.lts_from.get(node_id), dir=self.voters.directory)
        if kind == "request_vote":
            message = dict(message, formed=bool(self.voters.voters),  # see VoterSet.may_vote
                           **{"from": self.__dict__["_SyncObj__selfNode"].id})
            if self.campaign_is_transfer:
                message.update(transfer=True, transfer_from=self._transfer_from, transfer_until=self._transfer_until)
            return message
        if kind == "timeout_now":
            return dict(message, until=self._hand_over())
        if kind == "response_vote":
            return dict(message, dir=self.voters.directory)  # which replica of its node voted
        return message

    def _hand_over(self) -> float:
        """Sending TimeoutNow: the followers may elect the target at once, so no lease until the
        transfer has failed (still leading ``_transfer_timeout`` from now) and a majority echoed
        messages sent after that. Echoes of earlier ones, before or during the transfer, say
        nothing of whether the target won meanwhile. Returns when the transfer is given up."""
        self._lease_floor = self._clock() + self._transfer_timeout
        self._acked_lts = {}
        return self._lease_floor

    # ---------------------------------------------------------------- messages

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:  # noqa: N802
        kind = message.get("type") if isinstance(message, dict) else None
        d = self.__dict__
        term = d["_SyncObj__raftCurrentTerm"]
        if kind == "pre_vote":
            self._answer_prevote(node, message)
            return
        if kind == "pre_vote_response":
            if message.get("granted") and message.get("term") == self._pv_term and d["_SyncObj__raftState"] != LEADER \
                    and node in d["_SyncObj__otherNodes"] and self.voters.counts(node.id, message.get("dir")):
                self._pv_votes.add(node.id)
                self._maybe_won()
            return
        if kind == "term_notice":
            if message.get("term", 0) > term:
                self._SyncObj__setCurrentTerm(message["term"], None)  # type: ignore[attr-defined]
                self._SyncObj__setState(FOLLOWER)  # type: ignore[attr-defined]
                d["_SyncObj__raftLeader"] = None
            return
        if kind == "timeout_now" and not (self.voters.may_vote() and self.member_voter and not self.voters.retiring):
            return  # a learner does not campaign: a transfer to it would only cost its leader the lease
        if kind == "timeout_now":
            super()._SyncObj__onMessageReceived(node, message)  # type: ignore[misc]
            if d["_SyncObj__transferInProgress"]:
                self._transfer_from, self._transfer_until = node.id, message.get("until")
            return
        if kind == "request_vote" and message.get("term", 0) > term and self._sticky() \
                and not self._transfer_passes(message):
            self.votes_ignored += 1
            return  # a healthy leader exists: neither adopt the term nor vote
        if kind == "request_vote" and not self.voters.may_vote(bool(message.get("formed"))):
            self.votes_ignored += 1
            self.voters.refuse(node.id, bool(message.get("formed")))
            return  # a learner: it may have forgotten a vote or an entry it acknowledged
        if kind == "response_vote" and not self._vote_counts(node.id, message):
            return
        if kind == "append_entries":
            if message.get("term", 0) < term:
                d["_SyncObj__transport"].send(node, {"type": "term_notice", "term": term})
            else:
                self._leader_heard = self._clock()
                if "lts" in message:
                    self.lts_from[node.id] = message["lts"]
        elif kind == "next_node_idx" and d["_SyncObj__raftState"] == LEADER:
            if not self.voters.is_voter(node.id, message.get("dir")):
                self._learner_ack(node, message)
                return
            self.learners.discard(node.id)
            echoed = message.get("lts")
            if echoed is not None and echoed >= self._lease_floor and echoed > self._acked_lts.get(node.id, 0.0):
                self._acked_lts[node.id] = echoed
        super()._SyncObj__onMessageReceived(node, message)  # type: ignore[misc]

    def _answer_prevote(self, node: Any, message: dict[str, Any]) -> None:
        d = self.__dict__
        mine = (self._SyncObj__getCurrentLogTerm(), self._SyncObj__getCurrentLogIndex())  # type: ignore[attr-defined]
        may_vote = self.voters.may_vote(bool(message.get("formed")))
        if not may_vote:
            self.voters.refuse(node.id, bool(message.get("formed")))
        granted = (message.get("term", 0) > d["_SyncObj__raftCurrentTerm"]
                   and (message.get("last_log_term", -1), message.get("last_log_index", -1)) >= mine
                   and not self._sticky() and may_vote)
        d["_SyncObj__transport"].send(node, {"type": "pre_vote_response", "term": message.get("term"),
                                             "granted": granted, "dir": self.voters.directory})

    def _learner_ack(self, node: Any, message: dict[str, Any]) -> None:
        """A learner's acknowledgement moves its replication on, and counts toward no commit,
        no check-quorum and no lease: it has forgotten what it acknowledged before its disk was
        lost, and the term it was at (it would take a deposed leader's entries)."""
        d = self.__dict__
        self.learners.add(node.id)
        if isinstance(message.get("dir"), str):
            self.learner_dirs[node.id] = message["dir"]
        self.learner_heard[node.id] = monotonic()
        if message.get("success") and isinstance(message.get("next_node_idx"), int):
            self.learner_match[node.id] = int(message["next_node_idx"]) - 1
        match, heard = d["_SyncObj__raftMatchIndex"], d["_SyncObj__lastResponseTime"]
        kept = (match.get(node), heard.get(node))
        super()._SyncObj__onMessageReceived(node, message)  # type: ignore[misc]
        match[node] = 0 if kept[0] is None else kept[0]
        if kept[1] is None:
            heard.pop(node, None)
        else:
            heard[node] = kept[1]

    def _vote_counts(self, sender: str, message: dict[str, Any]) -> bool:
        """A vote of this term from a voting replica, counted once per sender."""
        term = self.__dict__["_SyncObj__raftCurrentTerm"]
        if message.get("term") != term:
            return True  # another term's answer: pysyncobj ignores it
        if term != self._votes_term:
            self._votes_term, self._votes_from = term, set()
        if sender in self._votes_from or not self.voters.counts(sender, message.get("dir")) \
                or sender not in {n.id for n in self.__dict__["_SyncObj__otherNodes"]}:
            return False  # twice, from a replica that is not its node's voter, or from no voter of ours
        self._votes_from.add(sender)
        return True

    def _sticky(self) -> bool:
        """This node has a leader it trusts: itself, or one heard from within ``sticky``, still
        connected or not (see the module's sticky voters)."""
        d = self.__dict__
        if d["_SyncObj__raftState"] == LEADER:
            return True  # check-quorum steps it down when its majority is gone
        return d["_SyncObj__raftLeader"] is not None and self.sticky_left() > 0.0

    def _transfer_passes(self, message: dict[str, Any]) -> bool:
        """A transfer's RequestVote passes a sticky voter while the leader that asked for it may
        still wait for its outcome: the voter has heard nothing that leader sent after giving the
        transfer up (the leader counts echoes of exactly those messages toward its new lease)."""
        leader = self.__dict__["_SyncObj__raftLeader"]
        until = message.get("transfer_until")
        if not message.get("transfer") or leader is None or leader.id != message.get("transfer_from") \
                or not isinstance(until, (int, float)):
            return False
        return self.lts_from.get(leader.id, float("-inf")) < until
