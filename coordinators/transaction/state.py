"""Transaction states, their ids in ``__transaction_state`` and their legal predecessors (Kafka's TransactionState).

    Empty              <- Empty, CompleteCommit, CompleteAbort
    Ongoing            <- Ongoing, Empty, CompleteCommit, CompleteAbort
    PrepareCommit      <- Ongoing
    PrepareAbort       <- Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort
    CompleteCommit     <- PrepareCommit
    CompleteAbort      <- PrepareAbort
    Dead               <- Empty, CompleteCommit, CompleteAbort
    PrepareEpochFence  <- Ongoing

(PrepareAbort from a state with no open transaction: transactions V2 abort
one whose partitions never reached the coordinator, under a bumped epoch.)
PrepareEpochFence is never written: it is the in-memory step of fencing a
producer whose transaction must be aborted with a bumped epoch.
"""

from __future__ import annotations

from enum import Enum


class TransactionState(Enum):
    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def label(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> "TransactionState":
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"unknown transaction state id {state_id}")

    @property
    def valid_previous(self) -> frozenset["TransactionState"]:
        return _VALID_PREVIOUS[self]


T = TransactionState
_VALID_PREVIOUS = {
    T.EMPTY: frozenset({T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT}),
    T.ONGOING: frozenset({T.ONGOING, T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT}),
    T.PREPARE_COMMIT: frozenset({T.ONGOING}),
    T.PREPARE_ABORT: frozenset({T.ONGOING, T.PREPARE_EPOCH_FENCE, T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT}),
    T.COMPLETE_COMMIT: frozenset({T.PREPARE_COMMIT}),
    T.COMPLETE_ABORT: frozenset({T.PREPARE_ABORT}),
    T.DEAD: frozenset({T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT}),
    T.PREPARE_EPOCH_FENCE: frozenset({T.ONGOING}),
}


class IllegalTransactionTransition(Exception):
    def __init__(self, transactional_id: str, current: TransactionState, target: TransactionState) -> None:
        super().__init__(f"transaction {transactional_id!r} cannot move from {current.label} to {target.label}")
