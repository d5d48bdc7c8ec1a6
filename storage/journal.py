"""An append-only journal of JSON entries, kept beside a snapshot by a store that changes one small thing at a
time: a change costs one line, where rewriting the whole state at each change made creating n topics cost O(n²).

Invariants:
* an entry is one line of JSON, on disk (written and fsynced) before ``append`` returns;
* only the last line can be cut short (a crash mid-append): it was never acknowledged, and ``read`` drops it and
  cuts the file back to the last whole line, so that the next entry never follows a torn one;
* a failed append cuts the file back to where it began; if even that fails, ``broken`` is set and the store
  must write a snapshot and ``reset`` before journaling again.
"""

from __future__ import annotations

import json
import os

from kbroker.storage.open_files import with_room


class Journal:
    def __init__(self, path: str) -> None:
        self.path = path
        self.entries = 0        # lines since the last reset: what a snapshot would fold in
        self.broken = False

    def read(self) -> list:
        """Every whole entry, in order; a torn tail is cut off the file."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        entries, whole = [], 0
        for line in data.split(b"\n")[:-1]:   # (what follows the last newline is torn, or nothing)
            try:
                entries.append(json.loads(line))
            except ValueError:
                break
            whole += len(line) + 1
        if whole != len(data):
            with_room(self._cut, whole)
        self.entries = len(entries)
        return entries

    def append(self, entry) -> None:
        line = json.dumps(entry, separators=(",", ":")).encode() + b"\n"
        with_room(self._append, line)
        self.entries += 1

    def reset(self) -> None:
        """Empty the journal: a snapshot now holds everything in it."""
        with_room(self._cut, 0)
        self.entries, self.broken = 0, False

    def _append(self, line: bytes) -> None:
        created = not os.path.exists(self.path)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            start = os.lseek(fd, 0, os.SEEK_END)
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except OSError:
                try:
                    os.ftruncate(fd, start)
                except OSError:
                    self.broken = True
                raise
        finally:
            os.close(fd)
        if created:   # (the file's name must survive a crash too)
            _sync_directory(os.path.dirname(self.path))

    def _cut(self, size: int) -> None:
        if not os.path.exists(self.path):
            return
        fd = os.open(self.path, os.O_WRONLY)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)


def _sync_directory(path: str) -> None:
    fd = os.open(path or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
