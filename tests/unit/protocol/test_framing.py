"""FrameStream over real loopback sockets: frames cut right however the bytes arrive, large frames received in
place without a held frame ever changing, sizes checked first, memory bounded by backpressure."""

import asyncio
import random
import socket
import struct

import pytest
import uvloop

from kbroker.protocol.frame_buffers import BUFFERS, POOLED_BUFFERS, POOLED_TOTAL_BYTES, keep
from kbroker.protocol.framing import (FIRST_OWN_BYTES, GROWTH_MAX, OWN_BUFFER_BYTES, PAUSE_FRAMES, FrameStream,
                                      FrameTooLarge, StreamEnded)
from kbroker.protocol.receive_budget import ReceiveBudget


def on_both_loops(body):
    """The test ``body`` run on uvloop (the broker's loop, whose BufferedProtocol support is its own code) and on
    asyncio's (the tools')."""
    @pytest.mark.parametrize("run", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])
    def test(run):
        run(body())
    test.__name__, test.__doc__ = body.__name__, body.__doc__
    return test


async def pair(max_frame: int = 0x7FFFFFFF):
    """(the FrameStream of an accepted connection, its peer's raw reader and writer)."""
    accepted = asyncio.get_running_loop().create_future()
    server = await asyncio.get_running_loop().create_server(
        lambda: FrameStream(max_frame, on_connect=accepted.set_result), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    stream = await asyncio.wait_for(accepted, 5)
    server.close()
    return stream, reader, writer


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@on_both_loops
async def test_frames_come_out_whole_and_in_order_however_the_bytes_are_split():
    stream, _, writer = await pair()
    rng = random.Random(7)
    sizes = [0, 1, 3, 100, OWN_BUFFER_BYTES - 1, OWN_BUFFER_BYTES, OWN_BUFFER_BYTES + 1, 300_000, 1_500_000,
             *[rng.randrange(0, 200_000) for _ in range(40)]]
    payloads = [rng.randbytes(n) for n in sizes]
    data = b"".join(framed(p) for p in payloads)

    async def send():
        pos = 0
        while pos < len(data):
            n = rng.choice([1, 2, 3, 5, 4096, 70_000, 400_000])   # header bytes split too, not only bodies
            writer.write(data[pos:pos + n])
            pos += n
            await writer.drain()
            if rng.random() < 0.2:
                await asyncio.sleep(0.001)   # let partial frames arrive on their own

    sender = asyncio.create_task(send())
    received = [bytes(await asyncio.wait_for(stream.read_frame(), 10)) for _ in payloads]
    await sender
    assert [len(r) for r in received] == sizes
    assert received == payloads
    writer.close()
    with pytest.raises(StreamEnded):
        await asyncio.wait_for(stream.read_frame(), 5)


@on_both_loops
async def test_a_large_frame_still_held_is_never_received_into_again():
    stream, _, writer = await pair()
    size = 3 * OWN_BUFFER_BYTES
    first, second, third = (bytes([i]) * size for i in (1, 2, 3))
    for payload in (first, second):
        writer.write(framed(payload)[:100])   # arrives incomplete: received into a buffer of its own
        await writer.drain()
        await asyncio.sleep(0.01)
        writer.write(framed(payload)[100:])
        await writer.drain()
    held = await stream.read_frame()
    slice_of_it = held[10:20]                  # what a decoded record keeps: a view into the frame
    got = await stream.read_frame()
    assert bytes(got) == second
    del got                                    # this buffer is free again; ``held``'s is not
    writer.write(framed(third)[:100])
    await writer.drain()
    await asyncio.sleep(0.01)
    writer.write(framed(third)[100:])
    await writer.drain()
    assert bytes(await stream.read_frame()) == third
    assert bytes(held) == first and bytes(slice_of_it) == first[10:20]
    writer.close()


@on_both_loops
async def test_a_size_over_the_limit_ends_the_stream_after_the_frames_before_it():
    stream, _, writer = await pair(max_frame=1000)
    writer.write(framed(b"ok") + struct.pack(">i", 1001) + b"x" * 50)
    await writer.drain()
    assert await stream.read_frame() == b"ok"
    with pytest.raises(FrameTooLarge) as raised:
        await asyncio.wait_for(stream.read_frame(), 5)
    assert (raised.value.size, raised.value.limit) == (1001, 1000)
    writer.close()


@on_both_loops
async def test_a_negative_size_ends_the_stream():
    stream, _, writer = await pair()
    writer.write(struct.pack(">i", -5))
    await writer.drain()
    with pytest.raises(FrameTooLarge):
        await asyncio.wait_for(stream.read_frame(), 5)
    writer.close()


@on_both_loops
async def test_a_reader_that_does_not_read_stops_the_sender_instead_of_buffering_everything():
    stream, _, writer = await pair()
    frame = framed(b"y" * 100_000)
    total = 400   # 40 MB: far more than the stream's pause mark and the sockets' buffers together

    async def send():
        for _ in range(total):
            writer.write(frame)
            await writer.drain()

    sender = asyncio.create_task(send())
    await asyncio.sleep(0.5)
    assert not sender.done(), "the sender should be held back by a receiver that reads nothing"
    for _ in range(total):
        assert len(await asyncio.wait_for(stream.read_frame(), 10)) == 100_000
    await asyncio.wait_for(sender, 10)
    writer.close()


@on_both_loops
async def test_the_peer_closing_mid_frame_ends_the_stream_after_the_whole_frames():
    stream, _, writer = await pair()
    writer.write(framed(b"whole") + framed(b"cut short")[:6])
    await writer.drain()
    writer.close()
    assert await stream.read_frame() == b"whole"
    with pytest.raises(StreamEnded):
        await asyncio.wait_for(stream.read_frame(), 5)


@on_both_loops
async def test_stopping_input_still_hands_out_what_was_queued_and_writes_still_go_out():
    stream, reader, writer = await pair()
    writer.write(framed(b"one") + framed(b"two"))
    await writer.drain()
    await asyncio.sleep(0.05)
    stream.end_input()
    assert [await stream.read_frame(), await stream.read_frame()] == [b"one", b"two"]
    with pytest.raises(StreamEnded):
        await stream.read_frame()
    stream.write(b"answer")
    await stream.drain()
    stream.close()
    assert await asyncio.wait_for(reader.read(), 5) == b"answer"
    await stream.wait_closed()
    assert stream.closed
    writer.close()


async def until(condition, timeout: float = 5.0) -> None:
    """Wait (a few event-loop turns at a time) until ``condition()`` holds; fail after ``timeout``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


async def budget_server(budget: ReceiveBudget):
    """A server whose accepted streams share ``budget``: (queue of accepted streams, port, server)."""
    accepted: asyncio.Queue = asyncio.Queue()
    server = await asyncio.get_running_loop().create_server(
        lambda: FrameStream(1 << 30, on_connect=accepted.put_nowait, budget=budget), "127.0.0.1", 0)
    return accepted, server.sockets[0].getsockname()[1], server


@on_both_loops
async def test_an_announced_frame_holds_only_what_arrived():
    budget = ReceiveBudget(0)   # unbounded: only counts
    accepted, port, server = await budget_server(budget)
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(struct.pack(">i", 100_000_000) + b"x" * 10)
    await writer.drain()
    await asyncio.wait_for(accepted.get(), 5)
    await until(lambda: budget.used)
    assert budget.used <= FIRST_OWN_BYTES        # not 100 MB
    writer.write(b"y" * 1_000_000)
    await writer.drain()
    await until(lambda: budget.used >= 1_000_010)
    assert budget.used <= 4 * 1_000_010          # it grows with what arrives, doubling at most
    writer.close()
    await until(lambda: budget.used == 0)       # a frame cut short gives its share back
    server.close()


@on_both_loops
async def test_past_the_budget_large_frames_wait_small_ones_pass_and_a_reset_frees_the_share():
    budget = ReceiveBudget(1 << 20)
    accepted, port, server = await budget_server(budget)
    writers = []
    for _ in range(4):   # each sends 1 MB of a 10 MB frame: together more than the budget
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(struct.pack(">i", 10_000_000) + b"z" * 1_000_000)
        writers.append(writer)
    streams = [await asyncio.wait_for(accepted.get(), 5) for _ in writers]
    await until(lambda: len(budget.waiting) >= 2)   # (one more may go past the limit: the overflow stream)
    assert budget.used < (1 << 20) + 2 * GROWTH_MAX   # one grant may go past the limit, as in Kafka's pool
    reader, small = await asyncio.open_connection("127.0.0.1", port)
    small.write(framed(b"still served"))
    stream = await asyncio.wait_for(accepted.get(), 5)
    assert await asyncio.wait_for(stream.read_frame(), 5) == b"still served"
    for writer in writers:   # RST: the waiting streams do not read, so only the hang-up check sees it
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
    for s in streams:
        await asyncio.wait_for(s.wait_closed(), 5)
    assert budget.used == 0 and not budget.waiting
    small.close()
    server.close()


@on_both_loops
async def test_a_frame_larger_than_the_whole_budget_still_gets_through():
    budget = ReceiveBudget(1 << 20)
    accepted, port, server = await budget_server(budget)
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    payload = random.Random(3).randbytes(5_000_000)
    writer.write(framed(payload))
    stream = await asyncio.wait_for(accepted.get(), 5)
    frame = await asyncio.wait_for(stream.read_frame(), 10)
    assert bytes(frame) == payload
    assert budget.used == 0   # handed out: no longer charged
    writer.close()
    server.close()


@on_both_loops
async def test_a_burst_sent_before_the_peer_stops_sending_is_handed_out_whole():
    """More frames than the queue holds arrive in one read, then the peer half-closes: the backlog kept
    aside is not lost with the end of input."""
    stream, _, writer = await pair()
    frames = [b"request-%04d" % i for i in range(2000)]
    writer.write(b"".join(framed(f) for f in frames))
    writer.write_eof()
    await writer.drain()
    await until(lambda: stream.frames_waiting == PAUSE_FRAMES)   # the rest is kept aside before one is taken
    got = []
    with pytest.raises(StreamEnded):
        while True:
            got.append(bytes(await asyncio.wait_for(stream.read_frame(), 5)))
    assert got == frames
    writer.close()


@on_both_loops
async def test_a_reset_peers_backlog_is_handed_out_whole_a_queues_worth_at_a_time():
    """A peer pipelines 20,000 tiny requests, so a read's worth waits beyond the queue's bound, and resets the
    connection; a write then finds the reset. Every whole request the stream had read still comes out, in
    order, and then the end (what the kernel still held went with the reset). The callback that saw the reset
    queued no more than the bound: the rest is cut as the frames are taken (cut at once, 20 such peers held
    the loop for a quarter of a second)."""
    stream, _, writer = await pair()
    frames = [b"r%05d" % i for i in range(20_000)]
    writer.write(b"".join(framed(f) for f in frames))
    await writer.drain()
    await until(lambda: stream.frames_waiting == PAUSE_FRAMES)
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()   # an RST: the peer's unread answers are thrown away
    await until(lambda: _write_fails(stream) or stream.input_ended)
    await until(lambda: stream.input_ended)
    assert stream.frames_waiting <= PAUSE_FRAMES
    got = []
    with pytest.raises(StreamEnded):
        while True:
            got.append(await asyncio.wait_for(stream.read_frame(), 5))
            assert stream.frames_waiting <= PAUSE_FRAMES
    assert len(got) > 10 * PAUSE_FRAMES and got == frames[:len(got)]


@on_both_loops
async def test_a_frame_cut_short_by_the_end_of_input_is_dropped_after_the_whole_ones_before_it():
    """Whole frames, then a frame's first bytes, then EOF, all in one read: the whole ones come out, the
    partial one can never complete and is dropped, and the stream ends."""
    stream, _, writer = await pair()
    frames = [b"q%04d" % i for i in range(3 * PAUSE_FRAMES)]
    writer.write(b"".join(framed(f) for f in frames) + framed(b"cut short")[:-3])
    writer.write_eof()
    await writer.drain()
    got = []
    with pytest.raises(StreamEnded):
        while True:
            got.append(await asyncio.wait_for(stream.read_frame(), 5))
    assert got == frames


def _write_fails(stream: FrameStream) -> bool:
    try:
        stream.write(b"\0\0\0\0")
        return False
    except ConnectionError:
        return True


@on_both_loops
async def test_an_intercept_takes_frames_only_when_none_is_queued_ahead_of_them():
    """``intercept`` sees each whole frame in the transport's callback; a frame it takes is not queued. While
    frames wait for the reader, those after them are queued without being offered: read order is arrival order."""
    stream, _, writer = await pair()
    offered = []
    stream.intercept = lambda frame: offered.append(frame) or frame.startswith(b"take")
    writer.write(framed(b"take 1") + framed(b"keep 2") + framed(b"take 3"))
    await until(lambda: stream.frames_waiting == 2)
    assert offered == [b"take 1", b"keep 2"]   # 3 came behind 2, which was queued: not offered
    writer.write(framed(b"take 4"))
    await until(lambda: stream.frames_waiting == 3)
    assert [await stream.read_frame() for _ in range(3)] == [b"keep 2", b"take 3", b"take 4"]
    writer.write(framed(b"take 5") + framed(b"keep 6"))
    await until(lambda: len(offered) == 4)
    assert offered[2:] == [b"take 5", b"keep 6"] and await stream.read_frame() == b"keep 6"
    writer.close()


@on_both_loops
async def test_a_frame_an_intercept_gives_back_is_read_before_the_frames_that_came_after_it():
    """An intercept holding a frame may give it up with ``queue_frame`` when the next frame arrives: the reader
    gets the held one first, then the newcomer. Once reading has stopped, a frame given back is dropped."""
    stream, _, writer = await pair()
    held = []

    def intercept(frame) -> bool:
        if held:
            stream.queue_frame(held.pop())   # (given back ahead of the frame being offered)
            return False
        held.append(frame)
        return True

    assert not stream.reader_waiting
    reading = asyncio.ensure_future(stream.read_frame())
    await until(lambda: stream.reader_waiting)   # (what an intercept checks: the reader has nothing in hand)
    writer.write(framed(b"first"))
    assert await asyncio.wait_for(reading, 5) == b"first" and not stream.reader_waiting
    stream.intercept = intercept
    writer.write(framed(b"held"))
    await until(lambda: held)
    assert stream.frames_waiting == 0
    writer.write(framed(b"next"))
    assert [await asyncio.wait_for(stream.read_frame(), 5) for _ in range(2)] == [b"held", b"next"]
    stream.end_input()
    stream.queue_frame(b"late")
    with pytest.raises(StreamEnded):
        await asyncio.wait_for(stream.read_frame(), 5)
    writer.close()


@on_both_loops
async def test_a_fetch_answer_of_10_mib_is_received_into_the_buffer_the_last_one_left():
    """A follower's fetch answers reach replica.fetch.response.max.bytes (10 MiB): one that arrives after the
    last was released is received into that one's buffer, not into a fresh one grown as its bytes come."""
    BUFFERS.pool.clear()
    stream, _, writer = await pair()
    size = 10 << 20
    writer.write(framed(b"\1" * size))
    first = await stream.read_frame()
    assert len(first) == size and bytes(first[-1:]) == b"\1"
    buffer_id = id(first.obj)   # (not the buffer itself: a reference held here would keep it out of use)
    first.release()
    del first
    writer.write(framed(b"\2" * size))
    second = await stream.read_frame()
    assert id(second.obj) == buffer_id and bytes(second) == b"\2" * size
    writer.close()


def test_the_pool_keeps_the_largest_buffers_within_its_count_and_bytes():
    BUFFERS.pool.clear()
    try:
        for mib in (1, 10, 4, 12, 20, 16, 2, 8, 3, 3, 3, 3, 3, 3, 3):
            keep(bytearray(mib << 20))
            sizes = [len(b) >> 20 for b in BUFFERS.pool]
            assert len(sizes) <= POOLED_BUFFERS and sum(sizes) << 20 <= POOLED_TOTAL_BYTES
        # 20 MiB is over the largest kept; 16 MiB made room by dropping 1, 4 and 10; 8 MiB would have had to
        # drop a larger one (and dropped nothing); the first 3 took the 2's place, the next found no room.
        assert sizes == [3, 12, 16]
    finally:
        BUFFERS.pool.clear()
