"""ProcessClock: tells a process that was stopped from an event loop that was only busy.

A broker that was stopped (SIGSTOP, a frozen VM) past its ZooKeeper session
timeout must lead nothing when it wakes: the controller has moved its
leaderships, and a client may reach it before kazoo notices the expiry. An
event loop held by one long callback shows the same gap between its ticks,
but kazoo's thread kept the session alive meanwhile, and this broker still
leads what the controller says it leads: fencing then left those partitions
with no serving leader until the next LeaderAndIsr, which need never come.

Invariant: a thread notes the time every half limit. A stop of the process
stops it too, so after a stop longer than the limit either its last note is
older than the limit (the event loop looked first) or it saw a gap between
two of its own notes longer than the limit (it looked first). A busy event
loop leaves it noting on time: a thread gets the GIL back within Python's
switch interval.
"""

from __future__ import annotations

import threading
import time


class ProcessClock:
    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.noted = time.monotonic()
        self.stop_seen_at = float("-inf")   # when the thread last woke from a gap longer than the limit
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kbroker-process-clock", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._closed.wait(self.limit_s / 2):
            now = time.monotonic()
            if now - self.noted > self.limit_s:
                self.stop_seen_at = now
            self.noted = now

    def stopped_since(self, since: float, now: float) -> bool:
        """Whether the whole process was stopped for longer than the limit after ``since`` (up to ``now``)."""
        return now - self.noted > self.limit_s or self.stop_seen_at >= since

    def close(self) -> None:
        self._closed.set()
