"""FrameStream: Kafka's size-prefixed frames read off a transport with as few copies as the sizes allow.

Both ends of the protocol (the broker's connections and ``client``'s) read
``int32 size`` + ``size`` bytes at a time. asyncio's StreamReader copies every
byte twice on the way (into its buffer, then out of it for ``readexactly``);
at replication rates those copies cost as much as writing the log. This is a
``BufferedProtocol`` instead: the transport receives into a scratch buffer
shared by every stream of the thread, frames that arrived whole are cut out of
it with one copy, and a large frame that has not yet arrived whole gets a
buffer of its own that the socket then fills in place (the thread's buffers: protocol/frame_buffers.py).

Invariants:
* a frame's size is checked against ``max_frame`` before anything is
  allocated for it; a bad size ends the stream with ``FrameTooLarge``;
* memory grows with the bytes that arrived, never with a size that was only
  announced: a large frame's buffer starts small and doubles as it fills (a
  client that announces 100 MB and sends ten bytes holds about 64 KiB);
* with a ``ReceiveBudget`` (``queued.max.request.bytes``) every frame received
  and not yet handed out, and every large frame's buffer, is charged to it;
  past its limit a large frame's buffer waits to start or grow, reading
  paused, until frames are handed out or streams close. Frames that arrive
  whole are never held back, so small requests are served even while
  clients that send large frames slowly hold the whole budget;
* an idle stream holds no receive buffer: the scratch buffer is the thread's
  (a transport fills it and hands it back within one callback, so no two
  streams ever use it at once) and what is left in it after a callback (a
  frame's first bytes) is copied out;
* frames come out of ``read_frame`` in arrival order: ``bytes``, or for a large
  one a ``memoryview`` of a buffer that, if pooled, is received into again only
  once no view of it is left anywhere (so a frame's bytes never change
  under whoever still holds them). An ``intercept`` may take a frame in the
  transport's callback instead, only when no frame is queued ahead of it;
* memory is bounded: cutting stops and reading pauses while ``PAUSE_BYTES`` or
  ``PAUSE_FRAMES`` of frames wait for the consumer, and writers wait in
  ``drain`` while the transport's buffer is above its high-water mark.
"""

from __future__ import annotations

import asyncio
import struct

from kbroker.protocol.frame_buffers import BUFFERS, keep, pooled
from kbroker.protocol.receive_budget import ReceiveBudget

_SIZE = struct.Struct(">i")
OWN_BUFFER_BYTES = 32 * 1024    # an incomplete frame at least this large is received straight into its own buffer
FIRST_OWN_BYTES = 64 * 1024     # what such a buffer starts at (or the frame's size, if smaller)
GROWTH_MAX = 16 << 20           # a buffer grows by at most this much at a time (the budget's overshoot)
PAUSE_BYTES = 1 << 20
PAUSE_FRAMES = 64
_ZEROS = memoryview(bytes(GROWTH_MAX))


class StreamEnded(ConnectionError):
    """The peer closed the connection (or the local side stopped reading) between frames."""


