"""The floor under issue 30's per-byte ratio on this machine: the same bytes moved by plain processes that do
nothing else, at replication factor 1 and 3, measured as the Replication rows measure kbroker.

- A generator (its CPU not counted, as the load generator's is not) streams ``TOTAL`` bytes to a leader over
  loopback TCP.
- The leader reads them into a buffer, checks a CRC-32C over each read and appends it to a file on the tmpfs:
  what any broker does with produced bytes, without a request to decode or an answer to send.
- At replication factor 3 two followers each ask the leader for the bytes from their end (an 8-byte offset, as
  a Fetch names its fetch offset); the leader waits until it has some and sends up to ``MAX_ANSWER`` of them from
  its file with ``os.sendfile`` behind an 8-byte length (Kafka's leader does the same, as does kbroker's);
  the follower reads the whole answer into a buffer, checks its CRC-32C and appends it to its own file.

Blocking sockets and threads, no event loop, no protocol: what is left is the kernel's copies, loopback TCP's
delivery, the CRC and the page cache, which any broker on this machine pays for the same bytes. The figure is
the bytes appended on all replicas over the leader's and followers' utime + stime, each round's and the median
RF=3 round's over the best RF=1 round's, quiet and with one core busy. ``python -m bench.replication_floor``
prints them.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import threading

import crc32c

from tests.brokerproc import ROOT

TOTAL = 1_200_000 * 1024   # the Replication rows' round: 1.2 M records of 1 KiB
CHUNK = 1 << 20            # the generator's writes and the leader's reads
MAX_ANSWER = 10 << 20      # replica.fetch.response.max.bytes
REPEATS = 3
LENGTH = struct.Struct(">q")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)   # (every thread of the process)
    return usage.ru_utime + usage.ru_stime


def _read_exactly(conn: socket.socket, view: memoryview) -> None:
    while view:
        n = conn.recv_into(view)
        if not n:
            raise ConnectionError("closed mid-answer")
        view = view[n:]


def _leader(directory: str, followers: int) -> None:
    """Serve: the generator's bytes appended and sent on to ``followers`` followers; print the CPU used."""
    server = socket.create_server(("127.0.0.1", 0))
    print(server.getsockname()[1], flush=True)
    path = os.path.join(directory, "leader")
    out, source = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), None
    state, ready = {"end": 0, "done": False}, threading.Condition()

    def serve(conn: socket.socket) -> None:
        header = bytearray(LENGTH.size)
        while True:
            _read_exactly(conn, memoryview(header))
            offset = LENGTH.unpack(header)[0]
            with ready:
                ready.wait_for(lambda: state["end"] > offset or state["done"])
                end = state["end"]
            if end <= offset:
                conn.sendall(LENGTH.pack(-1))
                return
            size = min(end - offset, MAX_ANSWER)
            conn.sendall(LENGTH.pack(size))
            while size:
                sent = os.sendfile(conn.fileno(), source, offset, size)
                offset, size = offset + sent, size - sent

    source = os.open(path, os.O_RDONLY)
    generator, threads = None, []
    for _ in range(1 + followers):   # (each says first which it is: a byte, G or F)
        conn = server.accept()[0]
        if conn.recv(1) == b"G":
            generator = conn
        else:
            threads.append(threading.Thread(target=serve, args=(conn,)))
            threads[-1].start()
    buffer = memoryview(bytearray(CHUNK))
    while True:
        n = generator.recv_into(buffer)
        if not n:
            break
        crc32c.crc32c(buffer[:n])
        os.write(out, buffer[:n])
        with ready:
            state["end"] += n
            ready.notify_all()
    with ready:
        state["done"] = True
        ready.notify_all()
    for thread in threads:
        thread.join()
    print(_cpu(), flush=True)


