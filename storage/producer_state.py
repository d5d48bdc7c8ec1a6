"""Per-partition state of idempotent producers: epoch and the last five batches' sequence ranges.

The checks follow Kafka 3.x (``ProducerAppendInfo.checkSequence``, KIP-360):

* a batch from an older epoch than the producer's current one is rejected
  with INVALID_PRODUCER_EPOCH;
* a batch whose sequence range matches one of the last five batches of the
  same epoch is a duplicate: it is acknowledged with its original offsets and
  not written again;
* a new epoch must start at sequence 0, unless the producer is unknown here
  (its state may have been removed), in which case any sequence is accepted;
* within an epoch the first sequence must follow the last one (wrapping from
  Int32.MaxValue to 0), else OUT_OF_ORDER_SEQUENCE_NUMBER.

State is rebuilt from the log's batch headers at start-up (``load``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from protocol.records import NO_SEQUENCE, BatchHeader, InvalidBatch

BATCHES_KEPT = 5
INT32_MAX = 0x7FFFFFFF


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = -1
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        last_seq = header.last_sequence
        for meta in self.batches:
            if meta.first_seq == header.base_sequence and meta.last_seq == last_seq:
                return meta
        return None


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}   # producer id -> first offset of its open transaction

    # ------------------------------------------------------------------ transactions
    def track_transaction(self, header: BatchHeader, first_offset: int) -> None:
        """A transactional data batch opens its producer's transaction if none is open."""
        if header.is_transactional and not header.is_control:
            self.ongoing.setdefault(header.producer_id, first_offset)

    def complete_transaction(self, producer_id: int) -> int | None:
        """A marker ends the producer's open transaction; returns its first offset (None if none was open)."""
        return self.ongoing.pop(producer_id, None)

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing.values()) if self.ongoing else None

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate an idempotent batch before it is appended.

        Returns the original metadata if the batch is a duplicate; raises
        InvalidBatch for a stale epoch or a sequence gap; None means append it.
        """
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return None  # unknown producer: any sequence is accepted (KIP-360)
        if header.producer_epoch < entry.epoch:
            raise InvalidBatch("INVALID_PRODUCER_EPOCH",
                               f"epoch {header.producer_epoch} is older than current epoch {entry.epoch}")
        duplicate = entry.find_duplicate(header)
        if duplicate is not None:
            return duplicate
        if header.base_sequence == NO_SEQUENCE:
            return None
        if header.producer_epoch != entry.epoch:
            if header.base_sequence != 0:
                raise InvalidBatch("OUT_OF_ORDER_SEQUENCE_NUMBER",
                                   f"new epoch {header.producer_epoch} must start at sequence 0, "
                                   f"got {header.base_sequence}")
            return None
        last = entry.last_seq
        if last == NO_SEQUENCE and header.base_sequence != 0:
            raise InvalidBatch("OUT_OF_ORDER_SEQUENCE_NUMBER",
                               f"expected sequence 0, got {header.base_sequence}")
        if last != NO_SEQUENCE and not in_sequence(last, header.base_sequence):
            raise InvalidBatch("OUT_OF_ORDER_SEQUENCE_NUMBER",
                               f"expected sequence {(last + 1) & INT32_MAX}, got {header.base_sequence}")
        return None

    def update(self, header: BatchHeader, first_offset: int) -> None:
        """Record an appended batch (also used when loading from the log: no checks)."""
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_id)
        if header.producer_epoch != entry.epoch:
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        if header.base_sequence != NO_SEQUENCE and not header.is_control:
            entry.batches.append(BatchMetadata(header.base_sequence, header.last_sequence, first_offset,
                                               first_offset + header.last_offset_delta, header.max_timestamp))
        entry.last_timestamp = header.max_timestamp

    def truncate_and_reload(self, batches) -> None:
        self.producers.clear()
        self.ongoing.clear()
        for header in batches:
            if header.has_producer_id:
                self.update(header, header.base_offset)
