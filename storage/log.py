"""Log: the segmented, durable log of one partition.

Invariants:
* segments are ordered by base offset and do not overlap; only the last
  (active) one is appended to;
* ``log_end_offset`` is the offset the next appended record gets;
  ``log_start_offset`` <= every readable offset < ``log_end_offset``;
* ``high_watermark`` <= ``log_end_offset``: the replica manager moves it
  (on a single broker it follows every append); readers outside replication
  see nothing at or above it;
* an append's bytes reach the file descriptor before the call returns, so
  every acknowledged record survives a ``kill -9`` (the page cache survives).
"""

from __future__ import annotations

import glob
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import structlog

from kbroker.protocol.records import BatchHeader, marker_coordinator_epoch, patch_base_offset
from kbroker.storage.log_config import LogConfig
from kbroker.storage.producer_log import ProducerLogMixin
from kbroker.storage.producer_state import ProducerStateManager
from kbroker.storage.replica_log import ReplicaLogMixin
from kbroker.storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment, segment_name

log = structlog.get_logger("storage.log")
# One thread fsyncs rolled segments so that a roll never stalls the appends behind it.
_FLUSHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="segment-flusher")
_HEAD_PATCH_SIZE = 16  # base_offset(8) + batch_length(4) + partition_leader_epoch(4)


