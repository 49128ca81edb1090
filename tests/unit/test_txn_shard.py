"""The transaction coordinator shard, case by case (Kafka's TransactionCoordinatorTest,
TransactionMetadataTest and TransactionStateManagerTest, restated for a pure shard)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from transactions import commands as c
from transactions.config import TxnConfig
from transactions.errors import TxnError, for_version
from transactions.records import TxnRecord, TxnValue
from transactions.shard import Result, TransactionShard
from transactions.state import MAX_EPOCH, TxnState

E = TxnError
S = TxnState
TID = "txn-1"
T0 = 1_000_000
TP = ("out", 0)


class Harness:
    """A shard with a manual clock that keeps every record written, so each test can check that
    replaying them rebuilds the live state."""

    def __init__(self, config: TxnConfig | None = None) -> None:
        self.shard = TransactionShard(config)
        self.now = T0
        self.log: list[TxnRecord] = []
        self.next_pid = 1000

    def step(self, result: Result) -> Result:
        self.log += result.records
        rebuilt, _ = TransactionShard.load(self.log, self.now, self.shard.config)
        assert rebuilt.durable_view() == self.shard.durable_view()
        return result

    def ask(self, request: c.Request) -> tuple[c.Response, Result]:
        out = self.step(self.shard.handle(request, "tok", self.now))
        ((token, response),) = out.completions
        assert token == "tok"
        return response, out

    def init(self, tid: str = TID, timeout_ms: int = 60_000, pid: int = -1, epoch: int = -1,
             fresh: int | None = None) -> c.InitProducerIdResponse:
        if fresh is None:
            fresh, self.next_pid = self.next_pid, self.next_pid + 1
        r, _ = self.ask(c.InitProducerId(tid, timeout_ms, pid, epoch, fresh))
        assert isinstance(r, c.InitProducerIdResponse)
        return r

    def add(self, pid: int, epoch: int, *tps: tuple[str, int], tid: str = TID) -> TxnError:
        r, _ = self.ask(c.AddPartitions(tid, pid, epoch, tps or (TP,)))
        assert isinstance(r, c.AddPartitionsResponse)
        assert len(set(r.errors.values())) == 1
        return r.error

    def end(self, pid: int, epoch: int, commit: bool, tid: str = TID) -> tuple[TxnError, Result]:
        r, out = self.ask(c.EndTxn(tid, pid, epoch, commit))
        assert isinstance(r, c.EndTxnResponse)
        return r.error, out

    def markers_done(self, m: c.WriteMarkers) -> Result:
        return self.step(self.shard.markers_written(m.transactional_id, m.producer_id, m.producer_epoch,
                                                    m.commit, self.now))

    def tick(self, ms: int) -> Result:
        self.now += ms
        return self.step(self.shard.fire_due(self.now))

    def state(self, tid: str = TID) -> TxnValue:
        return self.shard.txns[tid].value


@pytest.fixture
def h() -> Harness:
    return Harness()


# ---------------------------------------------------------------- InitProducerId

def test_an_empty_transactional_id_is_an_invalid_request(h: Harness) -> None:
    assert h.init("").error is E.INVALID_REQUEST


def test_a_new_transactional_id_gets_a_fresh_producer_id_at_epoch_zero(h: Harness) -> None:
    r = h.init(fresh=77)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, 77, 0)
    assert h.log == [TxnRecord(TID, TxnValue(77, 0, 60_000, S.EMPTY, frozenset(), T0, -1))]


def test_without_a_producer_id_at_hand_a_new_id_is_asked_to_retry(h: Harness) -> None:
    r, out = h.ask(c.InitProducerId(TID, 60_000, fresh_producer_id=-1))
    assert r == c.InitProducerIdResponse(E.COORDINATOR_LOAD_IN_PROGRESS) and not out.records


@pytest.mark.parametrize("timeout", [0, -1, 900_001])
def test_a_timeout_outside_the_bounds_is_refused(h: Harness, timeout: int) -> None:
    assert h.init(timeout_ms=timeout).error is E.INVALID_TRANSACTION_TIMEOUT


def test_half_of_an_expected_producer_is_an_invalid_request(h: Harness) -> None:
    assert h.init(pid=5, epoch=-1).error is E.INVALID_REQUEST


def test_an_expected_producer_with_no_state_gets_a_fresh_id_at_epoch_zero(h: Harness) -> None:
    r = h.init(pid=5, epoch=3, fresh=9)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, 9, 0)


@pytest.mark.parametrize("finish", [None, True, False])
def test_init_again_bumps_the_epoch_of_an_idle_id(h: Harness, finish: bool | None) -> None:
    first = h.init()
    if finish is not None:
        h.add(first.producer_id, 0)
        _, out = h.end(first.producer_id, 0, finish)
        h.markers_done(out.markers[0])
    again = h.init(timeout_ms=30_000)
    assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)
    v = h.state()
    assert (v.state, v.timeout_ms, v.partitions, v.start_ms) == (S.EMPTY, 30_000, frozenset(), -1)


def test_the_epoch_rotates_to_a_new_producer_id_when_exhausted(h: Harness) -> None:
    h.init(fresh=5)
    h.shard.replay(TxnRecord(TID, TxnValue(5, MAX_EPOCH - 1, 60_000, S.EMPTY, frozenset(), T0, -1)))
    r = h.init(pid=5, epoch=MAX_EPOCH - 1, fresh=6)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, 6, 0)
    # the producer retrying (its answer was lost) is recognised through the previous id
    retry = h.init(pid=5, epoch=MAX_EPOCH - 1, fresh=7)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, 6, 0)
    assert h.init(pid=5, epoch=MAX_EPOCH - 2, fresh=8).error is E.PRODUCER_FENCED


@pytest.mark.parametrize("commit", [True, False])
def test_init_while_a_decision_is_being_written_waits(h: Harness, commit: bool) -> None:
    r = h.init()
    h.add(r.producer_id, 0)
    h.end(r.producer_id, 0, commit)
    assert h.init().error is E.CONCURRENT_TRANSACTIONS
    assert h.init(pid=r.producer_id, epoch=0).error is E.CONCURRENT_TRANSACTIONS
    assert h.init(pid=r.producer_id + 1, epoch=0).error is E.CONCURRENT_TRANSACTIONS  # before fencing


def test_init_during_an_open_transaction_aborts_it_at_the_next_epoch(h: Harness) -> None:
    r = h.init()
    h.add(r.producer_id, 0, ("a", 0), ("b", 1))
    resp, out = h.ask(c.InitProducerId(TID, 60_000, fresh_producer_id=99))
    assert resp == c.InitProducerIdResponse(E.CONCURRENT_TRANSACTIONS)
    v = h.state()
    assert (v.state, v.producer_epoch, v.partitions) == (S.PREPARE_ABORT, 1, frozenset({("a", 0), ("b", 1)}))
    assert out.markers == [c.WriteMarkers(TID, r.producer_id, 1, False, (("a", 0), ("b", 1)))]
    # the zombie with epoch 0 is fenced
    assert h.add(r.producer_id, 0) is E.PRODUCER_FENCED
    h.markers_done(out.markers[0])
    assert h.state().state is S.COMPLETE_ABORT
    again = h.init()
    assert (again.error, again.producer_id, again.producer_epoch) == (E.NONE, r.producer_id, 2)


def test_fencing_at_the_last_epoch_does_not_overflow(h: Harness) -> None:
    h.init(fresh=5)
    h.shard.replay(TxnRecord(TID, TxnValue(5, MAX_EPOCH, 60_000, S.ONGOING, frozenset({TP}), T0, T0)))
    assert h.init().error is E.CONCURRENT_TRANSACTIONS
    assert (h.state().state, h.state().producer_epoch) == (S.PREPARE_ABORT, MAX_EPOCH)


def test_kip360_bump_with_the_current_epoch_and_a_retry_of_it(h: Harness) -> None:
    r = h.init()
    bumped = h.init(pid=r.producer_id, epoch=0)
    assert (bumped.error, bumped.producer_epoch) == (E.NONE, 1)
    retried = h.init(pid=r.producer_id, epoch=0)  # the answer was lost; the same epoch again
    assert (retried.error, retried.producer_epoch) == (E.NONE, 1)
    assert h.init(pid=r.producer_id, epoch=7).error is E.PRODUCER_FENCED


def test_a_retried_bump_after_a_reload_is_fenced_as_in_kafka(h: Harness) -> None:
    r = h.init()
    h.init(pid=r.producer_id, epoch=0)
    h.shard, _ = TransactionShard.load(h.log, h.now)
    assert h.init(pid=r.producer_id, epoch=0).error is E.PRODUCER_FENCED


def test_an_expected_producer_id_that_is_not_the_current_one_is_fenced(h: Harness) -> None:
    r = h.init()
    assert h.init(pid=r.producer_id + 1, epoch=0).error is E.PRODUCER_FENCED


# ---------------------------------------------------------------- AddPartitions / AddOffsets

def test_add_partitions_for_an_unknown_id_or_producer_is_a_mapping_error(h: Harness) -> None:
    assert h.add(1, 0) is E.INVALID_PRODUCER_ID_MAPPING
    r = h.init()
    assert h.add(r.producer_id + 1, 0) is E.INVALID_PRODUCER_ID_MAPPING
    assert h.add(r.producer_id, 0, tid="") is E.INVALID_REQUEST


def test_add_partitions_with_another_epoch_is_fenced(h: Harness) -> None:
    r = h.init()
    assert h.add(r.producer_id, 1) is E.PRODUCER_FENCED


@pytest.mark.parametrize("commit", [True, False])
def test_add_partitions_while_deciding_waits(h: Harness, commit: bool) -> None:
    r = h.init()
    h.add(r.producer_id, 0)
    h.end(r.producer_id, 0, commit)
    assert h.add(r.producer_id, 0, ("x", 1)) is E.CONCURRENT_TRANSACTIONS


def test_add_partitions_opens_then_extends_a_transaction_and_writes_nothing_for_a_subset(h: Harness) -> None:
    r = h.init()
    assert h.add(r.producer_id, 0, ("a", 0)) is E.NONE
    v = h.state()
    assert (v.state, v.partitions, v.start_ms) == (S.ONGOING, frozenset({("a", 0)}), T0)
    h.now += 10
    assert h.add(r.producer_id, 0, ("a", 1)) is E.NONE
    v = h.state()
    assert (v.partitions, v.start_ms, v.last_update_ms) == (frozenset({("a", 0), ("a", 1)}), T0, T0 + 10)
    _, out = h.ask(c.AddPartitions(TID, r.producer_id, 0, (("a", 0),)))
    assert out.records == []


@pytest.mark.parametrize("commit", [True, False])
def test_a_new_transaction_after_a_complete_one_starts_afresh(h: Harness, commit: bool) -> None:
    r = h.init()
    h.add(r.producer_id, 0, ("a", 0))
    _, out = h.end(r.producer_id, 0, commit)
    h.markers_done(out.markers[0])
    h.now += 50
    assert h.add(r.producer_id, 0, ("b", 0)) is E.NONE
    assert (h.state().partitions, h.state().start_ms) == (frozenset({("b", 0)}), T0 + 50)


# ---------------------------------------------------------------- verification (KIP-890 part 1)

def _verify(h: Harness, pid: int, epoch: int, *tps: tuple[str, int], tid: str = TID) -> dict[tuple[str, int], TxnError]:
    r, out = h.ask(c.VerifyPartitions(tid, pid, epoch, tps))
    assert isinstance(r, c.AddPartitionsResponse) and out.records == [] and out.markers == []
    return r.errors


def test_verify_answers_none_for_partitions_in_the_open_transaction_and_abortable_for_others(h: Harness) -> None:
    r = h.init()
    h.add(r.producer_id, 0, ("a", 0), ("a", 1))
    assert _verify(h, r.producer_id, 0, ("a", 0), ("a", 1), ("b", 0)) == {
        ("a", 0): E.NONE, ("a", 1): E.NONE, ("b", 0): E.TRANSACTION_ABORTABLE}


@pytest.mark.parametrize("commit", [True, False])
def test_verify_after_the_transaction_finished_is_abortable_and_while_deciding_concurrent(h: Harness,
                                                                                          commit: bool) -> None:
    r = h.init()
    assert _verify(h, r.producer_id, 0, ("a", 0)) == {("a", 0): E.TRANSACTION_ABORTABLE}  # Empty
    h.add(r.producer_id, 0, ("a", 0))
    _, out = h.end(r.producer_id, 0, commit)
    assert _verify(h, r.producer_id, 0, ("a", 0)) == {("a", 0): E.CONCURRENT_TRANSACTIONS}
    h.markers_done(out.markers[0])
    assert _verify(h, r.producer_id, 0, ("a", 0)) == {("a", 0): E.TRANSACTION_ABORTABLE}  # a late batch


def test_verify_checks_the_producer_first(h: Harness) -> None:
    r = h.init()
    h.add(r.producer_id, 0, ("a", 0))
    assert _verify(h, r.producer_id + 1, 0, ("a", 0)) == {("a", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert _verify(h, r.producer_id, 1, ("a", 0)) == {("a", 0): E.PRODUCER_FENCED}
    assert _verify(h, r.producer_id, 0, ("a", 0), tid="other") == {("a", 0): E.INVALID_PRODUCER_ID_MAPPING}


# ---------------------------------------------------------------- EndTxn

def test_end_txn_for_an_unknown_id_or_producer(h: Harness) -> None:
    assert h.end(1, 0, True)[0] is E.INVALID_PRODUCER_ID_MAPPING
    r = h.init()
    assert h.end(r.producer_id + 1, 0, True)[0] is E.INVALID_PRODUCER_ID_MAPPING
    assert h.end(r.producer_id, 0, True, tid="")[0] is E.INVALID_REQUEST


@pytest.mark.parametrize("epoch", [1, -1])
def test_end_txn_with_a_larger_or_smaller_epoch_is_fenced(h: Harness, epoch: int) -> None:
    r = h.init(pid=-1)
    h.init(pid=r.producer_id, epoch=0)  # now at epoch 1
    h.add(r.producer_id, 1)
    assert h.end(r.producer_id, 1 + epoch, True)[0] is E.PRODUCER_FENCED


def test_end_txn_in_empty_is_an_invalid_state(h: Harness) -> None:
    r = h.init()
    assert h.end(r.producer_id, 0, True)[0] is E.INVALID_TXN_STATE


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_writes_the_decision_with_the_same_partitions_and_start(h: Harness, commit: bool) -> None:
    r = h.init()
    h.add(r.producer_id, 0, ("a", 0), ("b", 2))
    h.now += 5
    err, out = h.end(r.producer_id, 0, commit)
    assert err is E.NONE
    want = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
    assert out.records == [TxnRecord(TID, TxnValue(r.producer_id, 0, 60_000, want,
                                                   frozenset({("a", 0), ("b", 2)}), T0 + 5, T0))]
    assert out.markers == [c.WriteMarkers(TID, r.producer_id, 0, commit, (("a", 0), ("b", 2)))]


@pytest.mark.parametrize(("decided", "asked", "error"), [
    (True, True, E.CONCURRENT_TRANSACTIONS), (True, False, E.INVALID_TXN_STATE),
    (False, False, E.CONCURRENT_TRANSACTIONS), (False, True, E.INVALID_TXN_STATE)])
def test_end_txn_while_deciding(h: Harness, decided: bool, asked: bool, error: TxnError) -> None:
    r = h.init()
    h.add(r.producer_id, 0)
    h.end(r.producer_id, 0, decided)
    assert h.end(r.producer_id, 0, asked)[0] is error


@pytest.mark.parametrize(("done", "asked", "error"), [
    (True, True, E.NONE), (True, False, E.INVALID_TXN_STATE),
    (False, False, E.NONE), (False, True, E.INVALID_TXN_STATE)])
def test_end_txn_after_completion(h: Harness, done: bool, asked: bool, error: TxnError) -> None:
    r = h.init()
    h.add(r.producer_id, 0)
    _, out = h.end(r.producer_id, 0, done)
    h.markers_done(out.markers[0])
    assert h.state().state is (S.COMPLETE_COMMIT if done else S.COMPLETE_ABORT)
    assert h.state().partitions == frozenset()
    err, again = h.end(r.producer_id, 0, asked)
    assert err is error and not again.records and not again.markers


def test_a_stale_markers_notice_writes_nothing(h: Harness) -> None:
    r = h.init()
    h.add(r.producer_id, 0)
    _, out = h.end(r.producer_id, 0, True)
    h.markers_done(out.markers[0])
    assert h.markers_done(out.markers[0]).records == []


# ---------------------------------------------------------------- timers

def test_an_open_transaction_past_its_timeout_is_aborted_at_the_next_epoch(h: Harness) -> None:
    r = h.init(timeout_ms=1000)
    h.add(r.producer_id, 0)
    assert h.tick(1000).records == []  # Kafka aborts past the timeout, not at it
    out = h.tick(1)
    v = h.state()
    assert (v.state, v.producer_epoch, v.start_ms) == (S.PREPARE_ABORT, 1, T0)
    assert out.markers == [c.WriteMarkers(TID, r.producer_id, 1, False, (TP,))]
    assert h.end(r.producer_id, 0, True)[0] is E.PRODUCER_FENCED


def test_a_transaction_decided_in_time_is_not_aborted_by_its_old_deadline(h: Harness) -> None:
    r = h.init(timeout_ms=1000)
    h.add(r.producer_id, 0)
    _, out = h.end(r.producer_id, 0, True)
    h.markers_done(out.markers[0])
    assert h.tick(5000).records == []
    assert h.state().state is S.COMPLETE_COMMIT


def test_idle_ids_expire_and_open_ones_do_not() -> None:
    h = Harness(TxnConfig(id_expiration_ms=10_000))
    a = h.init("idle")
    b = h.init("open", timeout_ms=900_000)
    h.add(b.producer_id, 0, tid="open")
    h.tick(9_999)
    assert set(h.shard.txns) == {"idle", "open"}
    out = h.tick(1)
    assert out.records == [TxnRecord("idle", None)] and set(h.shard.txns) == {"open"}
    assert h.add(a.producer_id, 0, tid="idle") is E.INVALID_PRODUCER_ID_MAPPING


def test_activity_postpones_expiry() -> None:
    h = Harness(TxnConfig(id_expiration_ms=10_000))
    r = h.init()
    h.now += 8_000
    h.add(r.producer_id, 0)
    _, out = h.end(r.producer_id, 0, True)
    h.markers_done(out.markers[0])
    assert h.tick(5_000).records == []  # 13 s after creation, 5 s after completion
    assert h.tick(5_000).records == [TxnRecord(TID, None)]


# ---------------------------------------------------------------- load

def test_load_resumes_the_markers_of_every_decided_transaction(h: Harness) -> None:
    a, b = h.init("a"), h.init("b")
    h.add(a.producer_id, 0, ("x", 0), tid="a")
    h.add(b.producer_id, 0, ("y", 1), tid="b")
    h.end(a.producer_id, 0, True, tid="a")
    h.end(b.producer_id, 0, False, tid="b")
    shard, out = TransactionShard.load(h.log, h.now)
    assert sorted(out.markers, key=lambda m: m.transactional_id) == [
        c.WriteMarkers("a", a.producer_id, 0, True, (("x", 0),)),
        c.WriteMarkers("b", b.producer_id, 0, False, (("y", 1),))]
    assert out.records == [] and out.completions == []
    done = shard.markers_written("a", a.producer_id, 0, True, h.now)
    assert [r.value.state for r in done.records if r.value] == [S.COMPLETE_COMMIT]


def test_load_arms_the_timeout_of_open_transactions(h: Harness) -> None:
    r = h.init(timeout_ms=1000)
    h.add(r.producer_id, 0)
    shard, _ = TransactionShard.load(h.log, h.now)
    assert shard.next_deadline() == T0 + 1001


# ---------------------------------------------------------------- reads

def test_describe_transactions(h: Harness) -> None:
    r = h.init()
    h.add(r.producer_id, 0, ("b", 1), ("a", 0))
    resp, out = h.ask(c.DescribeTransactions((TID, "", "nope")))
    assert not out.records
    assert resp == c.DescribeTransactionsResponse((
        c.DescribedTransaction(TID, E.NONE, "Ongoing", 60_000, T0, r.producer_id, 0, (("a", 0), ("b", 1))),
        c.DescribedTransaction("", E.INVALID_REQUEST),
        c.DescribedTransaction("nope", E.TRANSACTIONAL_ID_NOT_FOUND)))


def test_list_transactions_filters(h: Harness) -> None:
    a, b = h.init("a"), h.init("b")
    h.add(b.producer_id, 0, tid="b")
    h.now += 100

    def listed(**kw: object) -> tuple[list[str], tuple[str, ...]]:
        resp, _ = h.ask(c.ListTransactions(**kw))  # type: ignore[arg-type]
        assert isinstance(resp, c.ListTransactionsResponse)
        return [t.transactional_id for t in resp.transactions], resp.unknown_states

    assert listed() == (["a", "b"], ())
    assert listed(states=("Ongoing",)) == (["b"], ())
    assert listed(states=("Bogus",)) == ([], ("Bogus",))
    assert listed(producer_ids=(a.producer_id,)) == (["a"], ())
    assert listed(duration_ms=99) == (["a", "b"], ())  # Empty has start -1: always "long"
    assert listed(duration_ms=100) == (["a"], ())


def test_state_ids_and_names_round_trip() -> None:
    for s in TxnState:
        assert TxnState.from_label(s.label) is s
    assert [s.value for s in TxnState] == list(range(8))


def test_producer_fenced_is_downgraded_for_old_request_versions() -> None:
    assert for_version(E.PRODUCER_FENCED, 1, fenced_since=2) is E.INVALID_PRODUCER_EPOCH
    assert for_version(E.PRODUCER_FENCED, 2, fenced_since=2) is E.PRODUCER_FENCED
    assert for_version(E.CONCURRENT_TRANSACTIONS, 0, fenced_since=2) is E.CONCURRENT_TRANSACTIONS


# ---------------------------------------------------------------- transaction version 2 (KIP-890 part 2)

def _end2(h: Harness, pid: int, epoch: int, commit: bool, fresh: int = -1) -> tuple[c.EndTxnResponse, Result]:
    r, out = h.ask(c.EndTxn(TID, pid, epoch, commit, version=2, fresh_producer_id=fresh))
    assert isinstance(r, c.EndTxnResponse)
    return r, out


def _add2(h: Harness, pid: int, epoch: int, *tps: tuple[str, int]) -> TxnError:
    r, _ = h.ask(c.AddPartitions(TID, pid, epoch, tps or (TP,), version=2))
    assert isinstance(r, c.AddPartitionsResponse)
    return r.error


def _complete(h: Harness, out: Result) -> None:
    (m,) = out.markers
    h.markers_done(m)


def test_v2_end_bumps_the_epoch_and_answers_the_new_one(h: Harness) -> None:
    """testBumpTransactionalEpochWithTV2Enabled: the decision is written at the next epoch, its
    markers carry that epoch (version 2), and the producer is told it for its next transaction."""
    r = h.init()
    pid = r.producer_id
    assert _add2(h, pid, 0) is E.NONE and h.state().client_version == 2
    resp, out = _end2(h, pid, 0, True)
    assert (resp.error, resp.producer_id, resp.producer_epoch) == (E.NONE, pid, 1)
    assert h.state().state is S.PREPARE_COMMIT and h.state().producer_epoch == 1
    assert out.markers == [c.WriteMarkers(TID, pid, 1, True, (TP,), 2)]
    _complete(h, out)
    assert (h.state().state, h.state().producer_epoch) == (S.COMPLETE_COMMIT, 1)
    assert _add2(h, pid, 0) is E.PRODUCER_FENCED  # the old epoch is done with
    assert _add2(h, pid, 1) is E.NONE


def test_end_txn_when_status_is_complete_commit_and_result_is_commit_in_v2(h: Harness) -> None:
    """testEndTxnWhenStatusIsCompleteCommitAndResultIsCommitInV2: a retry (the epoch before the
    bump) is answered NONE with the current id and epoch; the same epoch again is not a retry."""
    pid = h.init().producer_id
    _add2(h, pid, 0)
    _, out = _end2(h, pid, 0, True)
    retry, _ = _end2(h, pid, 0, True)  # while the markers are written
    assert retry.error is E.CONCURRENT_TRANSACTIONS
    _complete(h, out)
    retry, _ = _end2(h, pid, 0, True)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, pid, 1)
    assert _end2(h, pid, 1, True)[0].error is E.INVALID_TXN_STATE  # a new commit of nothing
    assert _end2(h, pid, 0, False)[0].error is E.INVALID_TXN_STATE  # an abort retry of a commit


# (state reached, result, retry?) -> error, as Kafka's table for version 2 (EB: an epoch bump, NONE)
_V2_TABLE = [
    ("empty", False, True, E.PRODUCER_FENCED), ("empty", False, False, E.NONE),
    ("empty", True, True, E.PRODUCER_FENCED), ("empty", True, False, E.INVALID_TXN_STATE),
    ("abort", False, True, E.NONE), ("abort", False, False, E.NONE),
    ("abort", True, True, E.INVALID_TXN_STATE), ("abort", True, False, E.INVALID_TXN_STATE),
    ("commit", False, True, E.INVALID_TXN_STATE), ("commit", False, False, E.NONE),
    ("commit", True, True, E.NONE), ("commit", True, False, E.INVALID_TXN_STATE),
]


@pytest.mark.parametrize(("reached", "commit", "retry", "expected"), _V2_TABLE)
def test_v2_end_txn_table(h: Harness, reached: str, commit: bool, retry: bool, expected: TxnError) -> None:
    pid = h.init().producer_id
    epoch = 0
    if reached != "empty":
        _add2(h, pid, 0)
        _, out = _end2(h, pid, 0, reached == "commit")
        _complete(h, out)
        epoch = 1
    asked = epoch - 1 if retry else epoch
    before = h.state()
    resp, out = _end2(h, pid, asked, commit)
    assert resp.error is expected
    if expected is E.NONE and not retry:  # an epoch bump: an abort of nothing open
        assert h.state().state is S.PREPARE_ABORT and h.state().producer_epoch == epoch + 1
        assert (resp.producer_id, resp.producer_epoch) == (pid, epoch + 1)
        assert out.markers == [c.WriteMarkers(TID, pid, epoch + 1, False, (), 2)]
        assert h.state().start_ms == h.now  # testTransitFromEmptyToPrepareAbortInV2
    elif expected is E.NONE:
        assert (resp.producer_id, resp.producer_epoch) == (pid, epoch) and h.state() == before
    else:
        assert not out.records and (resp.producer_id, resp.producer_epoch) == (-1, -1)


def test_epoch_bump_on_end_txn_overflow(h: Harness) -> None:
    """testEpochBumpOnEndTxnOverflow: an end at the last usable epoch goes to the reserved one
    with a new producer id waiting; once complete the producer is the new id at epoch 0, and a
    retry of that end (the old id's last epoch) is answered with it (retryOnOverflow)."""
    h.init(fresh=7)
    h.shard.txns[TID].value = replace(h.state(), producer_epoch=MAX_EPOCH - 1)
    h.log.append(TxnRecord(TID, h.state()))
    assert _add2(h, 7, MAX_EPOCH - 1) is E.NONE
    asked, _ = _end2(h, 7, MAX_EPOCH - 1, True)  # no id at hand: the node is asked for one
    assert (asked.error, asked.wants_producer_id) == (E.COORDINATOR_LOAD_IN_PROGRESS, True)
    resp, out = _end2(h, 7, MAX_EPOCH - 1, True, fresh=8)
    assert (resp.error, resp.producer_id, resp.producer_epoch) == (E.NONE, 8, 0)
    assert (h.state().producer_id, h.state().producer_epoch, h.state().next_producer_id) == (7, MAX_EPOCH, 8)
    assert out.markers == [c.WriteMarkers(TID, 7, MAX_EPOCH, True, (TP,), 2)]
    # the producer goes on at once with the id it was told, before the rotation is written: it waits
    assert _add2(h, 8, 0) is E.CONCURRENT_TRANSACTIONS
    assert _end2(h, 8, 0, False)[0].error is E.CONCURRENT_TRANSACTIONS
    _complete(h, out)
    v = h.state()
    assert (v.state, v.producer_id, v.producer_epoch, v.previous_producer_id, v.next_producer_id) == (
        S.COMPLETE_COMMIT, 8, 0, 7, -1)
    retry, _ = _end2(h, 7, MAX_EPOCH - 1, True)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, 8, 0)
    assert _add2(h, 8, 0) is E.NONE and _add2(h, 7, MAX_EPOCH - 1) is E.INVALID_PRODUCER_ID_MAPPING


