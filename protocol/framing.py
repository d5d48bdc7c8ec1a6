"""FrameStream: Kafka's size-prefixed frames read off a transport with as few copies as the sizes allow.

Both ends of the protocol (the broker's connections and ``client``'s) read
``int32 size`` + ``size`` bytes at a time. asyncio's StreamReader copies every
byte twice on the way (into its buffer, then out of it for ``readexactly``);
at replication rates those copies cost as much as writing the log. This is a
``BufferedProtocol`` instead: the transport receives into a scratch buffer,
frames that arrived whole are cut out of it with one copy, and a large frame
that has not yet arrived whole gets a buffer of its own that the socket then
fills in place (no copy at all beyond the kernel's).

Invariants:
* a frame's size is checked against ``max_frame`` before anything is
  allocated for it; a bad size ends the stream with ``FrameTooLarge``;
* frames come out of ``read_frame`` in arrival order: ``bytes``, or for a large
  one a ``memoryview`` of a pooled buffer that is received into again only
  once no view of it is left anywhere (so a frame's bytes never change
  under whoever still holds them);
* memory is bounded: reading pauses while ``PAUSE_BYTES`` of frames wait for
  the consumer, and writers wait in ``drain`` while the transport's buffer is
  above its high-water mark.
"""

from __future__ import annotations

import asyncio
import collections
import struct
import sys

_SIZE = struct.Struct(">i")
SCRATCH_BYTES = 256 * 1024
OWN_BUFFER_BYTES = 32 * 1024   # an incomplete frame at least this large is received straight into its own buffer
PAUSE_BYTES = 1 << 20
PAUSE_FRAMES = 64
POOLED_BUFFERS = 4
POOLED_BYTES_MAX = 4 << 20     # larger frames get a buffer of their own that is not kept


def _references_when_unused() -> int:
    """What ``sys.getrefcount`` reports for a pooled buffer seen in ``_buffer``'s loop when nothing else holds
    it (the pool, the loop variable, the call's argument), measured rather than assumed."""
    pool = [bytearray(1)]
    for buf in pool:
        return sys.getrefcount(buf)
    raise AssertionError


_UNREFERENCED = _references_when_unused()


class StreamEnded(ConnectionError):
    """The peer closed the connection (or the local side stopped reading) between frames."""


