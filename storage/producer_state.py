"""Per-partition state of idempotent producers: epoch and the last five batches' sequence ranges.

The checks follow Kafka 3.x (``ProducerAppendInfo.checkSequence``, KIP-360):

* a batch from an older epoch than the producer's current one is rejected
  with INVALID_PRODUCER_EPOCH;
* a batch whose sequence range matches one of the last five batches of the
  same epoch is a duplicate: it is acknowledged with its original offsets and
  not written again;
* a new epoch must start at sequence 0, unless the producer is unknown here
  (its state may have been removed), in which case any sequence is accepted;
  so is any from a producer whose last batch here carried no epoch (-1), as in Kafka;
* within an epoch the first sequence must follow the last one (wrapping from
  Int32.MaxValue to 0), else OUT_OF_ORDER_SEQUENCE_NUMBER;
* a batch under a newer epoch while the producer's transaction is open in
  this partition is INVALID_TXN_STATE: only the marker that ends the open
  transaction moves the epoch on (transactions V2 bump it at every end);
* while a transactional producer is being verified here (KIP-890: its first
  write of a transaction asked the coordinator, ``start_verification``), a
  sequence above the lowest one it was verified with is OUT_OF_ORDER_SEQUENCE_NUMBER
  (a retry after a failed verification cannot slip a later batch in first), and
  a transactions V2 producer with no state here must start at sequence 0. Its
  next transactional batch or marker ends the verification (a V2 marker of the
  verified epoch does not: that is the next transaction starting).

State is rebuilt at start-up from the newest `.snapshot` plus the batches after it (``Log._load``).
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field

import crc32c

from kbroker.protocol.records import NO_SEQUENCE, BatchHeader, InvalidBatch

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
    coordinator_epoch: int = -1   # the transaction coordinator's, from the producer's last marker here

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


@dataclass(slots=True)
class Verification:
    """A producer's transaction verification at this partition (Kafka's VerificationStateEntry): the lowest
    sequence seen while verifying under ``epoch``; a newer epoch starts it again. Leader state only, in memory."""
    started_ms: int
    lowest_sequence: int
    epoch: int
    supports_epoch_bump: bool

    def note(self, sequence: int, epoch: int) -> None:
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch, self.lowest_sequence = epoch, sequence


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}   # producer id -> first offset of its open transaction
        self.verifications: dict[int, Verification] = {}

    def start_verification(self, producer_id: int, sequence: int, epoch: int, supports_epoch_bump: bool,
                           now_ms: int) -> None:
        """A transactional batch about to be verified with its coordinator (its transaction not open here)."""
        verification = self.verifications.get(producer_id)
        if verification is None:
            verification = self.verifications[producer_id] = Verification(now_ms, sequence, epoch,
                                                                           supports_epoch_bump)
        verification.note(sequence, epoch)

    # ------------------------------------------------------------------ transactions
    def track_transaction(self, header: BatchHeader, first_offset: int) -> None:
        """A transactional data batch opens its producer's transaction if none is open."""
        if header.is_transactional and not header.is_control:
            self.ongoing.setdefault(header.producer_id, first_offset)

    def complete_transaction(self, producer_id: int, coordinator_epoch: int) -> int | None:
        """A marker ends the producer's open transaction; returns its first offset (None if none was open).
        The producer keeps the marker's coordinator epoch (``check_marker``)."""
        entry = self.producers.get(producer_id)
        if entry is not None:
            entry.coordinator_epoch = coordinator_epoch
        return self.ongoing.pop(producer_id, None)

    def check_marker(self, producer_id: int, coordinator_epoch: int) -> None:
        """A marker from a transaction coordinator older than the one whose marker this producer last had
        here is TRANSACTION_COORDINATOR_FENCED (a coordinator that lost its partition, writing late), as in
        Kafka; only the leader checks: a follower copies what its leader took."""
        entry = self.producers.get(producer_id)
        if entry is not None and coordinator_epoch < entry.coordinator_epoch:
            raise InvalidBatch("TRANSACTION_COORDINATOR_FENCED",
                               f"marker of coordinator epoch {coordinator_epoch} for producer {producer_id}, "
                               f"which had one of epoch {entry.coordinator_epoch} here")

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing.values()) if self.ongoing else None

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle longer than ``producer.id.expiration.ms`` (never one with an open
        transaction); returns how many went. A forgotten producer's next batch is accepted at any
        sequence, as for a producer never seen (KIP-360)."""
        idle = [pid for pid, e in self.producers.items()
                if pid not in self.ongoing and e.last_timestamp >= 0 and now_ms - e.last_timestamp > expiration_ms]
        for pid in idle:
            del self.producers[pid]
        for pid in [pid for pid, v in self.verifications.items() if now_ms - v.started_ms >= expiration_ms]:
            del self.verifications[pid]   # (a verification that never led to a write)
        return len(idle)

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate an idempotent batch before it is appended.

        Returns the original metadata if the batch is a duplicate; raises
        InvalidBatch for a stale epoch or a sequence gap; None means append it.
        """
        entry = self.producers.get(header.producer_id)
        if entry is not None:
            if header.producer_epoch < entry.epoch:
                raise InvalidBatch("INVALID_PRODUCER_EPOCH",
                                   f"epoch {header.producer_epoch} is older than current epoch {entry.epoch}")
            duplicate = entry.find_duplicate(header)
            if duplicate is not None:
                return duplicate
        if header.base_sequence == NO_SEQUENCE:
            return None
        verification = self.verifications.get(header.producer_id)
        if verification is not None and not header.is_control:
            if verification.supports_epoch_bump and header.base_sequence != 0 and (entry is None or not entry.batches):
                raise InvalidBatch("OUT_OF_ORDER_SEQUENCE_NUMBER",
                                   f"a transactions V2 producer with no state here must start at sequence 0, "
                                   f"got {header.base_sequence}")
            if header.base_sequence > verification.lowest_sequence:
                raise InvalidBatch("OUT_OF_ORDER_SEQUENCE_NUMBER",
                                   f"sequence {header.base_sequence} is past {verification.lowest_sequence}, the "
                                   f"earliest seen while verifying the transaction")
        if entry is None or entry.epoch < 0:
            # Unknown producer (its state may have been removed): any sequence is accepted (KIP-360). Kafka
            # accepts any sequence from a producer whose last batch here carried no epoch, too.
            return None
        if header.producer_epoch != entry.epoch:
            if header.producer_id in self.ongoing and not header.is_control:
                # A transaction under a newer epoch while this partition's marker for the open one is not in:
                # appended, the open transaction's marker would decide it too (the leader verifies first).
                raise InvalidBatch("INVALID_TXN_STATE",
                                   f"epoch {header.producer_epoch} writes while the transaction of epoch "
                                   f"{entry.epoch} is open here")
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
        verification = self.verifications.get(header.producer_id) if header.is_transactional else None
        if verification is not None and not (verification.supports_epoch_bump and header.is_control
                                             and header.producer_epoch == verification.epoch):
            del self.verifications[header.producer_id]

    def clear(self) -> None:
        """Forget every producer, open transaction and verification (the log's replay then rebuilds them)."""
        self.producers.clear()
        self.ongoing.clear()
        self.verifications.clear()


