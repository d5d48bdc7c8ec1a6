"""Appending to and replaying an internal topic (``__consumer_offsets``, later ``__transaction_state``).

Coordinators write (key, value) records; this turns them into one record
batch per call and appends it through the replica manager with acks=all, as
Kafka's coordinators do, so an acknowledged change is as durable as any
acks=all produce. Replay reads the partition's log back, record by record,
control batches skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.records import CONTROL_COMMIT, build_batch, control_type, iter_records


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One record read back; ``marker`` is True/False (commit/abort) for a transaction marker."""
    key: bytes | None
    value: bytes | None
    producer_id: int = -1
    transactional: bool = False
    marker: bool | None = None


class InternalTopicStore:
    def __init__(self, replica_manager, topic: str, clock, compression: int = 0) -> None:
        """``compression``: the codec of every batch written (``offsets.topic.compression.codec`` for
        ``__consumer_offsets``, as Kafka's group coordinator compresses its writes)."""
        self.replica_manager = replica_manager
        self.topic = topic
        self.clock = clock
        self.compression = compression

    def append(self, partition: int, entries: list[tuple[bytes, bytes | None]], *, producer_id: int = -1,
               producer_epoch: int = -1) -> ErrorCode:
        """Append one batch; with a producer id it is transactional (TxnOffsetCommit's pending offsets)."""
        if not entries:
            return ErrorCode.NONE
        batch = build_batch([(key, value, []) for key, value in entries], timestamp_ms=int(self.clock() * 1000),
                            producer_id=producer_id, producer_epoch=producer_epoch,
                            transactional=producer_id >= 0, compression=self.compression)
        result = self.replica_manager.append_records(self.topic, partition, memoryview(batch), -1,
                                                    from_coordinator=True)
        if result.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return ErrorCode.NOT_COORDINATOR      # the partition moved (or is gone): client looks again
        if result.error in (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if result.error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return result.error

    def records(self, partition: int) -> Iterator[StoredRecord]:
        """Every record to the log end, as Kafka's coordinators load: a leader that just took over may not
        have moved its high watermark up yet, but everything acknowledged is below its log end."""
        found = self.replica_manager.get(self.topic, partition)
        if found is None:
            return
        for header, data in found.log.iter_batches(found.log.log_start_offset, found.log.log_end_offset):
            if header.is_control:
                yield StoredRecord(None, None, header.producer_id, True, control_type(data) == CONTROL_COMMIT)
                continue
            for record in iter_records(data):
                if record.key is not None:
                    yield StoredRecord(record.key, record.value, header.producer_id, header.is_transactional)
