"""A transactional id's state (Kafka's TransactionState: ids and names are on the wire and in
the log) and the transitions Kafka allows between them."""

from __future__ import annotations

from enum import IntEnum


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def label(self) -> str:
        """The name DescribeTransactions and ListTransactions use."""
        return _LABELS[self]

    @classmethod
    def from_label(cls, label: str) -> TxnState | None:
        return _BY_LABEL.get(label)


_LABELS = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_LABEL = {v: k for k, v in _LABELS.items()}

S = TxnState
IDLE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})  # no transaction open; may expire
PREPARING = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT})  # decided, markers being written

# The states each state may be entered from (Kafka's TransactionState.validPreviousStates, TV1).
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: IDLE,
    S.ONGOING: IDLE | {S.ONGOING},
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING}) | IDLE,  # version 2: an abort with nothing open bumps the epoch
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: IDLE,
}

# Epochs are int16; at MAX - 1 the coordinator still has one bump left to fence with.
MAX_EPOCH = 32767


def epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_EPOCH - 1
