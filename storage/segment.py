"""LogSegment: one ``<base offset>.log`` file of record batches and its indexes.

Invariants:
* ``.log`` holds whole v2 batches back to back, offsets ascending; the first
  batch's base offset is >= ``base_offset`` (the file's name).
* Every byte appended was written to the file descriptor before ``append``
  returned: a crash of the process (not of the machine) loses nothing appended.
* ``size`` is the file's length once recovery has run.
"""

from __future__ import annotations

import os
import time

from kbroker.protocol.records import HEADER_SIZE, BatchHeader, iter_records, verify_crc
from kbroker.storage.open_files import OPEN_FILES, CachedFile

LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX = ".log", ".index", ".timeindex"
# Past this many batches a fetch slice is cut at max_bytes instead of at a batch boundary.
_MAX_BATCHES_SCANNED = 512


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class LogSegment(CachedFile):
    """``fd``: the ``.log`` file's descriptor, from the broker's cache of open files (``storage.open_files``)."""

    def __init__(self, directory: str, base_offset: int, index_interval_bytes: int = 4096,
                 created_ms: int | None = None) -> None:
        from kbroker.storage.index import OffsetIndex, TimeIndex
        from kbroker.storage.transaction_index import TXN_INDEX_SUFFIX, TransactionIndex

        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        stem = os.path.join(directory, segment_name(base_offset))
        self.path = stem + LOG_SUFFIX
        indexes_existed = os.path.exists(stem + INDEX_SUFFIX) and os.path.exists(stem + TIME_INDEX_SUFFIX)
        self._created = False   # once the file exists, a reopen never creates it again (it may be gone)
        self.offset_index = OffsetIndex(stem + INDEX_SUFFIX, base_offset)
        self.time_index = TimeIndex(stem + TIME_INDEX_SUFFIX, base_offset)
        self.txn_index = TransactionIndex(stem + TXN_INDEX_SUFFIX)
        self.size = os.fstat(self.fd).st_size
        self.indexes_missing = not indexes_existed and self.size > 0
        self.bytes_since_index_entry = 0
        self.max_timestamp = self.time_index.max_timestamp
        self.offset_of_max_timestamp = self.time_index.values[-1] if self.time_index.values else base_offset
        self.created_ms = created_ms if created_ms is not None else int(time.time() * 1000)
        self.first_batch_timestamp: int | None = None
        self.roll_jitter_ms: int | None = None   # drawn by the log at the first roll check (segment.jitter.ms)

    def open_file(self) -> int:
        flags = os.O_RDWR | os.O_APPEND | (0 if self._created else os.O_CREAT)
        fd = os.open(self.path, flags, 0o644)
        self._created = True
        return fd

    def __repr__(self) -> str:
        return self.path

    # ------------------------------------------------------------------ writing
    def append(self, last_offset: int, max_timestamp: int, buffers: list) -> None:
        """Append one batch's bytes (``buffers`` are written back to back with writev)."""
        position = self.size
        written = os.writev(self.fd, buffers)
        length = sum(len(b) for b in buffers)
        if written != length:  # a short write to a regular file means the disk is full
            os.ftruncate(self.fd, position)
            raise OSError(f"short write to {self.path}: {written} of {length} bytes")
        self.size += length
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = max_timestamp
        self._index_batch(position, length, last_offset, max_timestamp)

    def _index_batch(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        """Sparse indexing, as Kafka's: every ``index_interval_bytes`` an offset entry and a time entry
        (the largest timestamp so far and the offset holding it). A time entry (T, O) promises that no
        record up to O is later than T, so a lookup may start its scan at O however sparse the entries."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_index_entry > self.index_interval_bytes or position == 0:
            self.offset_index.append(last_offset, position)
            if self.max_timestamp >= 0:
                self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_index_entry = 0
        self.bytes_since_index_entry += size

    def seal_time_index(self) -> None:
        """Record the final largest timestamp when the segment rolls or closes, so a restart knows it."""
        if self.max_timestamp >= 0:
            self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp)

    def flush(self) -> None:
        os.fsync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def flush_off_thread(self) -> None:
        """``flush`` for another thread (the roll's flusher): through descriptors of its own, opened by path.
        The cache of open files is the broker thread's; a descriptor the flusher took through ``fd`` would sit
        in the flusher's cache while the segment believes it open, and be closed there under the broker's
        feet. (fsync through any descriptor of a file makes the file's data durable.)"""
        for path in (self.path, self.offset_index.path, self.time_index.path):
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                if path == self.path:
                    raise   # the segment was deleted meanwhile: the caller stops
                continue    # an index not written yet (or deleted with its segment since): nothing to sync
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.txn_index.flush()   # (by path already)

    # ------------------------------------------------------------------ reading
    def header_at(self, position: int) -> BatchHeader | None:
        data = os.pread(self.fd, HEADER_SIZE, position)
        if len(data) < HEADER_SIZE:
            return None
        header = BatchHeader.parse(data)
        if header.magic != 2 or header.batch_length < HEADER_SIZE - 12 or position + header.size > self.size:
            return None
        return header

    def iter_headers(self, position: int = 0):
        """(position, header) of each batch from ``position`` to the first torn one."""
        while position < self.size:
            header = self.header_at(position)
            if header is None:
                return
            yield position, header
            position += header.size

    def find_batch(self, offset: int, start_position: int | None = None) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= ``offset``, scanning from the index."""
        if start_position is None:
            _, start_position = self.offset_index.lookup(offset)
        for position, header in self.iter_headers(start_position):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(self, offset: int, max_bytes: int, max_position: int, min_one_batch: bool) -> tuple[int, int] | None:
        """(position, length) of whole batches to send for a fetch at ``offset``.

        The slice ends at the last whole batch that fits in ``max_bytes``, so no
        bytes are sent that the client would discard and fetch again. If not
        even the first batch fits, it is sent whole with ``min_one_batch``
        (KIP-74), else nothing is: as Kafka answers Fetch v3+, an incomplete
        first batch becomes an empty record set rather than a fragment.
        """
        found = self.find_batch(offset)
        if found is None:
            return None
        start, header = found
        if start >= max_position:
            return None
        limit = min(max_position - start, max_bytes)
        end = start
        scanned = 0
        while header is not None and end + header.size - start <= limit and end < max_position:
            end += header.size
            scanned += 1
            if scanned >= _MAX_BATCHES_SCANNED or end >= max_position:
                break
            header = self.header_at(end)
        if end > start:
            return start, end - start
        if min_one_batch:
            return start, min(header.size, max_position - start)
        return None

    def position_of(self, offset: int) -> int:
        """File position of the batch holding ``offset``, or the segment's size if past its end."""
        found = self.find_batch(offset)
        return self.size if found is None else found[0]

    def offset_for_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``, at or past ``start_offset``."""
        scan_from = max(self.time_index.lookup(timestamp), start_offset)
        _, position = self.offset_index.lookup(scan_from)
        for pos, header in self.iter_headers(position):
            if header.last_offset < start_offset or header.max_timestamp < timestamp:
                continue
            data = os.pread(self.fd, header.size, pos)
            for record in iter_records(data):
                if record.offset >= start_offset and record.timestamp >= timestamp:
                    return record.offset, record.timestamp
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp in this segment."""
        best = None
        for pos, header in self.iter_headers(0):
            if best is None or header.max_timestamp > best[1]:
                best = (pos, header.max_timestamp, header)
        if best is None:
            return None
        pos, ts, header = best
        for record in iter_records(os.pread(self.fd, header.size, pos)):
            if record.timestamp == ts:
                return record.offset, ts
        return header.last_offset, ts

    # ------------------------------------------------------------------ recovery
    def recover(self) -> list[tuple[int, BatchHeader]]:
        """Validate every batch (framing and CRC), rebuild both indexes, cut off a torn or corrupt tail.

        Returns the valid batches' (position, header) in order.
        """
        valid: list[tuple[int, BatchHeader]] = []
        end = 0
        for position, header in self.iter_headers(0):
            data = os.pread(self.fd, header.size, position)
            if not verify_crc(data, 0, header):
                break
            valid.append((position, header))
            end = position + header.size
        if end != self.size:
            os.ftruncate(self.fd, end)
            self.size = end
        self.index_written([(position, header.size, header.last_offset, header.max_timestamp)
                            for position, header in valid])
        return valid

    def index_written(self, batches: list[tuple[int, int, int, int]]) -> None:
        """Rebuild both indexes from the segment's batches, (position, size, last offset, max timestamp) each:
        read back by ``recover``, or as their writer knows them (the cleaner's swap, which reads nothing)."""
        self.offset_index.rebuild()
        self.time_index.rebuild()
        self.max_timestamp = -1
        self.bytes_since_index_entry = 0
        for position, size, last_offset, max_timestamp in batches:
            self._index_batch(position, size, last_offset, max_timestamp)
        if batches:
            self.first_batch_timestamp = batches[0][3]
        self.seal_time_index()
        self.offset_index.rebuilt()
        self.time_index.rebuilt()
        self.indexes_missing = False

    @property
    def last_modified_ms(self) -> int:
        return int(os.fstat(self.fd).st_mtime * 1000)

    def largest_timestamp(self) -> int:
        """For time retention: the largest record timestamp, else the file's modification time."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms

    def close(self) -> None:
        OPEN_FILES.close(self)
        self.offset_index.close()
        self.time_index.close()

    def detach(self) -> None:
        """The files are about to be removed or moved: keep the ``.log`` descriptor (a fetch may still be
        sending from it) out of the cache's eviction until ``close``."""
        OPEN_FILES.detach(self)

    def unlink_files(self) -> None:
        """Remove the segment's three files; the ``.log`` descriptor stays valid until ``close``."""
        self.detach()
        for path in (self.path, self.offset_index.path, self.time_index.path, self.txn_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def delete(self) -> None:
        self.close()
        self.unlink_files()
