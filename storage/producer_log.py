"""The producer side of a partition's log: producer-state snapshots, rebuilding state at load, transactions.

Mixed into ``Log`` (as Kafka keeps ProducerStateManager and the snapshot
files beside its log). Invariants:
* a snapshot named N holds the producer state as of offset N, written
  atomically (temp file, fsync, rename); the newest two are kept;
* the state after loading equals the state the appends had built: the newest
  sound snapshot at or below the log end, then every batch after it;
* a transaction is open from its first data batch to its marker; an aborted
  one is in its segment's ``.txnindex`` with the last stable offset at its end.
"""

from __future__ import annotations

import bisect
import os

import structlog

from kbroker.protocol.records import CONTROL_ABORT, BatchHeader, control_type, marker_coordinator_epoch
from kbroker.storage.checkpoint import write_atomically
from kbroker.storage.producer_state import SNAPSHOT_SUFFIX, CorruptSnapshot, decode_snapshot, encode_snapshot
from kbroker.storage.segment import LogSegment, segment_name
from kbroker.storage.transaction_index import AbortedTxn

log = structlog.get_logger("storage.log")


class ProducerLogMixin:
    snapshot_offset: int | None = None   # the log end offset of the newest snapshot loaded or written

    def _snapshot_path(self, offset: int) -> str:
        return os.path.join(self.directory, segment_name(offset) + SNAPSHOT_SUFFIX)

    def _snapshot_offsets(self) -> list[int]:
        return sorted(int(name[:20]) for name in os.listdir(self.directory) if name.endswith(SNAPSHOT_SUFFIX))

    def _load_snapshot(self) -> int | None:
        """Load the newest sound snapshot at or below the log end; its offset, or None if there is none."""
        for offset in reversed(self._snapshot_offsets()):
            path = self._snapshot_path(offset)
            if offset > self.log_end_offset:   # written for data a crash took away
                os.unlink(path)
                continue
            try:
                with open(path, "rb") as f:
                    decode_snapshot(f.read(), self.producer_state)
                return offset
            except CorruptSnapshot as exc:
                log.warning("producer_snapshot_corrupt", topic=self.topic, partition=self.partition,
                            offset=offset, error=str(exc))
                os.unlink(path)
        self.producer_state.clear()
        return None

    def _rebuild_producer_state(self, scanned: dict[int, list[tuple[int, BatchHeader]]]) -> None:
        """Producer state, open transactions and aborted-transaction indexes, from the newest snapshot plus
        the batches after it (or the whole log without one): start-up reads only what the snapshot lacks."""
        snapshot = self._load_snapshot()
        self.snapshot_offset = snapshot
        start = snapshot if snapshot is not None else -1
        for i, segment in enumerate(self.segments):
            if self._segment_end(i) <= start and segment.size:
                continue   # covered by the snapshot, its .txnindex included
            segment.txn_index.truncate_from(max(start, 0))
            batches = scanned.get(i)
            if batches is None:
                batches = list(segment.iter_headers(0))
            for position, header in batches:
                if header.base_offset < start or not header.has_producer_id:
                    continue
                self.producer_state.update(header, header.base_offset)
                if header.is_transactional:
                    self._track_transaction(segment, header, header.base_offset,
                                            lambda s=segment, h=header, p=position: os.pread(s.fileno(), h.size, p))
        log.debug("producer_state_loaded", topic=self.topic, partition=self.partition, snapshot=snapshot,
                  producers=len(self.producer_state.producers))

    def take_snapshot(self, durable: bool = True, unless_current: bool = False) -> None:
        """Write the producer state as of the log end offset (atomically), keeping the newest two.
        ``unless_current``: not if the newest snapshot (loaded or written) is already at the log end: nothing
        was appended since (a restarted broker stopping again writes nothing for idle partitions). An empty log
        gets none."""
        if unless_current and self.snapshot_offset == self.log_end_offset:
            return
        if self.log_end_offset == 0:   # nothing was ever appended: no state (Kafka writes none either)
            return
        write_atomically(self._snapshot_path(self.log_end_offset), encode_snapshot(self.producer_state), durable)
        self.snapshot_offset = self.log_end_offset
        for offset in self._snapshot_offsets()[:-2]:
            try:
                os.unlink(self._snapshot_path(offset))
            except FileNotFoundError:
                pass

    def _track_transaction(self, segment: LogSegment, header: BatchHeader, first_offset: int, batch) -> None:
        """Open a transaction on its first data batch; close it on its marker, indexing it if aborted."""
        if not header.is_control:
            self.producer_state.track_transaction(header, first_offset)
            return
        data = batch()   # (a read of the file when loading: once for both fields)
        first = self.producer_state.complete_transaction(header.producer_id, marker_coordinator_epoch(data))
        if first is not None and control_type(data) == CONTROL_ABORT:
            marker = first_offset + header.last_offset_delta
            unstable = self.producer_state.first_unstable_offset()
            segment.txn_index.append(AbortedTxn(header.producer_id, first, marker,
                                                marker + 1 if unstable is None else unstable))

    @property
    def last_stable_offset(self) -> int:
        """The first offset a read_committed consumer may not read: the oldest open transaction, or the HW; never
        below the log start (DeleteRecords or retention may pass an open transaction's start, as in Kafka)."""
        unstable = self.producer_state.first_unstable_offset()
        if unstable is None:
            return self.high_watermark
        return min(max(unstable, self.log_start_offset), self.high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions with records in [fetch_offset, upper_bound), from the segments' indexes."""
        found: list[AbortedTxn] = []
        for segment in self.segments[self._segment_for(fetch_offset):]:
            if segment.txn_index.collect(fetch_offset, upper_bound, found):
                break
        return found

    def fetch_upper_bound(self, found) -> int:
        """The offset below which a fetch answered with the slice ``found`` may hold records, as Kafka bounds
        the aborted transactions it lists: the first offset indexed at or past where Kafka's read would have ended
        (``span``) in the slice's segment (the index is sparse, so a little past it), else the segment's end."""
        segment = found.segment
        index = segment.offset_index
        i = bisect.bisect_left(index.values, found.position + found.span)
        if i < len(index.values):
            return index.keys[i]
        return self._segment_end(self._segment_for(segment.base_offset))
