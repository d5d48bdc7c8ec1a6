"""Giving memory back to the system after a burst of large requests.

A large request's buffer is a large allocation; glibc serves those from
mmap at first, but raises its threshold to the largest block freed (up to
32 MiB), after which they come from the heap and, once freed, stay resident
between live blocks. A burst of hundreds of megabytes of requests (clients
sending large frames together, up to ``queued.max.request.bytes``) would
leave the broker that much larger for good. ``HeapTrimmer`` asks glibc to
release free heap pages (``malloc_trim``) when the request memory has come
down from such a peak. Fixing the threshold low instead was measured: every
fetch answer's buffer then faulted in fresh pages, and consumer throughput
fell by a third.
"""

from __future__ import annotations

import ctypes
import ctypes.util

import structlog

from kbroker.protocol.receive_budget import ReceiveBudget

TRIM_AFTER_BYTES = 32 << 20   # a peak of request memory worth giving back
CHECK_MS = 2000
log = structlog.get_logger("broker.heap")


def _malloc_trim():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
    except (OSError, AttributeError, TypeError):   # not glibc: nothing to do
        return None


class HeapTrimmer:
    def __init__(self, budget: ReceiveBudget) -> None:
        self.budget = budget
        self.trim = _malloc_trim()

    def __call__(self) -> None:
        peak = self.budget.take_peak()
        if self.trim is not None and peak >= TRIM_AFTER_BYTES and self.budget.used < peak // 2:
            self.trim(0)
            log.debug("heap_trimmed", peak=peak, used=self.budget.used)
