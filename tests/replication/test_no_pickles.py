"""No pickle that reaches a Raft log is ever loaded: a forwarded command, an entry in a journal.

pysyncobj unpickles every entry it applies, and a follower's forwarded command goes into the
leader's log as the follower sent it: one peer that knows the cluster secret (or one leaked
secret) could run code on every node. Commands are msgpack now; the pickles earlier versions
wrote are still applied, by an unpickler that resolves no class or function.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import pickle
from pathlib import Path

import pytest

from replication.journal import SafeJournal
from replication.raft import commands
from tests.replication.test_raft import Cluster, append_retrying, payloads, wait_for

REGULAR, NO_OP, MEMBERSHIP, VERSION = b"\x00", b"\x01", b"\x02", b"\x03"  # pysyncobj's command types
RAN: list[str] = []


def _ran(what: str) -> None:
    RAN.append(what)


class _Evil:
    """Unpickled, it runs a shell command (the marker file) or a function of this module."""

    def __init__(self, marker: str = "") -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        if self.marker:
            return (os.system, (f"touch {self.marker}",))
        return (_ran, ("unpickled",))


def _old(call: object) -> bytes:
    """A command as pysyncobj 0.3.17's ``@replicated`` encoded it (``pysyncobj.pickle.dumps``)."""
    return REGULAR + pickle.dumps(call, 2)


def _refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "event=raft_command_refused" in r.getMessage()]


def test_commands_of_both_encodings_decode_and_a_pickle_of_anything_else_runs_nothing() -> None:
    RAN.clear()
    assert commands.decode(pickle.dumps((1, (7, b"a\x80\xff")), 2)) == (commands.APPEND, (7, b"a\x80\xff"))
    assert commands.decode(pickle.dumps((2, (b"",)), 2)) == (commands.SUBMIT, (b"",))
    assert commands.decode(pickle.dumps((0, (2**45,)), 2)) == (commands.ANNOUNCE, (2**45,))
    assert commands.decode(commands.encode(commands.APPEND, 7, b"x")) == (commands.APPEND, (7, b"x"))
    hostile = [pickle.dumps(_Evil(), proto) for proto in range(pickle.HIGHEST_PROTOCOL + 1)]
    hostile += [pickle.dumps((1, (7, _Evil())), 2), pickle.dumps((2, (b"x",), {"k": 1}), 2),
                pickle.dumps((1, (True, b"x")), 2), pickle.dumps((9, (b"x",)), 2),
                commands.encode(commands.APPEND, "text", b"x"), commands.encode(7, b"x"), commands.MARK + b"\xde", b""]
    for data in hostile:
        with pytest.raises(commands.CommandError):
            commands.decode(data)
    assert RAN == [], "a pickle's callable ran"


def test_a_forwarded_command_that_is_a_pickle_is_refused_and_runs_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A peer (it knows the secret) forwards a pickle to the leader as a follower's command:
    the leader refuses it, with one line, and the group goes on."""
    caplog.set_level(logging.WARNING, logger="kcoord.raft")
    marker = tmp_path / "pwned"

    async def main() -> None:
        c = Cluster(tmp_path)
        c.start(asyncio.get_running_loop())
        try:
            leader = await c.leader()
            i = c.logs.index(leader)
            peer = c.hosts[(i + 1) % 3].hub
            assert await asyncio.wait_for(_connected(peer, c.addrs[i]), 5)
            peer.send(c.addrs[i], "p0", {"type": "apply_command", "command": REGULAR + pickle.dumps(
                _Evil(str(marker)), 2), "request_id": 1})
            peer.flush()
            # the leader handled it: refused it (a line), or had it applied (the marker)
            await wait_for(lambda: marker.exists() or bool(_refusals(caplog)), 5)
            assert not marker.exists(), "a forwarded pickle ran on a node"
            await asyncio.wait_for(append_retrying(c, b"after"), 8)  # and the group goes on
            await wait_for(lambda: all(payloads(lg) == [b"after"] for lg in c.logs), 5)
        finally:
            c.stop()

    asyncio.run(main())
    assert not marker.exists(), "a forwarded pickle ran on a node"  # nor later
    lines = _refusals(caplog)
    assert len(lines) == 1 and "source=forwarded" in lines[0], lines


async def _connected(hub, addr: str) -> bool:  # type: ignore[no-untyped-def]
    while addr not in hub.connected():
        await asyncio.sleep(0.01)
    return True


def test_old_journal_entries_still_apply_and_a_pickle_in_a_journal_runs_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Journals written by the previous version (commands pickled by pysyncobj) with hostile
    entries among them, of each command type pysyncobj would unpickle: the good entries apply in
    order on every node, each hostile one is skipped with one line per node, nothing runs."""
    caplog.set_level(logging.WARNING, logger="kcoord.raft")
    marker = tmp_path / "pwned"
    evil = pickle.dumps(_Evil(str(marker)), 2)
    entries = [NO_OP, _old((2, (b"old-submit",))), REGULAR + evil, _old((0, (5,))), MEMBERSHIP + evil,
               _old((1, (5, b"old-append"))), _old((1, (4, b"fenced"))), VERSION + evil,
               REGULAR + commands.encode(commands.SUBMIT, b"new-submit")]
    c = Cluster(tmp_path)
    for n in range(3):
        os.makedirs(tmp_path / f"n{n}")
        j = SafeJournal(str(tmp_path / f"n{n}" / "raft.kcj"))
        for idx, command in enumerate(entries, start=1):
            j.add(command, idx, 1)
        j.setCurrentTerm(1, None)
        j.setRaftCommitIndex(len(entries))
        j.sync()
        j._destroy()

    async def main() -> None:
        c.start(asyncio.get_running_loop())
        try:
            want = [b"old-submit", b"old-append", b"new-submit"]
            await wait_for(lambda: marker.exists() or all(payloads(lg) == want for lg in c.logs), 8,
                           lambda: str([payloads(lg) for lg in c.logs]))
            assert not marker.exists(), "a pickle in a journal ran on a node"
            await asyncio.wait_for(append_retrying(c, b"after"), 8)  # and the group goes on
        finally:
            c.stop()

    asyncio.run(main())
    assert not marker.exists(), "a pickle in a journal ran on a node"  # nor later
    lines = _refusals(caplog)
    assert len(lines) == 9 and all("source=log" in line for line in lines), lines  # 3 entries x 3 nodes


def test_pysyncobj_itself_can_unpickle_nothing() -> None:
    """Any path to pysyncobj's unpickling that the adapter does not override fails instead."""
    import pysyncobj.journal
    import pysyncobj.pickle
    import pysyncobj.serializer
    import pysyncobj.syncobj

    import replication.raft.pysyncobj_adapter  # noqa: F401 - what it does on import is the test

    RAN.clear()
    for loads in (pysyncobj.pickle.loads, pysyncobj.syncobj.pickle.loads, pysyncobj.serializer.pickle.loads,
                  pysyncobj.journal.loads):
        with pytest.raises(ValueError, match="unpickles nothing"):
            loads(pickle.dumps(_Evil(), 2))
    with pytest.raises(ValueError, match="unpickles nothing"):
        pysyncobj.pickle.load(io.BytesIO(pickle.dumps(_Evil(), 2)))
    assert RAN == []
