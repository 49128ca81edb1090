"""The transaction runtime's commit gating, epochs and reloads (sans-IO: effects in, effects out)."""

from __future__ import annotations

from transactions import commands as c
from transactions.config import TxnConfig
from transactions.errors import TxnError
from transactions.records import TxnRecord
from transactions.runtime import Append, Effect, Reload, Respond, SendMarkers, TransactionRuntime
from transactions.state import TxnState

E = TxnError
P, EPOCH, NOW = 3, 10, 1_000


def _loaded(config: TxnConfig | None = None) -> TransactionRuntime:
    rt = TransactionRuntime(config)
    assert rt.begin_load(P, EPOCH) == []
    assert rt.complete_load(P, EPOCH, [], NOW) == []
    return rt


def _of(effects: list[Effect], kind: type) -> list:  # type: ignore[type-arg]
    return [e for e in effects if isinstance(e, kind)]


def _init(rt: TransactionRuntime, token: str = "init", tid: str = "t", pid: int = 7) -> list[Effect]:
    return rt.submit(P, c.InitProducerId(tid, 60_000, fresh_producer_id=pid), token, NOW)


def test_a_response_leaves_only_once_its_record_is_committed() -> None:
    rt = _loaded()
    out = _init(rt)
    (append,) = _of(out, Append)
    assert not _of(out, Respond) and append.end_offset == 1 and append.epoch == EPOCH
    assert rt.on_committed(P, EPOCH, 1) == [Respond("init", c.InitProducerIdResponse(E.NONE, 7, 0))]


def test_a_read_waits_behind_an_uncommitted_write_and_not_otherwise() -> None:
    rt = _loaded()
    _init(rt)
    assert rt.submit(P, c.DescribeTransactions(("t",)), "d1", NOW) == []
    released = rt.on_committed(P, EPOCH, 1)
    assert [e.token for e in _of(released, Respond)] == ["init", "d1"]
    (answer,) = _of(rt.submit(P, c.DescribeTransactions(("t",)), "d2", NOW), Respond)
    assert answer.token == "d2"


def _committing(rt: TransactionRuntime, effects: list[Effect], log: list[TxnRecord]) -> list[Effect]:
    """Commit every Append as it leaves (and the ones that leave then); their records go to ``log``."""
    out: list[Effect] = []
    todo = list(effects)
    while todo:
        effect = todo.pop(0)
        out.append(effect)
        if isinstance(effect, Append):
            log += effect.records
            todo += rt.on_committed(P, EPOCH, effect.end_offset)
    return out


def test_records_made_while_an_append_is_in_flight_leave_together_in_order() -> None:
    rt = _loaded()
    (first,) = _of(_init(rt), Append)
    assert _of(rt.submit(P, c.AddPartitions("t", 7, 0, (("a", 0),)), "a1", NOW), Append) == []
    assert _of(rt.submit(P, c.AddPartitions("t", 7, 0, (("b", 0),)), "a2", NOW), Append) == []
    released = rt.on_committed(P, EPOCH, first.end_offset)
    (second,) = _of(released, Append)
    assert second.end_offset == 3 and [sorted(r.value.partitions) for r in second.records] == [
        [("a", 0)], [("a", 0), ("b", 0)]]
    assert [e.token for e in _of(released, Respond)] == ["init"]  # the adds wait for their records
    assert [e.token for e in _of(rt.on_committed(P, EPOCH, 3), Respond)] == ["a1", "a2"]


def test_markers_leave_after_the_decision_commits_and_completion_is_written_after_them() -> None:
    rt = _loaded()
    log: list[TxnRecord] = []
    _committing(rt, [*_init(rt), *rt.submit(P, c.AddPartitions("t", 7, 0, (("out", 0),)), "add", NOW)], log)
    out = rt.submit(P, c.EndTxn("t", 7, 0, True), "end", NOW)
    assert _of(out, Append)[0].records[0].value.state is TxnState.PREPARE_COMMIT
    assert not _of(out, SendMarkers)
    released = rt.on_committed(P, EPOCH, 3)
    (send,) = _of(released, SendMarkers)
    assert send == SendMarkers(P, EPOCH, c.WriteMarkers("t", 7, 0, True, (("out", 0),)))
    assert Respond("end", c.EndTxnResponse(E.NONE)) in released
    (complete,) = _of(rt.markers_written(P, EPOCH, send.markers, NOW), Append)
    assert complete.records[0].value.state is TxnState.COMPLETE_COMMIT
    assert rt.markers_written(P, EPOCH - 1, send.markers, NOW) == []  # a deposed owner's notice


