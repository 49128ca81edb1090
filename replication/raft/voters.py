"""Which replica of each node may vote: a node id names a machine, a directory id its disk.

A node whose disk was replaced or wiped comes back under its old node id with no term, no vote
and no log. Counted as a voter it may vote twice in one term, and it will vote for a candidate
that lacks entries it had itself acknowledged: one wiped disk and one crash then lose a committed
entry (Kafka's KAFKA-14077). So every data directory has a random directory id, the cluster
records each node's voting replica as (node id, directory id) in its metadata log, and:

- a candidate counts a (pre-)vote only from a replica that is its node's recorded voter (or
  from a node that has none recorded yet: a cluster forming);
- a replica that knows it is not its node's voter (a learner) grants no vote and does not
  campaign, until the cluster records it as the voter: it asks for that itself once it has
  caught up with every group's leader (``cluster.raft_cluster``).

The set is kept on disk beside the logs (``voters.json``), so a node that restarts filters
votes at once, before its metadata log is applied again. One ``VoterSet`` serves every Raft
group of a node: a replacement is of a node's whole disk.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from replication.durable import replace_durably, sync

log = logging.getLogger("kcoord.raft")

FILE_NAME = "voters.json"


class VoterSet:
    def __init__(self, directory: str = "", me: int | None = None,
                 node_of: Callable[[str], int | None] = lambda _addr: None, path: str | None = None) -> None:
        self.directory = directory  # this replica's directory id ("" outside a cluster: no checks)
        self.me = me  # this node's id
        self.node_of = node_of  # a group member's address -> its node id
        self.path = path
        self.voters: dict[int, str] = self._load() if path is not None else {}
        self.refused = 0  # votes not counted, for tests and logs
        self._told: set[tuple[int | None, str]] = set()  # (node, directory) pairs already logged

    def _load(self) -> dict[int, str]:
        assert self.path is not None
        try:
            with open(self.path, encoding="utf-8") as fh:
                doc = json.load(fh)
            return {int(k): str(v) for k, v in doc["voters"].items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            # Kept only to filter votes before the metadata log is applied: rebuilt from it.
            log.warning("event=voters_file_unreadable path=%s error=%r action=rebuilt_from_metadata", self.path, str(e))
            return {}

    def update(self, voters: dict[int, str]) -> bool:
        """The voters as the metadata log now says; kept on disk before taking effect. True if changed."""
        if voters == self.voters:
            return False
        if self.path is not None:
            tmp = self.path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump({"voters": {str(k): v for k, v in sorted(voters.items())}}, fh)
                fh.flush()
                sync(fh.fileno())
            replace_durably(tmp, self.path)
        self.voters = dict(voters)
        return True

    def counts(self, addr: str, directory: Any) -> bool:
        """Whether a (pre-)vote from the member at ``addr``, sent from replica ``directory``, counts."""
        node = self.node_of(addr)
        want = None if node is None else self.voters.get(node)
        if want is None or want == directory:
            return True
        self.refused += 1
        if (node, str(directory)) in self._told:
            return False
        self._told.add((node, str(directory)))
        log.warning("event=vote_not_counted from_node=%s directory=%s voter_directory=%s reason=not_the_voter",
                    node, directory, want)
        return False

    def may_vote(self) -> bool:
        """False while this replica is not its node's recorded voter (a learner)."""
        want = None if self.me is None else self.voters.get(self.me)
        return want is None or want == self.directory