def test_a_version_2_producer_fenced_by_timeout_cannot_pass_for_a_retry(h: Harness) -> None:
    """A timed-out version 2 transaction is aborted two epochs up (the fence and the end's own
    bump): the fenced producer's end is not one below the stored epoch, so it is fenced, not
    answered as a retry of the abort."""
    pid = h.init(timeout_ms=1000).producer_id
    _add2(h, pid, 0)
    out = h.tick(1001)
    assert h.state().state is S.PREPARE_ABORT and h.state().producer_epoch == 2
    _complete(h, out)
    assert _end2(h, pid, 0, False)[0].error is E.PRODUCER_FENCED


def test_the_next_transaction_waits_while_the_last_end_is_completed(h: Harness) -> None:
    """Kafka's pending transition: told its new epoch, the producer may begin, add and end its
    next transaction before the last one's markers are written; it is told to wait, not fenced."""
    pid = h.init().producer_id
    _add2(h, pid, 0)
    _, out = _end2(h, pid, 0, True)
    assert _add2(h, pid, 1) is E.CONCURRENT_TRANSACTIONS
    assert _end2(h, pid, 1, False)[0].error is E.CONCURRENT_TRANSACTIONS
    _complete(h, out)
    assert _add2(h, pid, 1) is E.NONE


