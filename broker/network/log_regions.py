"""Log regions out to a client without holding them in memory: fetch answers, however large they were asked to be.

A fetch answer's records are ``FileRegion``s of segment files. Small ones are
read into the answer so that it leaves in one writev; a large one goes out
with ``os.sendfile`` from the page cache (plaintext listeners) or in chunks
read and written one at a time (TLS, where bytes must pass through the
encryption), each written only once the previous one has left.

Invariants:
* a connection holds at most ``CHUNK_BYTES`` of a large region in memory at
  a time, and at most ``SMALL_FLUSH_BYTES`` of small regions before it waits
  for the socket to take them;
* everything read from the log for answers being written is counted by one
  broker-wide ``SendMemory`` (``kbroker.fetch.send.memory.bytes``); past its
  limit a connection waits before reading more, so the total stays under the
  limit plus one chunk;
* bytes go out in order: sendfile writes to the socket directly, so it is
  called only once the transport's own buffer is empty.
"""

from __future__ import annotations

import asyncio
import collections
import os

from kbroker.protocol.framing import FrameStream
from kbroker.protocol.types import FileRegion, read_region

SENDFILE_MIN_BYTES = 64 * 1024    # smaller regions are read into the answer
CHUNK_BYTES = 256 * 1024          # what a connection reads of a large region at a time
NUDGE_BYTES = 16 * 1024           # read and written when the socket is full, to learn when it drains again
SMALL_FLUSH_BYTES = 1 << 20       # small regions read into an answer before it waits for the socket


class SendMemory:
    """Bytes read from the log for answers not yet taken by their sockets, across the broker."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.waits = 0   # how often a connection waited for it (a metric)
        self._waiters: collections.deque = collections.deque()

    def try_take(self, n: int) -> bool:
        if self.used and self.used + n > self.limit:
            return False
        self.used += n
        return True

    async def take(self, n: int) -> None:
        """Wait until ``n`` more bytes fit (anything fits when nothing is held, so one chunk always goes)."""
        while not self.try_take(n):
            self.waits += 1
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def give(self, n: int) -> None:
        self.used -= n
        while self._waiters:   # each waiter checks again; those that still do not fit wait again
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)


async def write_answer(stream: FrameStream, head, regions: list[tuple[int, FileRegion]], memory: SendMemory,
                       sendfile_fd: int) -> None:
    """Write an encoded answer (``head``, the bytes around its regions) with its regions in place, where
    ``regions`` are (position in ``head``, region) in order. ``sendfile_fd``: the socket's descriptor where
    sendfile may be used, else -1."""
    chunks, start, held = [], 0, 0

    async def flush() -> None:
        """Write what is gathered and wait for the socket; the small regions read into it are given back
        once, whether the wait ends or fails."""
        nonlocal chunks, held
        stream.writelines(chunks)
        chunks, given, held = [], held, 0
        try:
            await stream.drain()
        finally:
            if given:
                memory.give(given)

    try:
        for position, region in regions:
            chunks.append(head[start:position])
            start = position
            if region.length >= SENDFILE_MIN_BYTES:
                await flush()
                await send_region(stream, region, memory, sendfile_fd)
                continue
            if held and held + region.length > SMALL_FLUSH_BYTES:
                await flush()
            if not memory.try_take(region.length):
                await memory.take(region.length)
            held += region.length
            chunks.append(read_region(region.file, region.position, region.length))
        chunks.append(head[start:])
        await flush()
    finally:
        if held:   # (read, never written: the connection failed before)
            memory.give(held)


async def send_region(stream: FrameStream, region: FileRegion, memory: SendMemory, sendfile_fd: int) -> None:
    """A large region: by sendfile as far as the socket takes it, the rest in bounded chunks."""
    sent, length = 0, region.length
    while sent < length:
        if sendfile_fd >= 0:
            await stream.flushed()
            sent += _sendfile(sendfile_fd, region, sent)
            if sent >= length:
                return
        # The socket is full (or sendfile is not for this one): a chunk through the transport, whose drain
        # tells when the socket takes bytes again.
        n = min(NUDGE_BYTES if sendfile_fd >= 0 else CHUNK_BYTES, length - sent)
        await memory.take(n)
        try:
            stream.write(read_region(region.file, region.position + sent, n))
            sent += n
            await (stream.flushed() if sendfile_fd >= 0 else stream.drain())
        finally:
            memory.give(n)


def _sendfile(fd: int, region: FileRegion, offset: int) -> int:
    """What the socket takes now of ``region`` from ``offset``, by sendfile (never blocks)."""
    sent = 0
    try:
        while offset + sent < region.length:
            n = os.sendfile(fd, region.file.fileno(), region.position + offset + sent, region.length - offset - sent)
            if n == 0:
                break
            sent += n
    except (BlockingIOError, InterruptedError):
        pass
    except OSError as exc:   # the peer went away (EPIPE, ECONNRESET): the connection's end, not a log error
        raise ConnectionResetError(str(exc)) from None
    return sent