# ---------------------------------------------------------------------- snapshots
# Kafka's ``.snapshot`` layout (ProducerSnapshot v1, which ``kafka-dump-log`` reads): an int16 version, the CRC32C
# of the rest, then the entries, each a producer's epoch, its last batch (last sequence, last offset, offset delta)
# and timestamp, coordinator epoch and open transaction's first offset. Kafka writes an entry per producer, its
# last batch only; kbroker writes one per batch kept, oldest first, so that a restart keeps all five for
# duplicate detection: Kafka's loader keeps the last entry of a producer id, which is what it would have written.
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAP_HEADER = struct.Struct(">hIi")          # version, crc32c of the rest, entry count
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")      # pid, epoch, last seq, last offset, offset delta, timestamp,
#                                               coordinator epoch, open transaction's first offset
_KBROKER_01_VERSION = 2                       # kbroker 0.1's own layout, still read:
_SNAP_PRODUCER_KBROKER_01 = struct.Struct(">qhqqbi")   # pid, epoch, last timestamp, open txn first offset,
_SNAP_BATCH_KBROKER_01 = struct.Struct(">iiqqq")      # batches, coordinator epoch; then each batch's first seq,
#                                                       last seq, first offset, last offset, timestamp


class CorruptSnapshot(Exception):
    pass