@dataclass(slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int       # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool = False


@dataclass(slots=True)
class FetchSlice:
    """Bytes of a log file that answer a fetch: ``length`` bytes of ``segment`` at ``position``, whole batches.
    ``span`` (at least ``length``) is how far Kafka's read would have reached: it ends where the fetch's bounds
    fall, inside a batch if need be (clients drop the part), and bounds the aborted transactions it lists there."""

    segment: LogSegment
    position: int
    length: int
    span: int

    def fileno(self) -> int:
        return self.segment.fd


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class Log(ProducerLogMixin, ReplicaLogMixin):
    # Assignments of any log's config, process-wide: a change here has the log manager's lists of the logs its
    # periodic passes walk (compacted, flushed by time) made anew (storage/logs.py)
    config_changes = 0

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._config = config
        Log.config_changes += 1

    def __init__(self, directory: str, topic: str, partition: int, config: LogConfig, *,
                 recovery_point: int = 0, log_start_offset: int = 0, high_watermark: int = 0,
                 clean_shutdown: bool = False, clock=time.time) -> None:
        self.directory = directory
        self._parent_of, self._parent = None, ""   # (parent_dir's: the folder it was found for, and the log dir)
        self.topic = topic
        self.partition = partition
        self._config = config   # (not a change: a new log is tested as it joins the log manager's logs)
        self.clock = clock
        self.producer_state = ProducerStateManager()
        self.segments: list[LogSegment] = []
        self._pending_deletes: list[tuple[float, LogSegment]] = []
        # Bumped whenever a segment other than the active one goes, is cut or is replaced, and when the log
        # closes: a cleaner that paused between slices of its work gives up if this moved meanwhile.
        self.segments_changed = 0
        self.unflushed_messages = 0
        self.last_flush_ms = self._now_ms()
        os.makedirs(directory, exist_ok=True)
        self._load(recovery_point, log_start_offset, clean_shutdown)
        self._load_epoch_cache()
        self.recovery_point = min(recovery_point, self.log_end_offset)
        self.high_watermark = min(max(high_watermark, self.log_start_offset), self.log_end_offset)

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    @property
    def parent_dir(self) -> str:
        """The log dir (one of ``log.dirs``) this partition's folder is in."""
        # Kept while the folder is the same (a move assigns ``directory``): the periodic checkpoint asks it of
        # every log. Interned: every log of a dir shares the one string.
        if self._parent_of is not self.directory:
            self._parent_of, self._parent = self.directory, sys.intern(os.path.dirname(self.directory))
        return self._parent

    # ------------------------------------------------------------------ loading and recovery
    def _load(self, recovery_point: int, log_start_offset: int, clean_shutdown: bool) -> None:
        """Open the segments; after an unclean stop, recover those past the recovery point.

        After a clean shutdown (everything flushed, indexes trimmed) only
        missing or damaged indexes are rebuilt, as Kafka skips recovery then.
        """
        # One listing of the folder (not a glob per kind of file: at 50,000 partitions those were a third of
        # a restart).
        names = os.listdir(self.directory)
        for stray in names:   # a cleaner pass that never reached its swap: the old segments are intact
            if stray.endswith(".tmp") or stray.endswith(LOG_SUFFIX + ".cleaned"):
                os.unlink(os.path.join(self.directory, stray))
        swaps = sorted(name for name in names if name.endswith(LOG_SUFFIX + ".swap"))
        for swap in swaps:
            self._complete_swap(os.path.join(self.directory, swap))
        if swaps:
            names = os.listdir(self.directory)
        bases = sorted(int(name[:-len(LOG_SUFFIX)]) for name in names if name.endswith(LOG_SUFFIX))
        now_ms = self._now_ms()   # segment ages run on the log's clock, not the wall clock
        for base in bases:
            self.segments.append(LogSegment(self.directory, base, self.config.index_interval_bytes, now_ms))
        if not self.segments:
            self.segments.append(LogSegment(self.directory, log_start_offset, self.config.index_interval_bytes,
                                            now_ms))
        scanned: dict[int, list[tuple[int, BatchHeader]]] = {}
        for i, segment in enumerate(self.segments):
            is_last = i + 1 == len(self.segments)
            past_recovery_point = not clean_shutdown and (is_last or self.segments[i + 1].base_offset > recovery_point)
            needs_recovery = (segment.indexes_missing or past_recovery_point
                              or not segment.offset_index.is_sane(segment.size))
            before = segment.size
            if needs_recovery:
                scanned[i] = segment.recover()
            elif is_last:
                scanned[i] = list(segment.iter_headers(0))
            if segment.size != before:
                log.warning("log_tail_truncated", topic=self.topic, partition=self.partition,
                            segment=segment.base_offset, bytes=before - segment.size)
                # Everything after a corrupt batch is unreadable: drop later segments.
                for later in self.segments[i + 1:]:
                    later.delete()
                del self.segments[i + 1:]
                break
        last_index = len(self.segments) - 1
        if last_index not in scanned:
            scanned[last_index] = list(self.segments[last_index].iter_headers(0))
        tail = scanned[last_index]
        last = tail[-1][1].next_offset if tail else self.segments[-1].base_offset
        self.log_end_offset = max(last, self.segments[-1].base_offset)
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        self._rebuild_producer_state(scanned)

    def _complete_swap(self, swap_path: str) -> None:
        """Finish a cleaner swap cut short by a crash: the fsynced ``.swap`` replaces the segments it covers."""
        base = int(os.path.basename(swap_path)[:20])
        last = base
        with open(swap_path, "rb") as f:
            data = f.read()
        position = 0
        while position + 61 <= len(data):
            header = BatchHeader.parse(data, position)
            if header.batch_length <= 0:
                break
            last = header.last_offset
            position += header.size
        for path in glob.glob(os.path.join(self.directory, "*" + LOG_SUFFIX)):
            replaced = int(os.path.basename(path)[:-len(LOG_SUFFIX)])
            if base <= replaced <= last:
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                    try:
                        os.unlink(os.path.join(self.directory, segment_name(replaced) + suffix))
                    except FileNotFoundError:
                        pass
        os.rename(swap_path, os.path.join(self.directory, segment_name(base) + LOG_SUFFIX))
        log.warning("cleaner_swap_completed", topic=self.topic, partition=self.partition, base_offset=base)

    def replace_segments(self, old: list[LogSegment], swap_path: str,
                         batches: list[tuple[int, int, int, int]]) -> LogSegment:
        """Put the cleaned segment at ``swap_path`` in place of ``old`` (consecutive, not the active one).

        Old files are unlinked first and their descriptors closed later (a
        fetch may still be sending from them); the swap is renamed last, so a
        crash at any point leaves either the old segments or a ``.swap`` that
        ``_load`` completes. ``batches``: (position, size, last offset, max
        timestamp) of every batch in the swap, as its writer knows them, to
        index it without reading it back.
        """
        self.segments_changed += 1
        base = old[0].base_offset
        position = self.segments.index(old[0])
        for segment in old:
            self.segments.remove(segment)
            segment.unlink_files()
            self._pending_deletes.append((self._now_ms() + self.config.file_delete_delay_ms, segment))
        os.rename(swap_path, os.path.join(self.directory, segment_name(base) + LOG_SUFFIX))
        fresh = LogSegment(self.directory, base, self.config.index_interval_bytes, old[0].created_ms)
        fresh.index_written(batches)
        fresh.txn_index.reset()
        for segment in old:   # aborted transactions stay known to read_committed fetches
            for entry in segment.txn_index.entries:
                fresh.txn_index.append(entry)
        fresh.flush()
        self.segments.insert(position, fresh)
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return fresh

    # ------------------------------------------------------------------ appending
    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    def _maybe_roll(self, incoming: int, now_ms: int) -> LogSegment:
        segment = self.active_segment
        if segment.size == 0:
            return segment
        too_big = segment.size + incoming > self.config.segment_bytes
        first = segment.first_batch_timestamp if segment.first_batch_timestamp is not None else segment.created_ms
        if segment.roll_jitter_ms is None:   # (Kafka's randomSegmentJitter: once per segment, below segment.ms)
            jitter = min(self.config.segment_jitter_ms, self.config.segment_ms)
            segment.roll_jitter_ms = random.randrange(jitter) if jitter > 0 else 0
        roll_ms = self.config.segment_ms - segment.roll_jitter_ms
        too_old = now_ms - segment.created_ms > roll_ms and now_ms - first > roll_ms
        index_full = len(segment.offset_index) * 8 >= self.config.segment_index_bytes
        if too_big or too_old or index_full:
            return self.roll(now_ms)
        return segment

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset.

        The finished segment is fsynced in the background, as Kafka does on
        roll, and the recovery point moves past it once that is done, so a
        restart after a crash need not rescan it.
        """
        if self.active_segment.size == 0:
            return self.active_segment
        finished = self.active_segment
        finished.seal_time_index()
        segment = LogSegment(self.directory, self.log_end_offset, self.config.index_interval_bytes,
                             created_ms=self._now_ms() if now_ms is None else now_ms)
        self.segments.append(segment)
        self.take_snapshot()   # at the roll, as Kafka: recovery then replays only the new segment
        _FLUSHER.submit(self._flush_rolled, finished, segment.base_offset)
        log.info("segment_rolled", topic=self.topic, partition=self.partition, base_offset=segment.base_offset)
        return segment

    def append_as_leader(self, records: memoryview | bytes, header: BatchHeader, leader_epoch: int) -> AppendInfo:
        """Append one validated batch, assigning its offsets; checks idempotent producer state first.

        ``records`` stays untouched: the 16 bytes that change (base offset,
        length, leader epoch) are written from a fresh buffer and the rest of
        the batch straight from the received frame.
        """
        if header.is_control and header.has_producer_id:
            self.producer_state.check_marker(header.producer_id, marker_coordinator_epoch(records))
        elif header.has_producer_id:
            duplicate = self.producer_state.check(header)
            if duplicate is not None:
                # Acknowledged without a write: rare (a retry whose first answer was lost), and what an
                # acknowledged write that is not in the log would look like, so it is said with where it was.
                log.info("produce_duplicate_acknowledged", topic=self.topic, partition=self.partition,
                         producer_id=header.producer_id, epoch=header.producer_epoch, sequence=header.base_sequence,
                         first_offset=duplicate.first_offset, log_end_offset=self.log_end_offset)
                return AppendInfo(duplicate.first_offset, duplicate.last_offset, -1,
                                  self.log_start_offset, duplicate=True)
            if header.base_sequence > 0 and header.producer_id not in self.producer_state.producers:
                # (KIP-360: a producer this log has no state for is taken at any sequence; rare, and said)
                log.info("producer_unknown_sequence_taken", topic=self.topic, partition=self.partition,
                         producer_id=header.producer_id, epoch=header.producer_epoch, sequence=header.base_sequence,
                         log_end_offset=self.log_end_offset)
        now_ms = self._now_ms()
        segment = self._maybe_roll(len(records), now_ms)
        first_offset = self.log_end_offset
        if leader_epoch > self.leader_epoch_cache.latest_epoch:
            self.leader_epoch_cache.assign(leader_epoch, first_offset)
        head = bytearray(records[:_HEAD_PATCH_SIZE])
        patch_base_offset(head, 0, first_offset, leader_epoch)
        last_offset = first_offset + header.last_offset_delta
        append_time = -1
        if self.config.message_timestamp_type == "LogAppendTime":
            append_time = now_ms
            buffers = [_with_log_append_time(head, records, now_ms)]
            max_ts = now_ms
        else:
            buffers = [head, records[_HEAD_PATCH_SIZE:]]
            max_ts = header.max_timestamp
        segment.append(last_offset, max_ts, buffers)
        self.log_end_offset = last_offset + 1
        if header.has_producer_id:
            self.producer_state.update(header, first_offset)
            if header.is_transactional:
                self._track_transaction(segment, header, first_offset, lambda: records)
        self._after_append(header.records_count, now_ms)
        return AppendInfo(first_offset, last_offset, append_time, self.log_start_offset)

    def _after_append(self, count: int, now_ms: int) -> None:
        self.unflushed_messages += count
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()

    def _flush_rolled(self, segment: LogSegment, end_offset: int) -> None:
        """Runs on the flusher thread: only fsyncs and raises the recovery point (an int store)."""
        try:
            segment.flush_off_thread()
        except OSError:   # closed by retention or deletion meanwhile: nothing left to protect
            return
        if end_offset > self.recovery_point and end_offset <= self.log_end_offset:
            self.recovery_point = end_offset

    def _segment_end(self, i: int) -> int:
        """The offset just past segment ``i``: the next segment's base, or the log end offset."""
        return self.segments[i + 1].base_offset if i + 1 < len(self.segments) else self.log_end_offset

    def flush(self) -> None:
        """fsync the segments written since the last flush and advance the recovery point."""
        for i, segment in enumerate(self.segments):
            if self._segment_end(i) > self.recovery_point or segment is self.active_segment:
                segment.flush()
        self.recovery_point = self.log_end_offset
        self.unflushed_messages = 0
        self.last_flush_ms = self._now_ms()

    def maybe_flush_by_time(self) -> None:
        if self.unflushed_messages and self._now_ms() - self.last_flush_ms >= self.config.flush_ms:
            self.flush()

    # ------------------------------------------------------------------ reading
    def _segment_for(self, offset: int) -> int:
        lo, hi = 0, len(self.segments) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.segments[mid].base_offset <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def read(self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool) -> FetchSlice | None:
        """The bytes for a fetch at ``offset``, not past ``max_offset`` (HW, LSO or log end).

        Raises OffsetOutOfRange when ``offset`` is outside [log start, log end].
        """
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(offset, self.log_start_offset, self.log_end_offset)
        if offset >= max_offset:
            return None
        i = self._segment_for(offset)
        while i < len(self.segments):
            segment = self.segments[i]
            # Only the segment holding max_offset needs a lookup; any earlier one is readable whole.
            max_position = segment.size if max_offset >= self._segment_end(i) else segment.position_of(max_offset)
            found = segment.read(offset, max_bytes, max_position, min_one_batch)
            if found is not None:
                return FetchSlice(segment, found[0], found[1],
                                  max(found[1], min(max_bytes, max_position - found[0])))
            i += 1
        return None

    def iter_batches(self, start_offset: int = 0, end_offset: int | None = None):
        """(header, bytes) of every whole batch from the one holding ``start_offset`` up to ``end_offset``.

        For replaying internal topics and for the cleaner: reads each segment in
        one pass, batch by batch, so memory stays at one segment at most.
        """
        end = self.log_end_offset if end_offset is None else end_offset
        for i in range(self._segment_for(max(start_offset, self.log_start_offset)), len(self.segments)):
            segment = self.segments[i]
            if segment.base_offset >= end:
                return
            data = os.pread(segment.fileno(), segment.size, 0)
            for position, header in segment.iter_headers(0):
                if header.base_offset >= end:
                    return
                if header.last_offset >= start_offset:
                    yield header, memoryview(data)[position:position + header.size]

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= ``timestamp``."""
        for segment in self.segments:
            if segment.max_timestamp < timestamp and segment is not self.active_segment:
                continue
            found = segment.offset_for_timestamp(timestamp, self.log_start_offset)
            if found is not None:
                return found
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        best = None
        for segment in self.segments:
            if segment.size and (best is None or segment.max_timestamp > best[1]):
                found = segment.max_timestamp_offset()
                if found and (best is None or found[1] > best[1]):
                    best = found
        return best

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # ------------------------------------------------------------------ retention
    def delete_old_segments(self) -> int:
        """Apply time and size retention (delete policy); returns the number of segments deleted.

        Segments go from the oldest while each is past retention and wholly below the high watermark. The
        active segment is one of them when its data is (as in Kafka: a topic whose every record is older than
        retention.ms ends empty): a new active segment is rolled at the log end first, so the log start offset
        moves to the log end and the log keeps an active segment. An empty active segment never goes.
        """
        if "delete" not in self.config.cleanup_policy:
            return 0
        now_ms = self._now_ms()
        deletable: list[LogSegment] = []
        total = self.size_in_bytes
        segments = self.segments
        for i, segment in enumerate(segments):
            if self._segment_end(i) > self.high_watermark or (segment is self.active_segment and segment.size == 0):
                break
            expired = 0 <= self.config.retention_ms < now_ms - segment.largest_timestamp()
            oversized = 0 <= self.config.retention_bytes <= total - segment.size
            if not (expired or oversized):
                break
            deletable.append(segment)
            total -= segment.size
        if len(deletable) == len(segments):
            self.roll(now_ms)
        for segment in deletable:
            self._delete_segment(segment, reason="retention")
        if deletable:
            self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self._close_deleted(now_ms)
        return len(deletable)

    def advance_log_start_offset(self, offset: int) -> int:
        """DeleteRecords (or a follower taking its leader's): nothing below ``offset`` is readable any more, and
        the segments wholly below it go. Never moves backwards or past the log end; returns the log start."""
        offset = min(offset, self.log_end_offset)
        if offset <= self.log_start_offset:
            return self.log_start_offset
        self.log_start_offset = offset
        while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
            self._delete_segment(self.segments[0], reason="log start offset")
        self.high_watermark = max(self.high_watermark, offset)
        return offset

    def _delete_segment(self, segment: LogSegment, reason: str) -> None:
        """Unlink now, close later: a fetch response may still be sending from the open file."""
        self.segments_changed += 1
        self.segments.remove(segment)
        segment.unlink_files()
        self._pending_deletes.append((self._now_ms() + self.config.file_delete_delay_ms, segment))
        log.info("segment_deleted", topic=self.topic, partition=self.partition,
                 base_offset=segment.base_offset, reason=reason)

    def _close_deleted(self, now_ms: int) -> None:
        keep = []
        for due, segment in self._pending_deletes:
            if due <= now_ms:
                segment.close()
            else:
                keep.append((due, segment))
        self._pending_deletes = keep

    # ------------------------------------------------------------------ lifecycle
    def close(self, durable: bool = True) -> None:
        """``durable=False``: nothing is fsynced here; the caller syncs the file system once for every log it
        closes (``LogManager.shutdown``)."""
        self.segments_changed += 1
        self.active_segment.seal_time_index()
        if durable:
            for segment in self.segments:
                segment.flush()
        self.take_snapshot(durable, unless_current=True)   # the next start-up reads no batch headers for it
        cache = self.leader_epoch_cache
        if not cache.exists and cache.entries and self.log_end_offset > self.log_start_offset:
            cache._save(durable)   # (kept in memory since the partition was made: ReplicaManager.make_leader)
        for segment in self.segments:
            segment.close()
        for _, segment in self._pending_deletes:
            segment.close()

    def delete(self) -> None:
        import shutil

        self.segments_changed += 1
        for segment in self.segments:
            segment.close()
        for _, segment in self._pending_deletes:
            segment.close()
        shutil.rmtree(self.directory, ignore_errors=True)


class OffsetOutOfRange(Exception):
    def __init__(self, offset: int, start: int, end: int) -> None:
        super().__init__(f"offset {offset} is outside [{start}, {end}]")
        self.offset, self.start, self.end = offset, start, end


def _with_log_append_time(head: bytearray, records, now_ms: int) -> bytes:
    """The batch with max_timestamp set and the LogAppendTime attribute: the CRC is recomputed."""
    import struct

    import crc32c

    from kbroker.protocol.records import ATTRIBUTES_OFFSET, CRC_OFFSET, TIMESTAMP_TYPE_BIT

    batch = bytearray(head) + records[_HEAD_PATCH_SIZE:]
    attributes = struct.unpack_from(">h", batch, ATTRIBUTES_OFFSET)[0] | TIMESTAMP_TYPE_BIT
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, attributes)
    struct.pack_into(">q", batch, 35, now_ms)
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return bytes(batch)
