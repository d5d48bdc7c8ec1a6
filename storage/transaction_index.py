"""TransactionIndex: a segment's ``.txnindex``, the aborted transactions whose abort marker it holds.

Kafka's format, 34 bytes an entry: version (int16, 0), producer id (int64),
first offset (int64), last offset (int64, the marker's), last stable offset
(int64, at the time of the abort). read_committed fetches return the entries
overlapping the fetched range, and clients drop those producers' records
from ``first_offset`` until the marker.

Invariant: entries are appended in marker order, so ``last_offset`` grows.
The index is derived data: ``Log._load`` rebuilds it from the markers.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from kbroker.storage.open_files import with_room

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")


@dataclass(frozen=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        if os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read()
            for pos in range(0, len(data) - len(data) % _ENTRY.size, _ENTRY.size):
                _, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
                self.entries.append(AbortedTxn(pid, first, last, lso))

    def append(self, entry: AbortedTxn) -> None:
        self.entries.append(entry)
        with_room(self._write, _ENTRY.pack(0, entry.producer_id, entry.first_offset, entry.last_offset,
                                           entry.last_stable_offset))

    def _write(self, data: bytes) -> None:
        with open(self.path, "ab") as f:
            f.write(data)

    def collect(self, fetch_offset: int, upper_bound: int, into: list[AbortedTxn]) -> bool:
        """Add the entries of transactions that may have records in [fetch_offset, upper_bound) to ``into``;
        whether no later segment can hold more. One can not once an entry's last stable offset reaches
        ``upper_bound``: every transaction open below it had ended by that abort (Kafka's rule: a read looks
        no further than the segments it needs)."""
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                into.append(e)
            if e.last_stable_offset >= upper_bound:
                return True
        return False

    def truncate_from(self, offset: int) -> None:
        """Drop entries whose marker is at or past ``offset`` (they are rebuilt from the log)."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) == len(self.entries):
            return
        self.reset()
        for entry in kept:
            self.append(entry)

    def reset(self) -> None:
        self.entries = []
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def flush(self) -> None:
        if os.path.exists(self.path):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def unlink(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