class FrameTooLarge(ConnectionError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes (limit {limit})")
        self.size = size
        self.limit = limit


class FrameStream(asyncio.BufferedProtocol):
    """One connection's frames in, bytes out. ``on_connect(stream)`` runs when the transport is made
    (a server starts its per-connection task there)."""

    def __init__(self, max_frame: int = 0x7FFFFFFF, on_connect=None) -> None:
        self.max_frame = max_frame
        self._on_connect = on_connect
        self.transport: asyncio.Transport | None = None
        self._scratch = bytearray(SCRATCH_BYTES)
        self._view = memoryview(self._scratch)
        self._start = self._end = 0          # unparsed bytes in the scratch buffer
        self._own: memoryview | None = None   # a large frame being received in place
        self._own_filled = 0
        self._pool: list[bytearray] = []      # buffers large frames were received into, for reuse
        self._frames: collections.deque = collections.deque()
        self._queued_bytes = 0
        self._reading_paused = False
        self._ended: Exception | None = None  # why no more frames will come (after those queued)
        self._frame_waiter: asyncio.Future | None = None
        self._writing_paused = False
        self._drain_waiters: collections.deque = collections.deque()
        self._lost: Exception | None = None
        self._closed = asyncio.get_running_loop().create_future()

    # ------------------------------------------------------------------ transport callbacks
    def connection_made(self, transport) -> None:
        self.transport = transport
        if self._on_connect is not None:
            self._on_connect(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._own is not None:
            return self._own[self._own_filled:]
        if self._start == self._end:
            self._start = self._end = 0
        elif SCRATCH_BYTES - self._end < OWN_BUFFER_BYTES:
            # Move the unparsed tail (less than one own-buffer frame plus a header) to the front.
            tail = self._view[self._start:self._end].tobytes()   # (a copy: source and target may overlap)
            self._scratch[:len(tail)] = tail
            self._start, self._end = 0, len(tail)
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._own is not None:
            self._own_filled += nbytes
            if self._own_filled == len(self._own):
                frame, self._own = self._own, None
                self._push(frame)
            return
        self._end += nbytes
        self._cut_frames()

    def _cut_frames(self) -> None:
        scratch, start, end = self._scratch, self._start, self._end
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(scratch, start)
            if size < 0 or size > self.max_frame:
                self._start = self._end = 0
                self._end_stream(FrameTooLarge(size, self.max_frame))
                self._reading_paused = True
                self.transport.pause_reading()
                return
            have = end - start - 4
            if have >= size:
                self._push(bytes(self._view[start + 4:start + 4 + size]))
                start += 4 + size
            elif size >= OWN_BUFFER_BYTES:
                frame = self._buffer(size)
                frame[:have] = self._view[start + 4:end]
                self._own, self._own_filled = frame, have
                start = end = 0
                break
            else:
                break
        self._start, self._end = start, end

    def _buffer(self, size: int) -> memoryview:
        """``size`` bytes to receive a large frame into: a pooled buffer nothing refers to any more, if one is
        big enough. (Allocating a fresh one costs more than the copy it saves: the allocator zero-fills it and
        the kernel faults its pages in.) A buffer is free when its only references are the pool's: every
        frame handed out is a view that holds the buffer until the last slice of it is gone."""
        for buf in self._pool:
            if len(buf) >= size and sys.getrefcount(buf) <= _UNREFERENCED:
                return memoryview(buf)[:size]
        buf = bytearray(max(size, OWN_BUFFER_BYTES * 2))
        if size <= POOLED_BYTES_MAX:
            if len(self._pool) >= POOLED_BUFFERS:
                self._pool.remove(min(self._pool, key=len))   # keep the larger ones: they fit more frames
            self._pool.append(buf)
        return memoryview(buf)[:size]

    def eof_received(self) -> bool:
        self._end_stream(StreamEnded("connection closed by the peer"))
        return True   # keep the transport open for what is still to be written; the owner closes it

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = exc or ConnectionResetError("connection lost")
        self._end_stream(StreamEnded(str(exc) if exc else "connection closed"))
        while self._drain_waiters:
            waiter = self._drain_waiters.popleft()
            if not waiter.done():
                waiter.set_exception(self._lost)
        if not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        while self._drain_waiters:
            waiter = self._drain_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    # ------------------------------------------------------------------ reading
    def _push(self, frame) -> None:
        if self._ended is not None:
            return   # reading was stopped: what arrives afterwards is not a request anyone will answer
        self._frames.append(frame)
        self._queued_bytes += len(frame)
        if not self._reading_paused and (self._queued_bytes >= PAUSE_BYTES or len(self._frames) >= PAUSE_FRAMES):
            self._reading_paused = True
            self.transport.pause_reading()
        self._wake_reader()

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
        self._end_stream(StreamEnded("reading stopped"))
        if self.transport is not None and not self._reading_paused and not self.transport.is_closing():
            self._reading_paused = True
            self.transport.pause_reading()

    async def read_frame(self):
        """The next frame's bytes (without its size prefix); ``StreamEnded`` / ``FrameTooLarge`` after the last."""
        while not self._frames:
            if self._ended is not None:
                raise self._ended
            self._frame_waiter = asyncio.get_running_loop().create_future()
            try:
                await self._frame_waiter
            finally:
                self._frame_waiter = None
        frame = self._frames.popleft()
        self._queued_bytes -= len(frame)
        if self._reading_paused and self._queued_bytes < PAUSE_BYTES // 2 and len(self._frames) < PAUSE_FRAMES // 2 \
                and self._ended is None:
            self._reading_paused = False
            self.transport.resume_reading()
        return frame

    # ------------------------------------------------------------------ writing
    def write(self, data) -> None:
        self.transport.write(data)

    def writelines(self, chunks) -> None:
        self.transport.writelines(chunks)

    async def drain(self) -> None:
        if self._lost is not None:
            raise self._lost
        if not self._writing_paused:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(waiter)
        await waiter

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
