"""A transactional id's metadata as the coordinator holds it, the markers it sends, and its configuration.

Invariants: the epoch of a producer id only grows, and never reaches Short.MaxValue as a producer's own
(``MAX_EPOCH``: the coordinator keeps that one to fence with); ``pending`` is set only while a transition's
record is being appended.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kbroker.coordinators.transaction.state import IllegalTransactionTransition, TransactionState
from kbroker.protocol.errors import ErrorCode

T = TransactionState
MAX_EPOCH = 32767 - 1   # Kafka keeps Short.MaxValue free


@dataclass
class Marker:
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: list[tuple[str, int]]
    transaction_version: int = 0   # WriteTxnMarkers v2 (KIP-1228): 2 where the end bumped the epoch


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState = T.EMPTY
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    pending: TransactionState | None = None
    client_version: int = 0        # the transaction version the client ended its last transaction with
    next_producer_id: int = -1     # while a version 2 end is prepared with an epoch that ran out

    def transition_to(self, target: TransactionState) -> None:
        if self.state not in target.valid_previous and self.state is not target:
            raise IllegalTransactionTransition(self.transactional_id, self.state, target)
        self.state = target

    def version_2_end_check(self, producer_id: int, epoch: int) -> tuple[ErrorCode, bool]:
        """(error, is a retry) as Kafka checks an EndTxn for a transaction whose last end bumped the epoch: the
        current epoch opens a new end (or, once complete, an abort of a transaction that added nothing);
        while decided, only the epoch it was sent with (one less) is a retry; after an epoch that ran out,
        the old producer id with the last epoch it had is one too."""
        retry_bump = self.producer_epoch == epoch + 1
        retry_overflow = self.last_producer_id == producer_id and epoch == MAX_EPOCH and self.producer_epoch == 0
        if self.producer_id != producer_id and not retry_overflow:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, False
        if self.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT):
            valid = retry_bump
        elif self.state in (T.COMPLETE_COMMIT, T.COMPLETE_ABORT):
            valid = retry_bump or retry_overflow or epoch == self.producer_epoch
        else:
            valid = epoch == self.producer_epoch
        if not valid:
            return ErrorCode.PRODUCER_FENCED, False
        return ErrorCode.NONE, retry_bump or retry_overflow


@dataclass(frozen=True)
class TransactionConfig:
    state_partitions: int = 50
    max_timeout_ms: int = 900000
    id_expiration_ms: int = 604800000

    @classmethod
    def from_broker(cls, config) -> "TransactionConfig":
        return cls(config["transaction.state.log.num.partitions"], config["transaction.max.timeout.ms"],
                   config["transactional.id.expiration.ms"])


def fenced(version_has_producer_fenced: bool) -> ErrorCode:
    """PRODUCER_FENCED where the API version knows it, INVALID_PRODUCER_EPOCH before."""
    return ErrorCode.PRODUCER_FENCED if version_has_producer_fenced else ErrorCode.INVALID_PRODUCER_EPOCH


