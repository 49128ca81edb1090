"""Which replica of each node may vote: a node id names a machine, a directory id its disk.

A node whose disk was replaced or wiped comes back under its old node id with no term, no vote
and no log. Counted as a voter it may vote twice in one term, and it will vote for a candidate
that lacks entries it had itself acknowledged: one wiped disk and one crash then lose a committed
entry (Kafka's KAFKA-14077). So every data directory has a random directory id, the cluster
records each node's voting replica as (node id, directory id) in its metadata log, and:

- a candidate counts a (pre-)vote only from a replica that is its node's recorded voter (or
  from a node that has none recorded yet: a cluster forming), and a leader counts a learner's
  acknowledgements toward no commit, no check-quorum and no lease;
- a replica that knows it is not its node's voter (a learner) grants no vote and does not
  campaign, until the cluster records it as the voter: it asks for that itself once it has
  caught up with every group's leader (``cluster.raft_cluster``);
- a directory that was never its node's voter and knows no voters yet (a new disk, before its
  metadata log caught up) grants no vote to a candidate that knows the cluster has voters
  (``formed`` in the request): only a cluster that is forming needs its votes.

The set is kept on disk beside the logs (``voters.json``), so a node that restarts filters
votes at once, before its metadata log is applied again. One ``VoterSet`` serves every Raft
group of a node: a replacement is of a node's whole disk.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from replication.durable import write_durably

log = logging.getLogger("kcoord.raft")

FILE_NAME = "voters.json"


class VoterSet:
    def __init__(self, directory: str = "", me: int | None = None,
                 node_of: Callable[[str], int | None] = lambda _addr: None, path: str | None = None,
                 fresh: bool = False) -> None:
        self.directory = directory  # this replica's directory id ("" outside a cluster: no checks)
        self.me = me  # this node's id
        self.node_of = node_of  # a group member's address -> its node id
        self.path = path
        self.fresh = fresh  # this directory was never its node's voter
        # This node was removed from the cluster: it campaigns no more in any group (it still
        # answers, and grants votes, while a group keeps it as a voter until its leader takes it out).
        self.retiring = False
        self.version = 0  # of the voters (each change through the metadata log raises it)
        self.voters: dict[int, str] = self._load() if path is not None else {}
        self.refused = 0  # votes not counted, for tests and logs
        self._told: set[tuple[int | None, str]] = set()  # (node, directory) pairs already logged
        self._refusal_logged = float("-inf")

    def _load(self) -> dict[int, str]:
        assert self.path is not None
        try:
            with open(self.path, encoding="utf-8") as fh:
                doc = json.load(fh)
            voters = {int(k): str(v) for k, v in doc["voters"].items()}
            self.version = int(doc.get("version", 0))
            return voters
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            # Kept only to filter votes before the metadata log is applied: rebuilt from it.
            log.warning("event=voters_file_unreadable path=%s error=%r action=rebuilt_from_metadata", self.path, str(e))
            return {}

    def update(self, voters: dict[int, str], version: int) -> bool:
        """The voters as the metadata log says at ``version``; kept on disk before taking effect.
        An older version is ignored (a restarted node folds its log again from an old commit
        point). True if changed."""
        if version < self.version or (version == self.version and voters == self.voters):
            return False
        if self.path is not None:
            write_durably(self.path, json.dumps(
                {"version": version, "voters": {str(k): v for k, v in sorted(voters.items())}}).encode())
        self.voters, self.version = dict(voters), version
        return True

    def is_voter(self, addr: str, directory: Any) -> bool:
        """Whether replica ``directory`` of the member at ``addr`` is its node's voter (or the node has none yet)."""
        node = self.node_of(addr)
        want = None if node is None else self.voters.get(node)
        return want is None or want == directory

    def counts(self, addr: str, directory: Any) -> bool:
        """Whether a (pre-)vote from the member at ``addr``, sent from replica ``directory``, counts."""
        if self.is_voter(addr, directory):
            return True
        node = self.node_of(addr)
        want = None if node is None else self.voters.get(node)
        self.refused += 1
        if (node, str(directory)) in self._told:
            return False
        self._told.add((node, str(directory)))
        log.warning("event=vote_not_counted from_node=%s directory=%s voter_directory=%s reason=not_the_voter",
                    node, directory, want)
        return False

    def refuse(self, candidate: str, asked_by_formed: bool) -> None:
        """Log a vote this replica does not grant (at most every 10 s)."""
        now = time.monotonic()
        if now - self._refusal_logged < 10.0:
            return
        self._refusal_logged = now
        known = self.me is not None and self.me in self.voters
        log.warning("event=vote_refused candidate=%s directory=%s reason=%s", self.node_of(candidate), self.directory,
                    "learner" if known else "new_directory_knows_no_voters" if asked_by_formed else "learner")

    def may_vote(self, asked_by_formed: bool = False) -> bool:
        """False while this replica is not its node's recorded voter (a learner), or (a request
        from a candidate that knows voters: ``asked_by_formed``) while a directory that never
        voted knows none."""
        want = None if self.me is None else self.voters.get(self.me)
        if want is not None:
            return want == self.directory
        return not (self.fresh and asked_by_formed)
