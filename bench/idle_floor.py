"""The floor under an idle replicated cluster's cost on this machine (issue 30): three processes shaped like three
brokers whose followers long-poll each other, doing no work at all.

Each process is a uvloop server and holds one connection to each of the other two (6 connections, as three
brokers' replica fetchers are: each follows two leaders). A "follower" sends 8 bytes; the "leader" parks them
for ``WAIT_MS`` on the event loop's timer (as a fetch parks in the purgatory until ``replica.fetch.wait.max.ms``)
and sends them back; the follower sends them again at once. That is the idle cluster's twelve round trips a
second with nothing decoded, looked up or encoded: what the kernel, the event loop and the machine's wake-ups
cost any process, whatever it does in each round. ``python -m bench.idle_floor`` prints the share of a core.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

from bench.loadgen import cpu_seconds
from tests.brokerproc import ROOT

WAIT_MS = 500   # Kafka's replica.fetch.wait.max.ms
ROUND_TRIPS_PER_S = 3 * 2 * 1000 // WAIT_MS   # three processes, each following the other two
SECONDS = 60
SETTLE_SECONDS = 3


class _Leader(asyncio.Protocol):
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        asyncio.get_running_loop().call_later(WAIT_MS / 1000, self.transport.write, data)


class _Follower(asyncio.Protocol):
    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(b"\0" * 8)

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)


async def _node() -> None:
    """One process: serve, print the port, read the two peers' ports from stdin, follow both, run until killed."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Leader, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    peers = await loop.run_in_executor(None, sys.stdin.readline)
    for port in peers.split():
        await loop.create_connection(_Follower, "127.0.0.1", int(port))
    await asyncio.Event().wait()


def measure(seconds: float = SECONDS) -> float:
    """The three processes' CPU over ``seconds``, as a share of one core."""
    procs = [subprocess.Popen([sys.executable, "-m", "bench.idle_floor", "--node"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=ROOT) for _ in range(3)]
    try:
        ports = [p.stdout.readline().strip() for p in procs]
        for i, p in enumerate(procs):
            p.stdin.write(" ".join(port for j, port in enumerate(ports) if j != i) + "\n")
            p.stdin.flush()
        pids = [p.pid for p in procs]
        time.sleep(SETTLE_SECONDS)   # (the connections made and the first rounds over)
        before, began = sum(map(cpu_seconds, pids)), time.monotonic()
        time.sleep(seconds)   # (measuring processes left alone: the wait is the measurement)
        return (sum(map(cpu_seconds, pids)) - before) / (time.monotonic() - began)
    finally:
        for p in procs:
            p.kill()
            p.wait()


def wake_cost(wakes: int = 8) -> float:
    """CPU µs this thread is charged per wake of a sleep of ``WAIT_MS``, doing nothing else: what the machine's
    hour charges any process for waking (microseconds on a quiet hour; on some hours, milliseconds that grow
    with the time asleep)."""
    began = time.thread_time()
    for _ in range(wakes):
        time.sleep(WAIT_MS / 1000)   # (the sleep is the measurement)
    return (time.thread_time() - began) / wakes * 1e6


if __name__ == "__main__":
    if sys.argv[1:] == ["--node"]:
        import uvloop

        uvloop.run(_node())
    else:
        print(f"idle floor, {ROUND_TRIPS_PER_S} round trips/s parked {WAIT_MS} ms, no work: {measure():.2%} of a core")