class FrameTooLarge(ConnectionError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes (limit {limit})")
        self.size = size
        self.limit = limit


class FrameStream(asyncio.BufferedProtocol):
    """One connection's frames in, bytes out. ``on_connect(stream)`` runs when the transport is made
    (a server starts its per-connection task there); ``budget`` bounds large frames across streams."""

    def __init__(self, max_frame: int = 0x7FFFFFFF, on_connect=None, budget: ReceiveBudget | None = None) -> None:
        self.max_frame = max_frame
        self._on_connect = on_connect
        self._budget = budget
        self.transport: asyncio.Transport | None = None
        self._buffers = BUFFERS
        self._pending = b""                   # bytes received but not yet cut (a frame's start, or a backlog)
        self._pending_at = 0                  # where in ``_pending`` they start (cutting a backlog copies nothing)
        self._draining = False                # the peer has stopped sending: ``_pending`` is cut as frames are taken
        self._own: bytearray | None = None    # a large frame being received in place
        self._own_size = 0
        self._own_filled = 0
        self._own_granted = 0                 # bytes the budget granted it (its buffer grows to this)
        self._charged = 0                     # bytes this stream holds of the budget
        self._waiting_budget = False
        self._frames: list = []               # (a list, not a deque: a deque costs an idle stream 760 bytes)
        # A callable given each whole frame before it is queued, in the transport's callback; True: it took the
        # frame (it is not queued). None for most streams.
        self.intercept = None
        self._queued_bytes = 0
        self._reading_paused = False
        self._ended: Exception | None = None  # why no more frames will come (after those queued)
        self._frame_waiter: asyncio.Future | None = None
        self._writing_paused = False
        self._drain_waiters: list = []
        self._lost: Exception | None = None
        self._closed = asyncio.get_running_loop().create_future()

    # ------------------------------------------------------------------ transport callbacks
    def connection_made(self, transport) -> None:
        self.transport = transport
        if self._on_connect is not None:
            self._on_connect(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        own = self._own
        if own is not None:
            if self._own_filled == len(own):
                own = self._grow(own)
            return memoryview(own)[self._own_filled:self._own_size]   # (a pooled buffer may be longer)
        return self._buffers.view

    def _grow(self, own: bytearray) -> bytearray:
        """Enlarge the large frame's buffer to what the budget granted. In place where nothing holds a view of
        it (a realloc, which the allocator can often do without copying), else into a new buffer."""
        extra = self._own_granted - len(own)
        try:
            own += _ZEROS[:extra]
        except BufferError:
            grown = bytearray(self._own_granted)
            grown[:self._own_filled] = memoryview(own)[:self._own_filled]
            own = grown
        self._own = own
        return own

    def buffer_updated(self, nbytes: int) -> None:
        if self._own is not None:
            self._own_filled += nbytes
            if self._own_filled == self._own_size:
                self._own_done()
            elif self._own_filled == len(self._own):   # (a pooled buffer never gets here: it fits the frame)
                self._ask_growth()
            return
        data = self._buffers.view[:nbytes]
        if self._pending:
            self._pending = b"".join((memoryview(self._pending)[self._pending_at:], data))
            self._pending_at = 0
            data = self._pending
        self._cut_frames(data)

    def _cut_pending(self) -> None:
        self._cut_frames(self._pending, self._pending_at)

    def _cut_frames(self, data, start: int = 0) -> None:
        """Cut the whole frames out of ``data`` from ``start`` (the scratch buffer's new bytes, or ``_pending``),
        up to the queue's bound, and keep the rest: a large frame's start goes to its own buffer, anything else
        stays in ``_pending`` (copied out of the scratch buffer; a backlog already there is only skipped into,
        so cutting it a queue's worth at a time copies each byte once)."""
        view = memoryview(data)
        end = len(data)
        while end - start >= 4 and not self._queue_full():
            (size,) = _SIZE.unpack_from(view, start)
            if size < 0 or size > self.max_frame:
                start = end
                self._draining = False
                self._end_stream(FrameTooLarge(size, self.max_frame))
                self._pause()
                break
            have = end - start - 4
            if have >= size:
                # A frame that arrived whole is charged but never held back: its bytes are here already, and
                # requests too small to need a buffer of their own are served whoever holds the budget.
                frame = bytes(view[start + 4:start + 4 + size])
                start += 4 + size
                self._push(frame, self._charge(size))
            elif self._draining:
                break   # a frame cut short by the end of input (dropped below)
            elif size >= OWN_BUFFER_BYTES:
                if not self._start_own(size, view[start + 4:end]):
                    break   # waiting for the budget: the bytes stay pending
                start = end
                break
            else:
                break
        if self._draining and not self._queue_full():
            start = end   # what is left is a frame cut short by the end of input: it can never be completed
        if start >= end:
            self._pending, self._pending_at = b"", 0
        elif data is self._pending:
            self._pending_at = start
        else:
            self._pending, self._pending_at = bytes(view[start:end]), 0
        view.release()
        if self._draining and not self._pending:
            self._draining = False

    def _start_own(self, size: int, have) -> bool:
        buf = pooled(size)
        want = size if buf is not None else min(size, max(FIRST_OWN_BYTES, 2 * len(have)))
        if not self._take(want):
            return False
        if buf is None:
            buf = bytearray(want)
        else:
            want = size
        buf[:len(have)] = have
        self._own, self._own_size, self._own_filled, self._own_granted = buf, size, len(have), want
        if self._own_filled == size:
            self._own_done()
        return True

    def _ask_growth(self) -> None:
        step = min(self._own_size - len(self._own), max(len(self._own), FIRST_OWN_BYTES), GROWTH_MAX)
        if self._take(step):
            self._own_granted = len(self._own) + step
        else:
            self._pause()

    def _take(self, n: int) -> bool:
        if self._budget is None:
            return True
        if self._waiting_budget:
            return False
        if not self._budget.take(self, n):
            self._waiting_budget = True
            self._pause()
            return False
        self._charged += n
        return True

    def _charge(self, n: int) -> int:
        if self._budget is None:
            return 0
        self._budget.used += n
        self._charged += n
        return n

    def _budget_freed(self) -> None:
        """The budget has room again: carry on with what was waiting for it."""
        self._waiting_budget = False
        if self._own is not None:
            self._ask_growth()
        elif self._pending:
            self._cut_pending()
        self._maybe_resume()

    def _own_done(self) -> None:
        buf, size = self._own, self._own_size
        self._own = None
        keep(buf)
        self._push(memoryview(buf)[:size], self._own_granted if self._budget is not None else 0)
        if self._budget is not None:
            self._budget.frame_ended(self)

    def _queue_full(self) -> bool:
        return self._queued_bytes >= PAUSE_BYTES or len(self._frames) >= PAUSE_FRAMES

    def _pause(self) -> None:
        if not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    def _maybe_resume(self) -> None:
        """Read again once the queue is down to half and nothing waits for the budget; a backlog kept in
        ``_pending`` is cut first."""
        if not self._reading_paused or self._ended is not None or self._waiting_budget:
            return
        if self._queued_bytes >= PAUSE_BYTES // 2 or len(self._frames) >= PAUSE_FRAMES // 2:
            return
        if self._pending and self._own is None:
            self._cut_pending()
            if self._waiting_budget or self._queue_full():
                return
        if self._own is not None and self._own_filled == self._own_granted:
            return   # its growth waits for the budget
        self._reading_paused = False
        self.transport.resume_reading()

    def eof_received(self) -> bool:
        self._cut_backlog()
        self._end_stream(StreamEnded("connection closed by the peer"))
        self._drop_partial()
        return True   # keep the transport open for what is still to be written; the owner closes it

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = exc or ConnectionResetError("connection lost")
        self._cut_backlog()
        self._end_stream(StreamEnded(str(exc) if exc else "connection closed"))
        self._drop_partial()
        self._release_budget()
        while self._drain_waiters:
            waiter = self._drain_waiters.pop(0)
            if not waiter.done():
                waiter.set_exception(self._lost)
        if not self._closed.done():
            self._closed.set_result(None)

    def _cut_backlog(self) -> None:
        """Whole requests received before the peer stopped sending are still requests, as they were before
        it stopped: they are all handed out before the stream ends. Not all cut here, though: a backlog can be
        a read's worth of tiny requests (13,000 of a 19-byte flood), and cutting them in this callback held
        the loop, and every other connection, for a quarter of a second when 20 such peers went at once.
        ``read_frame`` cuts the rest a queue's worth at a time as the consumer takes them."""
        if self._pending and self._own is None and self._ended is None:
            self._draining = True
            self._cut_pending()

    def _drop_partial(self) -> None:
        """A frame cut short can never be completed: its buffer and its share of the budget go now."""
        if self._own is not None:
            self._own = None
            self._give(self._own_granted)
        if not self._draining:
            self._pending, self._pending_at = b"", 0
        if self._budget is not None:
            if self._waiting_budget:
                self._waiting_budget = False
                try:
                    self._budget.waiting.remove(self)
                except ValueError:
                    pass
            self._budget.frame_ended(self)

    def _release_budget(self) -> None:
        """Give back all this stream holds (frames still queued included: the budget bounds memory being
        received, and nothing more will be received here); later hand-outs then give nothing back."""
        budget, self._budget = self._budget, None
        if budget is None:
            return
        charged, self._charged = self._charged, 0
        if charged:
            budget.give(charged)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        while self._drain_waiters:
            waiter = self._drain_waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)

    # ------------------------------------------------------------------ reading
    def _push(self, frame, charge: int = 0) -> None:
        if self._ended is not None and not self._draining:
            self._give(charge)
            return   # reading was stopped: what arrives afterwards is not a request anyone will answer
        intercept = self.intercept
        if intercept is not None and not self._frames and intercept(frame):
            self._give(charge)
            return
        self._frames.append((frame, charge))
        self._queued_bytes += len(frame)
        if self._queue_full():
            self._pause()
        self._wake_reader()

    def queue_frame(self, frame: bytes) -> None:
        """Queue a frame an ``intercept`` took and now gives up, as if it arrived whole now: an intercept that
        gives it up when offered the next frame keeps arrival order (the next is queued behind it). Dropped once
        reading has stopped, as a frame arriving then would be."""
        if self._ended is not None and not self._draining:
            return
        self._frames.append((frame, 0))
        self._queued_bytes += len(frame)
        self._wake_reader()

    def _give(self, charge: int) -> None:
        if charge and self._budget is not None:
            self._charged -= charge
            self._budget.give(charge)

    def _end_stream(self, reason: Exception) -> None:
        if self._ended is None:
            self._ended = reason
        self._wake_reader()

    def _wake_reader(self) -> None:
        waiter = self._frame_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def end_input(self) -> None:
        """Read no more: ``read_frame`` raises ``StreamEnded`` once the frames already queued are taken."""
        self._draining = False
        self._pending, self._pending_at = b"", 0
        self._end_stream(StreamEnded("reading stopped"))
        if self.transport is not None and not self.transport.is_closing():
            self._pause()

    @property
    def frames_waiting(self) -> int:
        """Frames received whole and not yet taken by ``read_frame``."""
        return len(self._frames)

    @property
    def reader_waiting(self) -> bool:
        """The consumer is waiting in ``read_frame``: it has taken every frame and is busy with none of them."""
        waiter = self._frame_waiter
        return waiter is not None and not waiter.done()

    @property
    def input_ended(self) -> bool:
        """Nothing more will be received: the peer closed or reset the connection, or reading stopped."""
        return self._ended is not None

    async def read_frame(self):
        """The next frame's bytes (without its size prefix); ``StreamEnded`` / ``FrameTooLarge`` after the last."""
        while not self._frames:
            if self._draining:
                self._cut_pending()
                continue
            if self._ended is not None:
                raise self._ended
            self._frame_waiter = asyncio.get_running_loop().create_future()
            try:
                await self._frame_waiter
            finally:
                self._frame_waiter = None
        frame, charge = self._frames.pop(0)   # (at most PAUSE_FRAMES and a read's worth are queued)
        self._queued_bytes -= len(frame)
        if charge:
            self._give(charge)
        if self._reading_paused:
            self._maybe_resume()
        return frame

    # ------------------------------------------------------------------ writing
    def write(self, data) -> None:
        if self._lost is not None:
            raise self._lost   # (not the transport's RuntimeError: to a writer a lost connection is a ConnectionError)
        self.transport.write(data)

    def writelines(self, chunks) -> None:
        if self._lost is not None:
            raise self._lost
        self.transport.writelines(chunks)

    @property
    def writable(self) -> bool:
        """The transport's buffer is below its high-water mark: a write now would not wait in ``drain``."""
        return not self._writing_paused

    async def drain(self) -> None:
        if self._lost is not None:
            raise self._lost
        if not self._writing_paused:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(waiter)
        await waiter

    async def flushed(self) -> None:
        """Wait until the transport's buffer is empty (every byte written has gone to the socket): for a
        writer that then writes to the socket directly, as sendfile does. The transport reports that only to
        a paused writer, so its limits go to zero for the wait (it pauses at once, resumes when empty)."""
        transport = self.transport
        if self._lost is not None:
            raise self._lost
        if transport.get_write_buffer_size() == 0:
            return
        limits = transport.get_write_buffer_limits()
        transport.set_write_buffer_limits(high=0, low=0)
        try:
            await self.drain()
        finally:
            if self._lost is None:
                transport.set_write_buffer_limits(high=limits[1], low=limits[0])

    def get_extra_info(self, name: str, default=None):
        return self.transport.get_extra_info(name, default)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Close now, dropping whatever the peer has not taken."""
        if self.transport is not None:
            self.transport.abort()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)

    @property
    def closed(self) -> bool:
        return self._closed.done()


async def open_frame_stream(host: str, port: int, max_frame: int = 0x7FFFFFFF, ssl=None) -> FrameStream:
    """Connect; ``ssl`` (an ``ssl.SSLContext``) makes it a TLS connection checked against ``host``."""
    loop = asyncio.get_running_loop()
    _, stream = await loop.create_connection(lambda: FrameStream(max_frame), host, port, ssl=ssl,
                                             server_hostname=host if ssl is not None else None)
    return stream
