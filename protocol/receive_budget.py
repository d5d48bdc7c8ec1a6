"""ReceiveBudget: ``queued.max.request.bytes``, the memory that requests being received may hold, shared by the
``FrameStream``s of a broker's client listeners (the streams call ``take``, ``give`` and ``frame_ended``; the
budget calls a waiting stream's ``_budget_freed`` when it may go on)."""

from __future__ import annotations

import asyncio
import collections
import select
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # (framing imports this module)
    from kbroker.protocol.framing import FrameStream
_HANGUP = select.POLLRDHUP | select.POLLHUP | select.POLLERR


class ReceiveBudget:
    """``queued.max.request.bytes``: the bytes that frames being received or waiting to be handed out may hold,
    across every stream given this budget (Kafka's memory pool, KIP-72). A stream asks before a large frame's
    buffer starts or grows; past the limit it pauses reading until frames are handed out or streams close.
    ``limit`` <= 0: unbounded (Kafka's -1).

    Kafka's pool grants a whole frame at once while anything is left, so one frame larger than the pool still
    gets through. Here a frame's buffer grows in steps, so the same guarantee takes one stream at a time that
    may go past the limit (``overflow``): the first one to wait for it, until its frame is complete or the
    stream ends. Streams that hold the budget while waiting therefore never wait for each other for ever, and
    memory stays within the limit plus one frame (``socket.request.max.bytes``).

    A stream that does not read learns nothing of its peer: one waiting here would keep its buffer until the
    idle timeout although its client had gone. So while any stream waits, their sockets are polled every
    ``HANGUP_CHECK_S`` for a hang-up (FIN or RST), and those found are aborted, which frees their share."""

    HANGUP_CHECK_S = 0.5

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.waiting: collections.deque = collections.deque()
        self.overflow = None   # the FrameStream that may go past the limit
        self.pauses = 0   # how often a stream had to wait (a metric)
        self.peak = 0     # the most used since ``take_peak`` was last called
        self._check: asyncio.TimerHandle | None = None

    def take(self, stream: "FrameStream", n: int) -> bool:
        if self.limit <= 0 or self.used < self.limit or self.overflow is stream:
            self.used += n
            if self.used > self.peak:
                self.peak = self.used
            return True
        if self.overflow is None:
            self.overflow = stream
            return self.take(stream, n)
        self.pauses += 1
        self.waiting.append(stream)
        if self._check is None:
            self._check = asyncio.get_running_loop().call_later(self.HANGUP_CHECK_S, self._abort_hung_up)
        return False

    def take_peak(self) -> int:
        """The most used since the last call (then it starts again from what is used now)."""
        peak, self.peak = self.peak, self.used
        return peak

    def give(self, n: int) -> None:
        self.used -= n
        self._wake()

    def frame_ended(self, stream: "FrameStream") -> None:
        """``stream``'s large frame is complete or will never be: it no longer needs to go past the limit."""
        if self.overflow is stream:
            self.overflow = None
            self._wake()

    def _wake(self) -> None:
        while self.waiting and (self.limit <= 0 or self.used < self.limit or self.overflow is None):
            stream = self.waiting.popleft()
            if self.limit > 0 and self.used >= self.limit:
                self.overflow = stream
            stream._budget_freed()

    def _abort_hung_up(self) -> None:
        self._check = None
        poller = select.poll()
        by_fd = {}
        for stream in self.waiting:
            sock = stream.transport.get_extra_info("socket") if stream.transport is not None else None
            if sock is not None and sock.fileno() >= 0:
                by_fd[sock.fileno()] = stream
                poller.register(sock.fileno(), _HANGUP)
        for fd, _ in poller.poll(0):
            by_fd[fd].abort()
        if self.waiting:
            self._check = asyncio.get_running_loop().call_later(self.HANGUP_CHECK_S, self._abort_hung_up)