def test_a_failed_append_fails_the_waiters_and_reloads_from_the_log() -> None:
    rt = _loaded()
    out = _init(rt)
    log = list(_of(out, Append)[0].records)
    rt.on_committed(P, EPOCH, 1)
    rt.submit(P, c.AddPartitions("t", 7, 0, (("out", 0),)), "add", NOW)
    failed = rt.on_append_failed(P, EPOCH, E.NOT_COORDINATOR)
    assert failed == [Respond("add", c.AddPartitionsResponse({("out", 0): E.NOT_COORDINATOR})), Reload(P, EPOCH)]
    assert rt.submit(P, c.DescribeTransactions(("t",)), "d", NOW) == [
        Respond("d", c.DescribeTransactionsResponse((c.DescribedTransaction("t", E.COORDINATOR_LOAD_IN_PROGRESS),)))]
    rt.complete_load(P, EPOCH, log, NOW)
    shard = rt.shard(P)
    assert shard is not None and shard.txns["t"].value.state is TxnState.EMPTY


def test_a_new_owner_resumes_the_markers_of_a_decided_transaction() -> None:
    rt = _loaded()
    log: list[TxnRecord] = []
    _committing(rt, _init(rt), log)
    _committing(rt, rt.submit(P, c.AddPartitions("t", 7, 0, (("o", 1),)), "a", NOW), log)
    _committing(rt, _of(rt.submit(P, c.EndTxn("t", 7, 0, False), "e", NOW), Append), log)  # (no markers sent)
    other = TransactionRuntime()
    other.begin_load(P, EPOCH + 1)
    assert other.complete_load(P, EPOCH + 1, log, NOW) == [
        SendMarkers(P, EPOCH + 1, c.WriteMarkers("t", 7, 0, False, (("o", 1),)))]


def test_unowned_and_loading_partitions_answer_with_kafkas_errors() -> None:
    rt = TransactionRuntime()
    assert _init(rt) == [Respond("init", c.InitProducerIdResponse(E.NOT_COORDINATOR))]
    rt.begin_load(P, EPOCH)
    assert _init(rt) == [Respond("init", c.InitProducerIdResponse(E.COORDINATOR_LOAD_IN_PROGRESS))]
    assert rt.loading()


def test_stale_epochs_are_ignored_and_an_unload_fails_the_waiters() -> None:
    rt = _loaded()
    _init(rt)
    assert rt.begin_load(P, EPOCH - 1) == []
    assert rt.on_committed(P, EPOCH - 1, 1) == []
    assert rt.unload(P, EPOCH - 1) == []
    assert rt.unload(P, EPOCH) == [Respond("init", c.InitProducerIdResponse(E.NOT_COORDINATOR))]
    assert rt.shard(P) is None


def test_the_transaction_timeout_fires_through_advance() -> None:
    rt = _loaded()
    log: list[TxnRecord] = []
    _committing(rt, rt.submit(P, c.InitProducerId("t", 100, fresh_producer_id=7), "i", NOW), log)
    _committing(rt, rt.submit(P, c.AddPartitions("t", 7, 0, (("o", 0),)), "a", NOW), log)
    assert rt.next_deadline() == NOW + 101
    assert rt.advance(NOW + 100) == []
    out = rt.advance(NOW + 101)
    (append,) = _of(out, Append)
    assert append.records[0].value is not None and append.records[0].value.state is TxnState.PREPARE_ABORT
    assert _of(rt.on_committed(P, EPOCH, 3), SendMarkers)

