"""Hostile and heavy clients against a real broker process, and the broker's resident memory while they run.

Used by the integration tests and by ``bench`` (the flood probe and the memory per idle connection). Every
attack here is bounded in connections and in time and talks only to the broker's loopback port.
"""

from __future__ import annotations

import os
import selectors
import socket
import struct
import time

API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 7, 5) + b"probe"
API_VERSIONS_FRAME = struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0


def rss_bytes(pid: int) -> int:
    """The process's resident set now (VmRSS)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def settled_rss(pid: int, seconds: float = 2.0) -> int:
    """The resident set once it stops moving by more than a MiB in a tenth of a second (connections that
    just closed are torn down over a few event-loop turns), or where it is after ``seconds``."""
    last = rss_bytes(pid)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = rss_bytes(pid)
        if abs(now - last) < 1 << 20:
            return now
        last = now
    return last


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def probe_round_trip(port: int, timeout: float = 10.0) -> float:
    """Seconds for one ApiVersions request on a fresh connection, connect included; raises if unanswered."""
    started = time.monotonic()
    with connect(port, timeout) as sock:
        sock.sendall(API_VERSIONS_FRAME)
        read_frame(sock)
    return time.monotonic() - started


def read_frame(sock: socket.socket) -> bytes:
    header = recv_exactly(sock, 4)
    (size,) = struct.unpack(">i", header)
    return recv_exactly(sock, size)


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("closed by the broker")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def announce_frames(port: int, count: int, size: int, header_bytes: bytes = API_VERSIONS_V0[:6]) -> list:
    """``count`` connections that each announce a frame of ``size`` bytes and send only its first few bytes."""
    socks = []
    for _ in range(count):
        sock = connect(port)
        sock.sendall(struct.pack(">i", size) + header_bytes)
        socks.append(sock)
    return socks


def trickle(socks: list, seconds: float, interval: float = 0.2) -> None:
    """Send one more byte on each connection every ``interval`` for ``seconds``; connections the broker
    closed are left alone."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for sock in socks:
            try:
                sock.send(b"\0")
            except OSError:
                pass
        time.sleep(interval)


def close_all(socks: list) -> None:
    for sock in socks:
        sock.close()


def connect_accepted(port: int, pid: int, count: int, step: int = 25) -> list[socket.socket]:
    """``count`` connections to the broker ``pid``, opened ``step`` at a time, each step once the broker has
    accepted the previous one: a burst beyond the listen backlog (``socket.listen.backlog.size``, 50 as in Kafka)
    would have the kernel drop SYNs and the client resend them a second later, which measures TCP's retry
    timer, not the broker. The broker's descriptors must be steady when it is called: their count then is the
    base the new connections add to."""
    base, socks = open_fds(pid), []
    while len(socks) < count:
        socks += [connect(port) for _ in range(min(step, count - len(socks)))]
        assert wait_for(lambda: open_fds(pid) >= base + len(socks), 10, 0.002), f"{len(socks)} not accepted"
    return socks


