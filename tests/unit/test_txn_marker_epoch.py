"""The coordinator epoch the transaction coordinator's markers carry."""

from __future__ import annotations

from cluster.txn_driver import marker_epoch
from replication.raft.settings import EPOCH_STRIDE


def test_markers_carry_a_coordinator_epoch_that_fits_kafkas_int32() -> None:
    assert marker_epoch(5 * EPOCH_STRIDE + 3) == 5  # the Raft term: a re-fence keeps it
    assert marker_epoch(3000 * EPOCH_STRIDE) == 3000  # past 2**31 as an epoch, still an int32 term
    assert marker_epoch(1) == 0 and marker_epoch(1 << 62) == (1 << 31) - 1
