"""A partition leader's side of transaction version 2 (KIP-890 part 2), on one DataPartition: the
leader adds the partition for a batch (``verify`` with add), a transaction open at an older epoch
is the producer's previous one, a version 2 marker never closes data open at its own epoch (a late
copy of the previous transaction's), and a marker at a verified batch's epoch voids the
verification only when it is a version 1 one."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cluster.data_plane import DataPartition, Err
from replication.data_log import DataLog
from replication.record_batch import ATTR_TRANSACTIONAL, build_batch

PID = 5


def _batch(epoch: int, seq: int) -> bytes:
    return build_batch([(None, b"v%d" % seq)], timestamp=1, producer_id=PID, producer_epoch=epoch,
                       base_sequence=seq, attributes=ATTR_TRANSACTIONAL)


def test_a_version_2_marker_never_closes_data_open_at_its_own_epoch(tmp_path: Path) -> None:
    log = DataLog(str(tmp_path / "p"))
    part = DataPartition("t", 0, str(tmp_path / "p"), log)
    asked: list[tuple[int, int]] = []

    async def add(pid: int, epoch: int) -> int:
        asked.append((pid, epoch))
        return 0

    async def scenario() -> None:
        r = await part.produce(_batch(0, 0), transactional=True, verify=add, version2=True, abortable=True)
        assert r.error is Err.NONE and asked == [(PID, 0)]
        r = await part.produce(_batch(0, 1), transactional=True, verify=add, version2=True, abortable=True)
        assert r.error is Err.NONE and asked == [(PID, 0)]  # open at its epoch: nothing to ask
        bogus = await part.write_marker(PID, 0, True, 1, version=2)  # a version 2 marker is above its data
        assert bogus.error is Err.INVALID_PRODUCER_EPOCH
        assert (await part.write_marker(PID, 1, True, 1, version=2)).error is Err.NONE  # ends T1, epoch 1
        assert not log.txns.is_open(PID)
        r = await part.produce(_batch(1, 0), transactional=True, verify=add, version2=True, abortable=True)
        assert r.error is Err.NONE and asked[-1] == (PID, 1)  # T2 at the bumped epoch: added here
        late = await part.write_marker(PID, 1, True, 1, version=2)  # T1's marker again, late
        assert late.error is Err.INVALID_PRODUCER_EPOCH and log.txns.is_open(PID)
        assert log.txn_open_at(PID, 1) and not log.txn_open_at(PID, 0)

    asyncio.run(scenario())
    log.close()


def test_the_previous_transactions_marker_during_an_add_voids_it_only_at_version_1(tmp_path: Path) -> None:
    """The leader asks the coordinator to add the partition for a batch at epoch e+1; the answer
    waits for the previous transaction (at e) to complete, whose marker (at e+1, version 2)
    reaches the partition meanwhile: the batch is then appended. A version 1 marker at the batch's
    epoch ends the batch's own transaction: the batch is refused."""
    for version, expected in ((2, Err.NONE), (1, Err.TRANSACTION_ABORTABLE)):
        log = DataLog(str(tmp_path / f"v{version}"))
        part = DataPartition("t", 0, str(tmp_path / f"v{version}"), log)

        async def scenario(version: int = version, part: DataPartition = part) -> Err:
            async def add_while_the_marker_lands(pid: int, epoch: int) -> int:
                assert (await part.write_marker(PID, 1, True, 1, version=version)).error is Err.NONE
                return 0

            r = await part.produce(_batch(0, 0), transactional=True, verify=lambda p, e: _ok(), version2=True)
            assert r.error is Err.NONE
            r = await part.produce(_batch(1, 0), transactional=True, verify=add_while_the_marker_lands,
                                   version2=True, abortable=True)
            return r.error

        assert asyncio.run(scenario()) is expected, version
        log.close()


async def _ok() -> int:
    return 0
