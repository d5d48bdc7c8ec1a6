"""The replication side of a Log: copying the leader's batches, truncating, leader epochs.

Mixed into ``Log`` so that log.py keeps the leader's append path and this
module what only a replicated partition needs.

Invariants:
* a follower's log is a prefix-copy of its leader's: batches are appended
  byte for byte with the leader's offsets and leader epochs;
* truncation always lands on a batch boundary, and everything derived from
  the cut tail (indexes, producer state, aborted-transaction index, epoch
  cache, high watermark, recovery point) is cut with it.
"""

from __future__ import annotations

import glob
import os

import structlog

from kbroker.protocol.records import InvalidBatch, split_batches, verify_crc
from kbroker.storage.leader_epoch import LeaderEpochFileCache
from kbroker.storage.producer_state import SNAPSHOT_SUFFIX
from kbroker.storage.segment import LogSegment

log = structlog.get_logger("storage.replica_log")


class ReplicaLogMixin:
    """Needs the Log's segments, offsets, producer state and ``_rebuild_producer_state``."""

    def _load_epoch_cache(self) -> None:
        """Open ``leader-epoch-checkpoint``; a log written before it existed gets it from the batches.

        The rebuilt file is not synced: a restart may rebuild tens of thousands of them (one fsync each
        took 20 s of a 50,000-partition start), and one that a crash keeps from the disk is rebuilt again."""
        self.leader_epoch_cache = LeaderEpochFileCache(self.directory)
        cache = self.leader_epoch_cache
        if not cache.exists and self.log_end_offset > self.log_start_offset:
            for segment in self.segments:
                for _, header in segment.iter_headers(0):
                    cache.assign(header.partition_leader_epoch, header.base_offset, save=False)
            cache._save(durable=False)
        cache.truncate_from_end(self.log_end_offset)

    def append_as_follower(self, records) -> int:
        """Append the leader's batches unchanged; returns how many records were appended.

        ``records`` holds whole batches (a fetch response ends at a batch
        boundary). Offsets must move forward: a batch below the log end
        offset means the caller skipped truncation, and is refused.
        """
        data = memoryview(records)
        count = 0
        now_ms = self._now_ms()
        for position, header in split_batches(data):
            if position + header.size > len(data):
                break   # a partial batch at the end of a size-limited response: fetched again next time
            if not verify_crc(data, position, header):
                raise InvalidBatch("CORRUPT_MESSAGE", f"batch at offset {header.base_offset} fails its CRC")
            if header.base_offset < self.log_end_offset:
                raise InvalidBatch("UNKNOWN_SERVER_ERROR",
                                   f"batch at {header.base_offset} is below the log end {self.log_end_offset}")
            batch = data[position:position + header.size]
            segment = self._maybe_roll(header.size, now_ms)
            segment.append(header.last_offset, header.max_timestamp, [batch])
            self.log_end_offset = header.last_offset + 1
            self.leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
            if header.has_producer_id:
                self.producer_state.update(header, header.base_offset)
                if header.is_transactional:
                    self._track_transaction(segment, header, header.base_offset, lambda b=batch: b)
            count += header.records_count
        if count:
            self._after_append(count, now_ms)
        return count

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch at or after ``offset`` (from the batch holding it); True if anything went."""
        if offset >= self.log_end_offset:
            return False
        if offset <= self.segments[0].base_offset:
            self.truncate_fully_and_start_at(max(offset, self.log_start_offset) if offset > 0 else 0)
            return True
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            self.segments.pop().delete()
        segment = self.segments[-1]
        found = segment.find_batch(offset)
        if found is not None:
            position, header = found
            os.ftruncate(segment.fileno(), position)
            segment.size = position
            segment.recover()   # indexes and timestamps of what is left
            end = header.base_offset
        else:
            end = offset   # the cut fell between segments: everything left lies below it
        self._after_truncation(end)
        log.info("log_truncated", topic=self.topic, partition=self.partition, offset=end)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and start empty at ``offset`` (a follower far behind its leader's log start)."""
        for segment in self.segments:
            segment.delete()
        self.segments = [LogSegment(self.directory, offset, self.config.index_interval_bytes, self._now_ms())]
        self.log_start_offset = offset
        self.leader_epoch_cache.clear_and_flush()
        self._after_truncation(offset)
        log.info("log_truncated_fully", topic=self.topic, partition=self.partition, offset=offset)

    def _after_truncation(self, end: int) -> None:
        self.segments_changed += 1
        self.log_end_offset = end
        self.high_watermark = min(self.high_watermark, end)
        self.recovery_point = min(self.recovery_point, end)
        self.leader_epoch_cache.truncate_from_end(end)
        for path in glob.glob(os.path.join(self.directory, "*" + SNAPSHOT_SUFFIX)):
            if int(os.path.basename(path)[:20]) > end:
                os.unlink(path)
        self.producer_state.clear()
        self._rebuild_producer_state({})
