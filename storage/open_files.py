"""OpenFiles: the descriptors of segment and index files, opened on demand and closed least recently used first.

A partition nobody writes or reads should cost memory, not descriptors: with
three files held open per segment, 6,661 partitions exhausted a limit of
20,000 and took the broker down. Every ``LogSegment`` and index asks this cache
for its descriptor at each use (``fd(owner)``); the cache opens the file when
it is not open and, past ``capacity``, closes the descriptor used least
recently. Files in use stay open: the hot path (appends to active segments,
fetches of recent data) opens nothing per request.

Invariants:
* a hit costs an attribute read (the descriptor is kept on its owner, a
  ``CachedFile``); recency is approximated the CLOCK way (see
  ``_close_oldest``);
* a descriptor is used only in the synchronous code that asked for it: no
  caller keeps one across an ``await`` or hands it to another thread, since it
  may be closed as soon as another file is opened (a ``FileRegion`` being
  sent asks its segment again for every system call);
* ``EMFILE``/``ENFILE`` on open close the oldest cached descriptors and try
  again once; if it still fails, the ``OSError`` reaches the caller as
  ``TooManyOpenFiles``, which is not a disk failure (``LogManager.report``
  leaves the log dir online).
"""

from __future__ import annotations

import errno
import os
import threading
from collections import OrderedDict

DEFAULT_CAPACITY = 4096
DESCRIPTOR_ERRORS = (errno.EMFILE, errno.ENFILE)


class TooManyOpenFiles(OSError):
    """The process (EMFILE) or the system (ENFILE) is out of descriptors: the operation fails, the disk is fine."""


class CachedFile:
    """A file whose descriptor the cache holds: ``fd`` (and ``fileno()``) at each use, ``open_file()`` to open."""

    _fd = -1        # set by the cache while the file is open
    _used = False   # used since the cache last looked (see ``_close_oldest``)

    @property
    def fd(self) -> int:
        """The descriptor now: use it at once, never keep it."""
        if self._fd >= 0:
            self._used = True
            return self._fd
        return OPEN_FILES.fd(self)

    def fileno(self) -> int:
        return self.fd

    def open_file(self) -> int:
        raise NotImplementedError


class OpenFiles:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._open: OrderedDict = OrderedDict()   # owner -> descriptor, least recently used first
        self._detached: dict = {}                   # owner -> descriptor kept until closed (see ``detach``)
        self.opened = 0        # files opened since start (a metric: how hard the cache works)
        self.exhausted = 0     # opens refused for want of descriptors (a metric)

    def __len__(self) -> int:
        return len(self._open) + len(self._detached)

    @property
    def cached(self) -> int:
        """Descriptors held within ``capacity`` (those kept for detached files are not)."""
        return len(self._open)

    def fd(self, owner: "CachedFile") -> int:
        """``owner``'s descriptor, opened with ``owner.open_file()`` if it is not open."""
        if owner._fd >= 0:
            owner._used = True
            return owner._fd
        while len(self._open) >= self.capacity:
            self._close_oldest()
        try:
            fd = owner.open_file()
        except OSError as exc:
            if exc.errno not in DESCRIPTOR_ERRORS:
                raise
            self.release(16)   # make room, then one more try
            try:
                fd = owner.open_file()
            except OSError as again:
                if again.errno not in DESCRIPTOR_ERRORS:
                    raise
                self.exhausted += 1
                raise TooManyOpenFiles(again.errno, f"{os.strerror(again.errno)} opening {owner}") from None
        self.opened += 1
        self._open[owner] = fd
        owner._fd, owner._used = fd, False
        return fd

    def is_open(self, owner: "CachedFile") -> bool:
        return owner._fd >= 0

    def detach(self, owner: "CachedFile") -> None:
        """Open ``owner`` if it is not, and keep its descriptor outside the cache until ``close``: for files
        about to be unlinked or moved, which could not be opened again by their path."""
        if owner in self._detached:
            return
        if owner._fd < 0:
            try:
                self.fd(owner)
            except FileNotFoundError:
                return
        self._detached[owner] = self._open.pop(owner)

    def close(self, owner: "CachedFile") -> None:
        fd = self._open.pop(owner, None)
        if fd is None:
            fd = self._detached.pop(owner, None)
        if fd is not None:
            owner._fd = -1
            os.close(fd)

    def release(self, count: int) -> int:
        """Close up to ``count`` of the least recently used descriptors (for an open elsewhere that ran out)."""
        released = min(count, len(self._open))
        for _ in range(released):
            self._close_oldest()
        return released

    def _close_oldest(self) -> None:
        """Close the least recently used descriptor, approximately: a file used since it last came round gets
        a second chance at the back of the queue (the CLOCK scheme), so a hit costs a flag, not a reorder."""
        while True:
            owner, fd = self._open.popitem(last=False)
            if not owner._used:
                owner._fd = -1
                os.close(fd)
                return
            owner._used = False
            self._open[owner] = fd


def with_room(fn, *args):
    """``fn(*args)``; if it runs out of descriptors, again once after the cache gave some back (for the small
    files opened outside it: checkpoints, snapshots, the transaction index, the broker's metadata)."""
    try:
        return fn(*args)
    except OSError as exc:
        if exc.errno not in DESCRIPTOR_ERRORS or not OPEN_FILES.release(16):
            raise
    return fn(*args)


class _PerThread(OpenFiles, threading.local):
    """One cache per thread: a broker's files are used on its event loop's thread only, and brokers embedded
    in one process (the pytest fixture) each have their own thread, so no cache is shared across threads (one
    could close a descriptor another is about to use)."""


# The broker's cache (its capacity set at start, on the broker's thread, from the descriptor limit).
OPEN_FILES = _PerThread()


def capacity_for_limit(limit: int) -> int:
    """Half the process's descriptors for log files, the rest for connections, ZooKeeper, the cleaner."""
    return max(32, limit // 2)
