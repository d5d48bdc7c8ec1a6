"""The receive buffers behind ``FrameStream`` (protocol/framing.py), one set per thread (each event loop has its
thread): a scratch buffer every stream of the thread receives into (a transport fills it and hands it back within
one callback, so no two streams use it at once), and a small pool of buffers that large frames are received into
in place.

Invariant: a pooled buffer is received into again only once nothing refers to it but the pool. Every large frame
is handed out as a view that holds its buffer, so a frame's bytes never change under whoever still holds it, and
a buffer some slice of a decoded record still holds stays out of use until that slice is gone.
"""

from __future__ import annotations

import sys
import threading

SCRATCH_BYTES = 256 * 1024      # the thread's receive buffer, shared by its streams
POOLED_BUFFERS = 8              # a thread's buffers kept for reuse by large frames
# Large enough for a follower's fetch answers (replica.fetch.response.max.bytes, 10 MiB by default): a quarter
# of them were over 4 MiB, and each such answer grew a fresh buffer whose pages were faulted in and zeroed as it
# arrived (docs/BENCHMARKS.md, issue 30). Larger frames get a buffer of their own that is not kept.
POOLED_BYTES_MAX = 16 << 20
POOLED_TOTAL_BYTES = 32 << 20   # what a thread's pool may hold at once (eight buffers of 4 MiB, as before)


def _references_when_unused() -> int:
    """What ``sys.getrefcount`` reports for a pooled buffer seen in ``pooled``'s loop when nothing else holds
    it (the pool, the loop variable, the call's argument), measured rather than assumed."""
    pool = [bytearray(1)]
    for buf in pool:
        return sys.getrefcount(buf)
    raise AssertionError


_UNREFERENCED = _references_when_unused()


class _ThreadBuffers(threading.local):
    """One receive buffer and one pool of large-frame buffers per thread (each event loop has its thread)."""

    def __init__(self) -> None:
        self.scratch = bytearray(SCRATCH_BYTES)
        self.view = memoryview(self.scratch)
        self.pool: list[bytearray] = []


BUFFERS = _ThreadBuffers()


def pooled(size: int) -> bytearray | None:
    """A pooled buffer of at least ``size`` bytes that nothing refers to any more, or None. A buffer is free
    when its only references are the pool's: every frame handed out is a view that holds the buffer until the
    last slice of it is gone."""
    for buf in BUFFERS.pool:
        if len(buf) >= size and sys.getrefcount(buf) <= _UNREFERENCED:
            return buf
    return None


def keep(buf: bytearray) -> None:
    """Keep ``buf`` for later large frames, within ``POOLED_BUFFERS`` buffers and ``POOLED_TOTAL_BYTES``: the
    larger ones are kept (they fit more frames), the smaller ones dropped to make room."""
    pool = BUFFERS.pool
    if len(buf) > POOLED_BYTES_MAX or any(b is buf for b in pool):
        return
    kept = sorted(pool, key=len)
    while kept and (len(kept) >= POOLED_BUFFERS or sum(map(len, kept)) + len(buf) > POOLED_TOTAL_BYTES):
        if len(kept[0]) >= len(buf):
            return   # (nothing dropped: it would make room only by dropping larger ones)
        del kept[0]
    pool[:] = sorted(kept + [buf], key=len)   # (smallest first: ``pooled`` hands out the smallest that fits)
