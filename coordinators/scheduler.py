"""Timers for the coordinators, on an injectable clock.

Coordinators never sleep and never read the wall clock themselves: they ask a
scheduler for ``now_ms()`` and for keyed timers. ``LoopScheduler`` runs on the
asyncio event loop; ``ManualScheduler`` runs only when a test advances it, so
unit tests drive session and rebalance timeouts without waiting.

Invariant: at most one timer per key; scheduling a key again replaces it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Callable, Hashable

import structlog

log = structlog.get_logger("coordinators.scheduler")


class LoopScheduler:
    def __init__(self, clock=time.time) -> None:
        self.clock = clock
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def schedule(self, key: Hashable, delay_ms: int, action: Callable[[], None]) -> None:
        self.cancel(key)
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(max(0, delay_ms) / 1000, self._fire, key, action)

    def _fire(self, key: Hashable, action: Callable[[], None]) -> None:
        self._timers.pop(key, None)
        try:
            action()
        except Exception:   # a timer's failure must not stop the loop's other work
            log.exception("timer_failed", key=repr(key))

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._timers

    def cancel(self, key: Hashable) -> None:
        handle = self._timers.pop(key, None)
        if handle is not None:
            handle.cancel()

    def cancel_all(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()


class ManualScheduler:
    """A clock that only moves when told to: ``advance(ms)`` fires due timers in deadline order."""

    def __init__(self, start_ms: int = 1_000_000) -> None:
        self._now = start_ms
        self._heap: list[tuple[int, int, Hashable]] = []
        self._timers: dict[Hashable, tuple[int, int, Callable[[], None]]] = {}
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self._now

    def schedule(self, key: Hashable, delay_ms: int, action: Callable[[], None]) -> None:
        entry = (self._now + max(0, delay_ms), next(self._seq), action)
        self._timers[key] = entry
        heapq.heappush(self._heap, (entry[0], entry[1], key))

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._timers

    def cancel(self, key: Hashable) -> None:
        self._timers.pop(key, None)

    def cancel_all(self) -> None:
        self._timers.clear()
        self._heap.clear()

    def pending(self) -> int:
        return len(self._timers)

    def advance(self, ms: int = 0) -> None:
        target = self._now + ms
        while self._heap and self._heap[0][0] <= target:
            deadline, seq, key = heapq.heappop(self._heap)
            entry = self._timers.get(key)
            if entry is None or entry[1] != seq:
                continue   # cancelled or replaced
            del self._timers[key]
            self._now = max(self._now, deadline)
            entry[2]()
        self._now = target