def test_a_producer_fenced_in_a_version_1_transaction_cannot_end_as_a_version_2_retry(h: Harness) -> None:
    """A version 1 transaction fenced by a new producer is aborted one epoch up; its zombie's
    EndTxn v5 at the old epoch is one below the stored one, yet not a retry: no end of its bumped
    the epoch. Fenced, not answered with the new producer's epoch."""
    pid = h.init().producer_id
    h.add(pid, 0)
    r, out = h.ask(c.InitProducerId(TID, 60_000, pid, 0, 5000))  # a new producer fences: abort at epoch 1
    assert isinstance(r, c.InitProducerIdResponse) and r.error is E.CONCURRENT_TRANSACTIONS
    _complete(h, out)
    assert h.state().state is S.COMPLETE_ABORT and h.state().producer_epoch == 1
    assert _end2(h, pid, 0, False)[0].error is E.PRODUCER_FENCED


def test_a_producer_fenced_at_the_last_epoch_ends_nothing(h: Harness) -> None:
    h.init(fresh=7)
    h.shard.txns[TID].value = replace(h.state(), producer_epoch=MAX_EPOCH - 2)
    h.log.append(TxnRecord(TID, h.state()))
    assert _add2(h, 7, MAX_EPOCH - 2) is E.NONE
    out = h.tick(60_001)  # timed out: fenced two up, capped at the last epoch
    assert h.state().producer_epoch == MAX_EPOCH
    _complete(h, out)
    for epoch in (MAX_EPOCH - 2, MAX_EPOCH - 1, MAX_EPOCH):
        assert _end2(h, 7, epoch, False)[0].error is E.PRODUCER_FENCED, epoch
    assert h.state().producer_epoch == MAX_EPOCH  # no epoch past the last


def test_a_version_1_transaction_is_written_as_before(h: Harness) -> None:
    pid = h.init().producer_id
    h.add(pid, 0)
    assert h.state().client_version == 0
    err, out = h.end(pid, 0, True)
    assert err is E.NONE and out.markers == [c.WriteMarkers(TID, pid, 0, True, (TP,), 1)]
