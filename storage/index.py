"""Sparse offset and time indexes of one segment (``.index``, ``.timeindex``).

``.index`` entries are (offset - base_offset: int32, file position: int32),
8 bytes; ``.timeindex`` entries are (timestamp: int64, offset - base_offset:
int32), 12 bytes; both big-endian and ascending, as Kafka writes them. Entries
are appended to the file as they are made and kept in memory for lookups. The
index is a cache of the log: after a crash it is checked and, if damaged or
missing, rebuilt from the ``.log`` (see LogSegment.recover).
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array

from kbroker.storage.open_files import OPEN_FILES, CachedFile

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class _Index(CachedFile):
    """``fd`` comes from the broker's cache of open files (``storage.open_files``): the entries live in memory,
    so the file is only opened to append, truncate or sync."""

    entry: struct.Struct

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.keys = array("q")
        self.values = array("q")
        self._created = False
        self._rebuilt: tuple[array, array] | None = None   # the entries before ``rebuild``, while it runs
        self._load()

    def open_file(self) -> int:
        # O_APPEND: an entry goes after those already there (the file's offset starts at 0 on every open).
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | (0 if self._created else os.O_CREAT), 0o644)
        self._created = True
        return fd

    def __repr__(self) -> str:
        return self.path

    def _load(self) -> None:
        data = os.pread(self.fd, os.fstat(self.fd).st_size, 0)
        usable = len(data) - len(data) % self.entry.size
        for key, value in self.entry.iter_unpack(data[:usable]):
            self._remember(key, value)
        if usable != len(data):
            os.ftruncate(self.fd, usable)

    def _remember(self, a: int, b: int) -> None:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.keys)

    def truncate_entries(self, count: int) -> None:
        if count >= len(self.keys):
            return   # nothing to drop: the file holds exactly the entries in memory
        del self.keys[count:]
        del self.values[count:]
        os.ftruncate(self.fd, count * self.entry.size)

    def rebuild(self) -> None:
        """Start building the entries again in memory; ``rebuilt`` writes them if they differ from the file's.

        A recovery rebuilds every segment's indexes, and a restart after a crash recovers every partition's
        active segment: emptying and rewriting an index that comes out the same cost a truncate (and, on
        ext4, a flush when the file closes) per file, most of a 50,000-partition restart."""
        self._rebuilt = (self.keys, self.values)
        self.keys, self.values = array("q"), array("q")

    def rebuilt(self) -> None:
        before, self._rebuilt = self._rebuilt, None
        if before == (self.keys, self.values):
            return
        os.ftruncate(self.fd, 0)
        os.write(self.fd, b"".join(self.entry.pack(*self._entry(i)) for i in range(len(self.keys))))

    def _entry(self, i: int) -> tuple[int, int]:
        raise NotImplementedError

    def _write(self, entry: bytes) -> None:
        if self._rebuilt is None:
            os.write(self.fd, entry)

    def flush(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        OPEN_FILES.close(self)


class OffsetIndex(_Index):
    """Maps absolute offsets to file positions. keys: offsets, values: positions."""

    entry = _OFFSET_ENTRY

    def _remember(self, relative_offset: int, position: int) -> None:
        self.keys.append(self.base_offset + relative_offset)
        self.values.append(position)

    def append(self, offset: int, position: int) -> None:
        if self.keys and offset <= self.keys[-1]:
            return
        self._remember(offset - self.base_offset, position)
        self._write(_OFFSET_ENTRY.pack(offset - self.base_offset, position))

    def _entry(self, i: int) -> tuple[int, int]:
        return self.keys[i] - self.base_offset, self.values[i]

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry at or below ``offset``; (base, 0) if none."""
        i = bisect.bisect_right(self.keys, offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.keys[i], self.values[i]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries for offsets >= ``offset``."""
        self.truncate_entries(bisect.bisect_left(self.keys, offset))

    def is_sane(self, log_size: int) -> bool:
        return all(p < log_size for p in self.values[-1:]) and all(
            self.keys[i] < self.keys[i + 1] for i in range(len(self.keys) - 1))


class TimeIndex(_Index):
    """Maps timestamps to offsets. keys: timestamps, values: absolute offsets."""

    entry = _TIME_ENTRY

    def _remember(self, timestamp: int, relative_offset: int) -> None:
        self.keys.append(timestamp)
        self.values.append(self.base_offset + relative_offset)

    def append(self, timestamp: int, offset: int) -> None:
        if self.keys and timestamp <= self.keys[-1]:
            return
        self._remember(timestamp, offset - self.base_offset)
        self._write(_TIME_ENTRY.pack(timestamp, offset - self.base_offset))

    def _entry(self, i: int) -> tuple[int, int]:
        return self.keys[i], self.values[i] - self.base_offset

    def lookup(self, timestamp: int) -> int:
        """The offset from which to scan for the first record with timestamp >= ``timestamp``."""
        i = bisect.bisect_left(self.keys, timestamp) - 1
        if i < 0:
            return self.base_offset
        return self.values[i]

    @property
    def max_timestamp(self) -> int:
        return self.keys[-1] if self.keys else -1

    def truncate_to_offset(self, offset: int) -> None:
        keep = 0
        while keep < len(self.values) and self.values[keep] < offset:
            keep += 1
        self.truncate_entries(keep)