def encode_snapshot(state: "ProducerStateManager") -> bytes:
    """Every producer's epoch, kept batches and open transaction, CRC32C-checked, in Kafka's layout."""
    body = bytearray()
    count = 0
    for pid, entry in state.producers.items():
        txn_first = state.ongoing.get(pid, -1)
        last = len(entry.batches) - 1
        for i, b in enumerate(entry.batches):
            body += _SNAP_ENTRY.pack(pid, entry.epoch, b.last_seq, b.last_offset, b.last_offset - b.first_offset,
                                     entry.last_timestamp if i == last else b.timestamp, entry.coordinator_epoch,
                                     txn_first)
        if not entry.batches:
            body += _SNAP_ENTRY.pack(pid, entry.epoch, NO_SEQUENCE, -1, 0, entry.last_timestamp,
                                     entry.coordinator_epoch, txn_first)
        count += max(1, len(entry.batches))
    for pid, first in state.ongoing.items():   # a transaction opened by a producer with no sequence state
        if pid not in state.producers:
            body += _SNAP_ENTRY.pack(pid, -1, NO_SEQUENCE, -1, 0, -1, -1, first)
            count += 1
    payload = struct.pack(">i", count) + bytes(body)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c.crc32c(payload)) + payload


def decode_snapshot(data: bytes, state: "ProducerStateManager") -> None:
    """Load ``data`` into ``state`` (cleared first); raises CorruptSnapshot on a bad version, CRC or length."""
    if len(data) < _SNAP_HEADER.size:
        raise CorruptSnapshot("snapshot too short")
    version, crc, count = _SNAP_HEADER.unpack_from(data)
    if version not in (SNAPSHOT_VERSION, _KBROKER_01_VERSION) or crc32c.crc32c(data[6:]) != crc:
        raise CorruptSnapshot("snapshot version or CRC mismatch")
    state.clear()
    try:
        end = (_decode_entries if version == SNAPSHOT_VERSION else _decode_kbroker_01)(data, count, state)
    except struct.error as exc:
        raise CorruptSnapshot(str(exc)) from None
    if end != len(data):
        raise CorruptSnapshot("trailing bytes in snapshot")


def _decode_entries(data: bytes, count: int, state: "ProducerStateManager") -> int:
    pos = _SNAP_HEADER.size
    for _ in range(count):
        pid, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch, txn_first = \
            _SNAP_ENTRY.unpack_from(data, pos)
        pos += _SNAP_ENTRY.size
        if txn_first >= 0:
            state.ongoing[pid] = txn_first
        if epoch < 0 and last_offset < 0:
            continue
        entry = state.producers.get(pid)
        if entry is None or entry.epoch != epoch:
            entry = state.producers[pid] = ProducerEntry(pid, epoch)
        entry.last_timestamp, entry.coordinator_epoch = timestamp, coordinator_epoch
        if last_offset >= 0:
            first_seq = last_seq - delta if last_seq >= delta else INT32_MAX - (delta - last_seq) + 1
            entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - delta, last_offset, timestamp))
    return pos


def _decode_kbroker_01(data: bytes, count: int, state: "ProducerStateManager") -> int:
    pos = _SNAP_HEADER.size
    for _ in range(count):
        pid, epoch, last_ts, open_first, n, coordinator_epoch = _SNAP_PRODUCER_KBROKER_01.unpack_from(data, pos)
        pos += _SNAP_PRODUCER_KBROKER_01.size
        if open_first >= 0:
            state.ongoing[pid] = open_first
        if epoch < 0 and n == 0:
            continue
        entry = state.producers[pid] = ProducerEntry(pid, epoch, last_timestamp=last_ts,
                                                     coordinator_epoch=coordinator_epoch)
        for _ in range(n):
            entry.batches.append(BatchMetadata(*_SNAP_BATCH_KBROKER_01.unpack_from(data, pos)))
            pos += _SNAP_BATCH_KBROKER_01.size
    return pos