def wait_for(condition, timeout: float, interval: float = 0.05):
    """Poll ``condition`` until it returns something true; that value, or None at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


class PipelinedFlood:
    """``connections`` clients that each write ``requests`` ApiVersions requests back to back and read no
    answer: the socket buffers fill, and what the broker does meanwhile with everyone else is measured."""

    def __init__(self, port: int, connections: int = 20, requests: int = 100_000) -> None:
        self.socks = [connect(port) for _ in range(connections)]
        for sock in self.socks:
            sock.setblocking(False)
        self.pending = {sock: API_VERSIONS_FRAME * requests for sock in self.socks}
        self.selector = selectors.DefaultSelector()
        for sock in self.socks:
            self.selector.register(sock, selectors.EVENT_WRITE)

    def pump(self, seconds: float) -> None:
        """Write what the broker takes for up to ``seconds`` (less once every request is sent)."""
        deadline = time.monotonic() + seconds
        while self.pending and time.monotonic() < deadline:
            for key, _ in self.selector.select(timeout=0.01):
                sock = key.fileobj
                data = self.pending[sock]
                try:
                    sent = sock.send(data[:1 << 18])
                except BlockingIOError:
                    continue
                except OSError:
                    sent = len(data)
                data = data[sent:]
                if data:
                    self.pending[sock] = data
                else:
                    del self.pending[sock]
                    self.selector.unregister(sock)

    def close(self) -> None:
        self.selector.close()
        close_all(self.socks)


def flood_probe(port: int, connections: int = 20, requests: int = 100_000, probes: int = 100,
                seconds: float = 10.0) -> list[float]:
    """Round-trip times of ``probes`` fresh-connection ApiVersions requests sent while a pipelined flood runs
    (the flood's writer is pumped between probes, so the broker always has unread requests waiting)."""
    flood = PipelinedFlood(port, connections, requests)
    times = []
    try:
        flood.pump(0.5)
        deadline = time.monotonic() + seconds
        while len(times) < probes and time.monotonic() < deadline:
            times.append(probe_round_trip(port))
            flood.pump(0.02)
    finally:
        flood.close()
    return times


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# ---------------------------------------------------------------------------------------------- compressed bombs
CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _zero_stream_compressed(codec: int, prefix: bytes, zeros: int, suffix: bytes) -> bytes:
    """``prefix`` + ``zeros`` zero bytes + ``suffix``, compressed a MiB at a time (gigabytes never exist)."""
    import zlib

    block = bytes(1 << 20)

    def pieces():
        yield prefix
        left = zeros
        while left:
            n = min(left, len(block))
            yield block[:n]
            left -= n
        yield suffix

    if codec == 1:
        comp = zlib.compressobj(9, zlib.DEFLATED, 31)
        return b"".join(comp.compress(p) for p in pieces()) + comp.flush()
    if codec == 3:
        import lz4.frame

        comp = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX4MB, compression_level=9)
        return comp.begin() + b"".join(comp.compress(p) for p in pieces()) + comp.flush()
    if codec == 4:
        import zstandard

        comp = zstandard.ZstdCompressor(level=3).compressobj()
        return b"".join(comp.compress(p) for p in pieces()) + comp.flush()
    if codec == 2:   # xerial framing, as the Java client writes snappy: blocks of 32 KiB
        import cramjam

        data = b"".join(pieces())
        out = [b"\x82SNAPPY\x00", struct.pack(">ii", 1, 1)]
        for start in range(0, len(data), 32 * 1024):
            block = bytes(cramjam.snappy.compress_raw(data[start:start + 32 * 1024]))
            out += [struct.pack(">i", len(block)), block]
        return b"".join(out)
    raise ValueError(codec)


def bomb_batch(codec: int, inflated: int, well_formed: bool) -> bytes:
    """A v2 batch with a right CRC whose compressed records section decompresses to ``inflated`` bytes.
    ``well_formed``: one keyed record whose value is the zeros (its structure adds up, so only a bound on the
    decompressed size refuses it); otherwise zeros alone (the first record does not add up)."""
    import crc32c

    from kbroker.protocol.records import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE, LOG_OVERHEAD
    from kbroker.protocol.types import encode_varint

    if well_formed:
        value = inflated - 64
        fields = b"\0" + encode_varint(0) + encode_varint(0) + encode_varint(1) + b"k" + encode_varint(value)
        length = len(fields) + value + 1
        prefix, suffix = encode_varint(length) + fields, encode_varint(0)
        body = _zero_stream_compressed(codec, prefix, value, suffix)
    else:
        body = _zero_stream_compressed(codec, b"", inflated, b"")
    now = int(time.time() * 1000)
    header = bytearray(struct.pack(">qiibIhiqqqhii", 0, HEADER_SIZE - LOG_OVERHEAD + len(body), -1, 2, 0, codec,
                                   0, now, now, -1, -1, -1, 1))
    batch = header + body
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return bytes(batch)


def produce_frame(topic: str, records: bytes, correlation_id: int = 1, acks: int = 1) -> bytes:
    """A whole Produce v9 request frame (size prefix included) carrying ``records`` to partition 0."""
    import io

    from kbroker.protocol import schema
    from kbroker.protocol.headers import RequestHeader, encode_request_header

    out = io.BytesIO()
    out.write(encode_request_header(RequestHeader(0, 9, correlation_id, "bomber"), True))
    schema.encode(schema.struct_for(0, 9, True), {
        "transactional_id": None, "acks": acks, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}, out)
    body = out.getvalue()
    return struct.pack(">i", len(body)) + body
