"""A Raft group's members, changed through its own log one server at a time.

A group's configuration is its voters and its learners (members that receive the log and count
toward nothing: no commit, no vote, no lease), each named by its member address with the address
of its node's hub. A change is a log entry of its own type (pysyncobj's membership type byte,
then msgpack of the whole new configuration: never a pickle). It takes effect on every replica
the moment the entry is in its log, committed or not, and is undone if that entry is truncated
(Ongaro's single-server changes); a replica's configuration is the last one in its log, else its
snapshot's, else the one the group was created with. Entries carry the whole configuration, so a
replica that joins late needs no particular starting point to read them.

A leader accepts a change only (``check_change``) once it has committed an entry of its own term
(the 2015 single-server bug), while no other change is uncommitted, for one server at a time
(add a learner, promote a learner, remove a member), never removing itself (it hands its
leadership over first) nor the last voter; a learner is promoted only once it has acknowledged
everything the leader had committed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack

FORMAT = 1  # of a configuration entry; a later one is refused (``MembersError``), never guessed at

ADD_LEARNER = "add_learner"
PROMOTE = "promote"
REMOVE = "remove"
OPS = (ADD_LEARNER, PROMOTE, REMOVE)


class MembersError(ValueError):
    """Bytes that are not a configuration entry (corrupt or hostile): no change, on every replica."""


class NewerMembersError(MembersError):
    """A configuration of a later format: written by a newer release (the node stops)."""


@dataclass(frozen=True, slots=True)
class Members:
    voters: frozenset[str]
    learners: frozenset[str] = frozenset()
    hubs: dict[str, str] = field(default_factory=dict, hash=False, compare=True)  # member -> its node's hub

    @property
    def all(self) -> frozenset[str]:
        return self.voters | self.learners

    def role(self, addr: str) -> str | None:
        return "voter" if addr in self.voters else "learner" if addr in self.learners else None

    def hub(self, addr: str) -> str:
        return self.hubs.get(addr, addr)

    def as_dict(self) -> dict[str, Any]:
        return {"v": FORMAT, "voters": sorted(self.voters), "learners": sorted(self.learners),
                "hubs": {a: self.hubs[a] for a in sorted(self.hubs) if a in self.all}}

    @staticmethod
    def from_dict(doc: Any) -> Members:
        if not isinstance(doc, dict):
            raise MembersError("a configuration is not a map")
        version = doc.get("v")
        if isinstance(version, int) and version > FORMAT:
            raise NewerMembersError(f"configuration format {version}: written by a newer release")
        if version != FORMAT:
            raise MembersError(f"configuration format {version!r}")
        voters, learners, hubs = doc.get("voters"), doc.get("learners"), doc.get("hubs")
        if not (isinstance(voters, list) and isinstance(learners, list) and isinstance(hubs, dict)
                and all(isinstance(a, str) for a in [*voters, *learners, *hubs, *hubs.values()])):
            raise MembersError("a configuration's fields are not lists and a map of addresses")
        if not voters or set(voters) & set(learners):
            raise MembersError("a configuration needs voters, none of them a learner too")
        return Members(frozenset(voters), frozenset(learners), dict(hubs))


def encode(members: Members) -> bytes:
    """A configuration entry's command, without pysyncobj's type byte."""
    return bytes(msgpack.packb(members.as_dict(), use_bin_type=True))


def decode(data: bytes) -> Members:
    try:
        doc = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise MembersError(f"undecodable configuration: {type(e).__name__}") from None
    return Members.from_dict(doc)


def changed(members: Members, op: str, addr: str, hub: str | None = None) -> Members | str:
    """``members`` after one single-server change, or why it is not one."""
    hubs = dict(members.hubs)
    if op == ADD_LEARNER:
        if addr in members.all:
            return f"{addr} is a member already ({members.role(addr)})"
        if hub is None and any(members.hub(a) != a for a in members.all):
            return f"{addr}: its node's hub address is needed (the members' differ from theirs)"
        taken = next((a for a in sorted(members.all) if members.hub(a) == (hub or addr)), None)
        if taken is not None:
            return f"{addr}: hub {hub or addr} is member {taken}'s already (one member per node)"
        if hub is not None:
            hubs[addr] = hub
        return Members(members.voters, members.learners | {addr}, hubs)
    if op == PROMOTE:
        if addr not in members.learners:
            return f"{addr} is not a learner ({members.role(addr) or 'not a member'})"
        return Members(members.voters | {addr}, members.learners - {addr}, hubs)
    if op == REMOVE:
        if addr not in members.all:
            return f"{addr} is not a member"
        if members.voters == {addr}:
            return f"{addr} is the last voter"
        hubs.pop(addr, None)
        return Members(members.voters - {addr}, members.learners - {addr}, hubs)
    return f"unknown membership change {op!r}"


def check_change(members: Members, op: str, addr: str, hub: str | None = None, *, leader: str,
                 own_term_committed: bool, change_pending: bool, learner_caught_up: bool) -> str | None:
    """Why the leader ``leader`` may not make this change now (None: it may)."""
    if not own_term_committed:
        return "the leader has not committed an entry of its own term yet"
    if change_pending:
        return "another membership change is not committed yet"
    if op == REMOVE and addr == leader:
        return "the leader cannot remove itself: hand its leadership over first"
    if op == PROMOTE and addr in members.learners and not learner_caught_up:
        return f"learner {addr} has not caught up with the leader's commit index"
    outcome = changed(members, op, addr, hub)
    return outcome if isinstance(outcome, str) else None


class History:
    """A replica's configurations by log index: the base (its snapshot's, or the group's initial
    one) and every configuration entry in its log after it, so that truncating the log falls back
    to the configuration before the entries cut."""

    def __init__(self, initial: Members) -> None:
        self.base_index = 0
        self.base = initial
        self.entries: list[tuple[int, Members]] = []

    @property
    def current(self) -> Members:
        return self.entries[-1][1] if self.entries else self.base

    @property
    def last_index(self) -> int:
        """The index of the newest configuration entry (the base's index if none)."""
        return self.entries[-1][0] if self.entries else self.base_index

    def at(self, index: int) -> Members:
        """The configuration in force at log index ``index``."""
        found = self.base
        for idx, members in self.entries:
            if idx > index:
                break
            found = members
        return found

    def added(self, index: int, members: Members) -> bool:
        """An entry at ``index`` joined the log; False if the base already covers it (a
        snapshot's own last entries, added again with it)."""
        if index <= self.base_index:
            return False
        self.truncated(index)  # an entry replacing another at the same index
        self.entries.append((index, members))
        return True

    def truncated(self, from_index: int) -> bool:
        """Entries from ``from_index`` on left the log. True if a configuration went with them."""
        keep = [e for e in self.entries if e[0] < from_index]
        if len(keep) == len(self.entries):
            return False
        self.entries = keep
        return True

    def install(self, index: int, members: Members) -> None:
        """A snapshot up to ``index`` with its configuration: the base from now on."""
        self.base_index, self.base = index, members
        self.entries = [e for e in self.entries if e[0] > index]

    def cleared(self) -> None:
        """The whole log was replaced (a snapshot installed over a log that cannot continue it)."""
        self.entries = []