def _follower(directory: str, port: int, index: int) -> None:
    """Copy the leader's bytes into a file of its own until it says there are no more; print the CPU used."""
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(b"F")
    out = os.open(os.path.join(directory, f"follower-{index}"), os.O_WRONLY | os.O_CREAT, 0o600)
    buffer, header, offset = memoryview(bytearray(MAX_ANSWER)), bytearray(LENGTH.size), 0
    while True:
        conn.sendall(LENGTH.pack(offset))
        _read_exactly(conn, memoryview(header))
        size = LENGTH.unpack(header)[0]
        if size < 0:
            break
        _read_exactly(conn, buffer[:size])
        crc32c.crc32c(buffer[:size])
        os.write(out, buffer[:size])
        offset += size
    print(_cpu(), flush=True)


def _generator(port: int) -> None:
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall(b"G")
    chunk = b"\x5a" * CHUNK
    for _ in range(TOTAL // CHUNK):
        conn.sendall(chunk)
    conn.sendall(chunk[:TOTAL % CHUNK])
    conn.close()


def _spawn(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bench.replication_floor", *map(str, args)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)


def one_round(parent: str | None, rf: int) -> float:
    """MB appended on all replicas per CPU-second of the leader and followers, in one round."""
    with tempfile.TemporaryDirectory(prefix="kbroker-floor-", dir=parent) as directory:
        procs = [_spawn("--leader", directory, rf - 1)]
        try:
            port = int(procs[0].stdout.readline())
            procs.append(_spawn("--generator", port))
            procs += [_spawn("--follower", directory, port, i) for i in range(rf - 1)]
            outputs = [p.communicate(timeout=120)[0] for p in procs]
            if any(p.returncode for p in procs):
                raise RuntimeError("a floor process failed")
        finally:
            for p in procs:   # (a process hung or failed: none outlives the round)
                if p.poll() is None:
                    p.kill()
                    p.wait()
        cpu = sum(float(out) for p, out in zip(procs, outputs) if "--generator" not in p.args)
        return TOTAL * rf / 1e6 / cpu


def measure(parent: str | None = None, busy=contextlib.nullcontext) -> tuple[list[float], list[float], float]:
    """(each RF=1 round's MB per CPU-second, each RF=3 round's, the median RF=3 over the best RF=1); the rounds
    alternate, under ``busy()``."""
    rounds: dict[int, list[float]] = {1: [], 3: []}
    with busy():
        for _ in range(REPEATS):
            for rf in rounds:
                rounds[rf].append(one_round(parent, rf))
    return rounds[1], rounds[3], sorted(rounds[3])[REPEATS // 2] / max(rounds[1])


def rows(parent: str | None, modes: dict, ratios: dict) -> list[tuple]:
    """The floor's rows of the Replication table (``modes``: name -> a context to run its rounds in); each mode's
    ratio is also kept in ``ratios`` under ("floor", mode)."""
    out = []
    for mode, busy in modes.items():
        ones, threes, ratio = measure(parent, busy)
        ratios["floor", mode] = ratio
        figures = f"RF=1 {', '.join(f'{x:.0f}' for x in ones)}; RF=3 {', '.join(f'{x:.0f}' for x in threes)}"
        print(f"  floor {mode:13} MB appended per CPU-second: {figures}; median RF=3 / best RF=1 {ratio:.2f}",
              flush=True)
        out.append(("kbroker cluster", f"(floor) MB appended per CPU-second, plain processes moving the same bytes, "
                    f"{mode}: each round", figures))
        out.append(("kbroker cluster", f"(floor) median RF=3 round / best RF=1 round, {mode}", f"{ratio:.2f}"))
    return out


if __name__ == "__main__":
    role, args = (sys.argv[1:] or [""])[0], sys.argv[2:]
    if role == "--leader":
        _leader(args[0], int(args[1]))
    elif role == "--follower":
        _follower(args[0], int(args[1]), int(args[2]))
    elif role == "--generator":
        _generator(int(args[0]))
    else:
        from bench.replication import MODES, tmpfs

        rows(tmpfs(), MODES, {})
