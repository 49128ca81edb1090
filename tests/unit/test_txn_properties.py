"""Random sequences of InitProducerId / AddPartitions / AddOffsets / TxnOffsetCommit / EndTxn /
markers-written / clock steps against the transaction coordinator (and, with TxnOffsetCommit, the
group coordinator of the offsets' partition), checking after every step what must always hold:
replaying the records rebuilds the live state, every record is a transition Kafka allows, epochs
only grow, a fenced producer never succeeds, decisions and only decisions send markers, no
transaction stays open past its timeout, and OffsetFetch shows exactly the offsets of committed
transactions."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator import commands as gc
from tests.unit.harness import Harness
from transactions import commands as c
from transactions.config import TxnConfig
from transactions.errors import TxnError
from transactions.records import TxnRecord, TxnValue
from transactions.shard import Result, TransactionShard
from transactions.state import MAX_EPOCH, PREPARING, VALID_PREVIOUS, TxnState

E = TxnError
S = TxnState
IDS = ("a", "b")
PARTS = (("t", 0), ("t", 1), ("u", 0), ("__consumer_offsets", 3))
CONFIG = TxnConfig(max_timeout_ms=5_000, id_expiration_ms=20_000)


@dataclass(frozen=True)
class Op:
    kind: str
    tid: str
    arg: int  # a choice among producers / epochs / timeouts, interpreted per kind
    parts: tuple[tuple[str, int], ...] = ()


_ops = st.builds(
    Op,
    st.sampled_from(["init", "init_expected", "add", "add_offsets", "commit", "abort", "markers", "tick",
                     "add2", "commit2", "abort2"]),  # ...2: transaction version 2 (KIP-890 part 2)
    st.sampled_from(IDS),
    st.integers(0, 7),
    st.lists(st.sampled_from(PARTS), min_size=1, max_size=3, unique=True).map(tuple),
)


class Model:
    def __init__(self) -> None:
        self.shard = TransactionShard(CONFIG)
        self.now = 0
        self.log: list[TxnRecord] = []
        self.next_pid = 100
        self.seen: dict[str, tuple[int, int]] = {}  # every (pid, epoch) a producer was handed, newest
        self.handed: dict[str, list[tuple[int, int]]] = {t: [] for t in IDS}
        self.pending_markers: list[c.WriteMarkers] = []

    def producer(self, tid: str, arg: int) -> tuple[int, int]:
        """A producer the test holds: the newest one handed out, or (arg odd) an older one."""
        handed = self.handed[tid]
        if not handed:
            return (1, 0)
        return handed[-1] if arg % 2 == 0 or len(handed) == 1 else handed[arg % len(handed)]

    def run(self, op: Op) -> None:
        before = self.shard.durable_view()
        current = {t: (v.producer_id, v.producer_epoch) for t, v in before.items()}
        tok = object()
        if op.kind in ("init", "init_expected"):
            pid, epoch = self.producer(op.tid, op.arg) if op.kind == "init_expected" else (-1, -1)
            timeout = 1_000 * (op.arg + 1)  # 6 000 and up are refused
            fresh, self.next_pid = self.next_pid, self.next_pid + 1
            out = self.shard.handle(c.InitProducerId(op.tid, timeout, pid, epoch, fresh), tok, self.now)
        elif op.kind in ("add", "add_offsets", "add2"):
            pid, epoch = self.producer(op.tid, op.arg)
            parts = op.parts if op.kind != "add_offsets" else (PARTS[3],)
            out = self.shard.handle(c.AddPartitions(op.tid, pid, epoch, parts, version=2 if op.kind == "add2" else 1),
                                    tok, self.now)
        elif op.kind in ("commit", "abort", "commit2", "abort2"):
            pid, epoch = self.producer(op.tid, op.arg)
            fresh, self.next_pid = self.next_pid, self.next_pid + 1  # used only by an end that exhausts the epoch
            out = self.shard.handle(c.EndTxn(op.tid, pid, epoch, op.kind.startswith("commit"),
                                             version=2 if op.kind.endswith("2") else 1, fresh_producer_id=fresh),
                                    tok, self.now)
        elif op.kind == "markers":
            if not self.pending_markers:
                return
            m = self.pending_markers.pop(op.arg % len(self.pending_markers))
            out = self.shard.markers_written(m.transactional_id, m.producer_id, m.producer_epoch, m.commit, self.now)
        else:
            self.now += 700 * op.arg
            out = self.shard.fire_due(self.now)
        self.check(op, before, current, out)

    def check(self, op: Op, before: dict[str, TxnValue], current: dict[str, tuple[int, int]], out: Result) -> None:
        self.log += out.records
        rebuilt, _ = TransactionShard.load(self.log, self.now, CONFIG)
        assert rebuilt.durable_view() == self.shard.durable_view()
        open_now = sum(v.state is S.ONGOING or v.state in PREPARING for v in self.shard.durable_view().values())
        assert self.shard.open == rebuilt.open == open_now  # the metric's count, kept as records replay
        prev = dict(before)
        for record in out.records:
            old, new = prev.get(record.transactional_id), record.value
            if new is None:
                assert old is not None and old.state in VALID_PREVIOUS[S.DEAD]
            elif old is None:
                assert new.state is S.EMPTY and new.producer_epoch == 0
            else:
                assert old.state in VALID_PREVIOUS[new.state] or (old.state, new.state) == (S.EMPTY, S.EMPTY), (old, new)
                if new.producer_id == old.producer_id:
                    assert new.producer_epoch >= old.producer_epoch
                elif old.state in PREPARING:  # version 2: the end that exhausted the epoch completes
                    assert (new.producer_id, new.producer_epoch) == (old.next_producer_id, 0), (old, new)
                    assert new.previous_producer_id == old.producer_id
                else:
                    assert new.producer_epoch == 0 and old.state in VALID_PREVIOUS[S.EMPTY]
                assert new.producer_epoch <= MAX_EPOCH
                if op.kind in ("init", "init_expected", "tick") and new.state is S.PREPARE_ABORT:
                    # an abort the producer did not ask for fences it: the epoch moves on
                    assert new.producer_epoch > old.producer_epoch or old.producer_epoch == MAX_EPOCH
            if new is not None and new.state is S.EMPTY:
                assert new.partitions == frozenset()
            prev[record.transactional_id] = new  # type: ignore[assignment]
        decided = [r for r in out.records if r.value is not None and r.value.state in PREPARING]
        assert [(m.transactional_id, m.producer_id, m.producer_epoch, m.commit) for m in out.markers] == [
            (r.transactional_id, r.value.producer_id, r.value.producer_epoch, r.value.state is S.PREPARE_COMMIT)
            for r in decided if r.value is not None]
        self.pending_markers += out.markers
        for _, response in out.completions:
            if isinstance(response, c.InitProducerIdResponse) and response.error is E.NONE:
                v = self.shard.txns[op.tid].value
                assert (response.producer_id, response.producer_epoch) == (v.producer_id, v.producer_epoch)
                self.handed[op.tid].append((v.producer_id, v.producer_epoch))
            if isinstance(response, c.EndTxnResponse) and response.error is E.NONE and op.kind.endswith("2"):
                # version 2: the current producer ends (the epoch moves on), or the one just before
                # it retries that end; either is told the producer's next id and epoch
                v = self.shard.txns[op.tid].value
                asked = self.producer(op.tid, op.arg)
                assert asked == current[op.tid] or (asked[0], asked[1] + 1) == current[op.tid], (asked, current)
                assert (response.producer_id, response.producer_epoch) in (
                    (v.producer_id, v.producer_epoch), (v.next_producer_id, 0))
                self.handed[op.tid].append((response.producer_id, response.producer_epoch))
                continue
            ok = (isinstance(response, c.AddPartitionsResponse) and response.error is E.NONE) or (
                isinstance(response, c.EndTxnResponse) and response.error is E.NONE)
            if ok:  # only the current producer succeeds; an older epoch or id is fenced
                assert self.producer(op.tid, op.arg) == current[op.tid]
        for v in self.shard.durable_view().values():
            assert not (v.state is S.ONGOING and v.start_ms + v.timeout_ms < self.now and op.kind == "tick")


@settings(max_examples=300, deadline=None)
@given(st.lists(_ops, min_size=20, max_size=80))
def test_random_transaction_histories_keep_the_coordinators_invariants(ops: list[Op]) -> None:
    m = Model()
    for op in ops:
        m.run(op)


@settings(max_examples=100, deadline=None)
@given(st.lists(_ops, min_size=20, max_size=80))
def test_every_decided_transaction_completes_once_its_markers_are_written(ops: list[Op]) -> None:
    m = Model()
    for op in ops:
        m.run(op)
    while m.pending_markers:
        m.run(Op("markers", "a", 0))
    for tid, v in m.shard.durable_view().items():
        assert v.state not in PREPARING, tid


# ---------------------------------------------------------------- with the group coordinator

OFFSETS_TP = ("__consumer_offsets", 3)
_group_ops = st.builds(
    Op,
    st.sampled_from(["init", "init_expected", "add", "add_offsets", "add_offsets", "txn_commit", "txn_commit",
                     "txn_commit", "commit", "commit", "abort", "markers", "markers", "markers", "tick"]),
    st.just("a"),
    st.integers(0, 7),
    st.lists(st.sampled_from(PARTS[:3]), min_size=1, max_size=2, unique=True).map(tuple),
)


class WithGroup(Model):
    """The transaction coordinator and the group coordinator of ``__consumer_offsets-3`` together:
    a producer commits offsets in its transaction (TxnOffsetCommit) only after AddOffsetsToTxn
    succeeded in that transaction, as every client does; markers reach the group partition in the
    order the coordinator decided them. What OffsetFetch shows must be exactly the offsets of
    committed transactions, never an aborted or a fenced producer's."""

    def __init__(self) -> None:
        super().__init__()
        self.group = Harness()
        self.value = 0
        self.offsets_added: set[tuple[str, int, int]] = set()  # (tid, pid, epoch) with offsets in its txn
        self.pending: dict[int, dict[tuple[str, int], int]] = {}  # accepted, by producer id
        self.expected: dict[tuple[str, int], int] = {}
        self.last_out = Result()

    def run(self, op: Op) -> None:
        if op.kind == "txn_commit":
            self.txn_commit(op)
            return
        if op.kind == "markers" and self.pending_markers:
            m = self.pending_markers[op.arg % len(self.pending_markers)]
            if OFFSETS_TP in m.partitions:
                r = self.group.call(gc.EndTxnMarkerRequest(m.producer_id, m.producer_epoch, m.commit, 1))
                assert r.error == 0
                done = self.pending.pop(m.producer_id, {})
                if m.commit:
                    self.expected.update(done)
        self.last_out = Result()
        super().run(op)
        if op.kind == "add_offsets" and any(isinstance(r, c.AddPartitionsResponse) and r.error is E.NONE
                                            for _, r in self.last_out.completions):
            pid, epoch = self.producer(op.tid, op.arg)
            self.offsets_added.add((op.tid, pid, epoch))
        assert self.group.fetch("g", {"t": [0, 1], "u": [0]}) == {
            tp: self.expected.get(tp, -1) for tp in (("t", 0), ("t", 1), ("u", 0))}

    def txn_commit(self, op: Op) -> None:
        pid, epoch = self.producer(op.tid, op.arg)
        if (op.tid, pid, epoch) not in self.offsets_added:
            return  # no AddOffsetsToTxn in this transaction: a client does not send it
        v = self.shard.txns.get(op.tid)
        current = v is not None and (v.value.producer_id, v.value.producer_epoch) == (pid, epoch) \
            and v.value.state is S.ONGOING
        self.value += 1
        tps = tuple((t, p) for t, p in op.parts)
        r = self.group.call(gc.TxnOffsetCommitRequest(
            "g", pid, epoch, tuple((t, (gc.PartitionCommit(p, self.value),)) for t, p in tps)))
        if all(e == 0 for _, ps in r.topics for _, e in ps) and current:
            self.pending.setdefault(pid, {}).update({tp: self.value for tp in tps})
        # accepted from a producer whose transaction is no longer the open one: it must never show

    def check(self, op: Op, before: dict[str, TxnValue], current: dict[str, tuple[int, int]], out: Result) -> None:
        super().check(op, before, current, out)
        self.last_out = out
        for v in self.shard.durable_view().values():  # a transaction that ends forgets its AddOffsets
            if v.state is not S.ONGOING:
                self.offsets_added = {x for x in self.offsets_added if x[1] != v.producer_id or x[2] != v.producer_epoch}


@settings(max_examples=200, deadline=None)
@given(st.lists(_group_ops, min_size=20, max_size=80))
def test_random_histories_with_transactional_offsets_show_only_committed_offsets(ops: list[Op]) -> None:
    m = WithGroup()
    for op in ops:
        m.run(op)
