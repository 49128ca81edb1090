"""``EntryStore(background=True)``: the compaction of a large partition runs beside the Raft pass.

Compacting a million offsets in the pass stopped a node's event loop for seconds (its peers closed
their links to it and its leaders stepped down, ``kcoord bench load``). Here the compaction
function waits on a gate, so the test sees what the store answers while it runs.
"""

from __future__ import annotations

import threading
import time

from replication.raft import EntryStore
from tests.unit.test_replicated_logs import _latest_per_key


def _state(store: EntryStore) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for e in store.entries(0):
        k, v = e.payload.split(b"=")
        out[k] = v
    return out


class _Gated:
    def __init__(self) -> None:
        self.gate = threading.Event()
        self.started = threading.Event()
        self.calls = 0

    def __call__(self, payloads: list[bytes]) -> list[bytes]:
        self.calls += 1
        self.started.set()
        assert self.gate.wait(10)
        return _latest_per_key(payloads)


def _wait(cond, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def test_apply_does_not_wait_for_the_compaction_and_its_result_keeps_the_meaning() -> None:
    compact = _Gated()
    store = EntryStore(compact=compact, compact_every=4, background=True)
    for i in range(4):
        store.apply(1, b"k%d=a" % (i % 2))  # the 4th starts a compaction, which waits on the gate
    assert compact.started.wait(5)
    for i in range(3):
        assert store.apply(1, b"k%d=b" % i) == 4 + i  # answered while the compaction runs
    assert compact.calls == 1  # one at a time
    before = _state(store)
    assert [e.offset for e in store.entries(0)] == list(range(7))
    snapshot = store.snapshot()  # a snapshot does not compact (nor wait for the compaction)
    assert compact.calls == 1
    compact.gate.set()
    _wait(lambda: store.base)
    assert store.base == [b"k0=a", b"k1=a"]  # the four entries folded, latest per key
    assert [(e.offset, e.payload) for e in store.entries(0)] == [
        (-1, b"k0=a"), (-1, b"k1=a"), (4, b"k0=b"), (5, b"k1=b"), (6, b"k2=b")]
    assert _state(store) == before == {b"k0": b"b", b"k1": b"b", b"k2": b"b"}
    assert store.entries_since(2) is None and [e.offset for e in (store.entries_since(5) or ([], 0))[0]] == [5, 6]
    other = EntryStore()
    other.restore(snapshot)
    assert _state(other) == before and other.next_offset == 7


def test_a_snapshot_installed_during_a_compaction_wins_over_its_result() -> None:
    compact = _Gated()
    store = EntryStore(compact=compact, compact_every=2, background=True)
    store.apply(1, b"x=1")
    store.apply(1, b"x=2")
    assert compact.started.wait(5)
    leader = EntryStore()
    for p in (b"y=1", b"y=2", b"z=1"):
        leader.apply(1, p)
    store.restore(leader.snapshot())  # a follower far behind gets the leader's snapshot
    compact.gate.set()
    _wait(lambda: not store._compacting)
    assert _state(store) == {b"y": b"2", b"z": b"1"} and store.next_offset == 3


def test_without_background_the_compaction_happens_in_apply() -> None:
    calls: list[int] = []

    def compact(payloads: list[bytes]) -> list[bytes]:
        calls.append(len(payloads))
        return _latest_per_key(payloads)

    store = EntryStore(compact=compact, compact_every=3)
    for p in (b"a=1", b"a=2", b"b=1"):
        store.apply(1, p)
    assert calls == [3] and store.base == [b"a=2", b"b=1"] and store.tail == []


def test_a_large_base_is_compacted_again_only_once_the_tail_is_half_its_size() -> None:
    """Each compaction reads the whole base: with a fixed trigger alone, filling a partition with a
    million offsets compacted it every 20,000 entries, quadratic in its size."""
    calls: list[int] = []

    def compact(payloads: list[bytes]) -> list[bytes]:
        calls.append(len(payloads))
        return payloads  # every key distinct: nothing to drop

    def entry(i: int) -> bytes:
        return b"k%03d=%s" % (i, b"x" * 94)  # 100 bytes

    leader = EntryStore()
    for i in range(10):
        leader.apply(1, entry(i))
    store = EntryStore(compact=compact, compact_every=2)
    store.restore(leader.snapshot())  # a base of 1,000 bytes
    for i in range(10, 14):
        store.apply(1, entry(i))
    assert calls == []  # 2 entries and more, but 400 bytes of tail: less than half the base
    store.apply(1, entry(14))
    assert calls == [15] and store.tail == []  # 500 bytes: compacted
    assert [e.payload for e in store.entries(0)] == [entry(i) for i in range(15)]
