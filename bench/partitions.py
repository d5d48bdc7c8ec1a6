"""`make bench SUITE=partitions`: one broker with many partitions (issue 35's figures).

At 5,000 and 50,000 partitions (topics of 100): how long creating them takes, the broker's CPU while they sit
idle, its resident memory and open descriptors, a full Metadata round trip, and a restart on the same data.
Then the 50,000 get a record each and the broker restarts twice more: after a clean stop, and after kill -9.
Last, 10,000 topics of one partition each: how long creating them takes, a one-topic Metadata's CPU (what every
client asks; the small-request table's drive) and a restart.
The broker runs with a descriptor limit of 20,000, as the issue's machine had, so the larger count is served
with log files opened on demand (``storage/open_files.py``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

from bench.loadgen import cpu_seconds
from bench.requests import _timed_drive, frame
from tests import hostile
from tests.brokerproc import BrokerProcess
from tests.integration.test_open_files import create_topics, produce_one_each

LIMIT = 20000
IDLE_S = 60   # one log.flush.offset.checkpoint.interval.ms: every periodic pass counted once, the checkpoint too


async def _metadata_ms(port: int) -> float:
    """A Metadata v12 round trip for all topics, median of 5: the request's frame sent and the whole answer read
    back, not decoded (decoding 50,000 partitions in Python takes the bench's client about 260 ms, more than
    the broker's own part)."""
    request = frame(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                            "include_topic_authorized_operations": False})
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        times = []
        for _ in range(5):
            started = time.perf_counter()
            writer.write(request)
            size = int.from_bytes(await reader.readexactly(4), "big")
            await reader.readexactly(size)
            times.append((time.perf_counter() - started) * 1000)
        return sorted(times)[len(times) // 2]
    finally:
        writer.close()


def measure(workdir: str) -> list[tuple[int, dict]]:
    rows = []
    for partitions in (5000, 50000):
        broker = BrokerProcess(f"{workdir}/p{partitions}", open_files_limit=LIMIT).start()
        try:
            started = time.monotonic()
            names = create_topics(broker.bootstrap, partitions // 100, 100)
            created = time.monotonic() - started
            time.sleep(2)
            cpu = cpu_seconds(broker.proc.pid)
            time.sleep(IDLE_S)
            idle = (cpu_seconds(broker.proc.pid) - cpu) / IDLE_S
            row = {"create": created, "idle_cpu": idle, "rss": hostile.rss_bytes(broker.proc.pid),
                   "fds": hostile.open_fds(broker.proc.pid), "metadata": asyncio.run(_metadata_ms(broker.port))}
            broker.stop()
            started = time.monotonic()
            broker.start(timeout=600)
            row["restart"] = time.monotonic() - started
            if partitions == 50000:
                row.update(_written_restarts(broker, names))
            rows.append((partitions, row))
            print(f"  {partitions:,} partitions: {row}", flush=True)
        finally:
            broker.stop()
    rows.append((0, many_topics(workdir)))
    return rows


def many_topics(workdir: str, topics: int = 10000) -> dict:
    """``topics`` topics of one partition (names with '_', which Kafka's collision check looks at)."""
    broker = BrokerProcess(f"{workdir}/topics", open_files_limit=LIMIT).start()
    try:
        started = time.monotonic()
        create_topics(broker.bootstrap, topics, 1, prefix="orders_")
        metadata = frame(3, 12, {"topics": [{"topic_id": bytes(16), "name": "orders_7"}],
                                 "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        row = {"topics": topics, "create": time.monotonic() - started,
               "metadata_us": _timed_drive(broker.proc.pid, broker.port, [metadata], 3)[1]}
        broker.stop()
        started = time.monotonic()
        broker.start(timeout=600)
        row["restart"] = time.monotonic() - started
        print(f"  {topics:,} topics: {row}", flush=True)
        return row
    finally:
        broker.stop()


def _written_restarts(broker: BrokerProcess, names: list[str]) -> dict:
    """A record in every partition, then a restart after a clean stop and one after kill -9."""
    produce_one_each(broker.bootstrap, names, 100)
    broker.stop()
    started = time.monotonic()
    broker.start(timeout=600)
    clean = time.monotonic() - started
    os.kill(broker.proc.pid, signal.SIGKILL)
    broker.proc.wait()
    started = time.monotonic()
    broker.start(timeout=600)
    return {"written_restart": clean, "written_crash_restart": time.monotonic() - started}


def table(rows: list[tuple[int, dict]]) -> str:
    lines = ["| partitions | created in | idle CPU | resident | descriptors | Metadata (all) | restart |",
             "|---|---|---|---|---|---|---|"]
    for partitions, r in rows:
        if not partitions:
            continue
        lines.append(f"| {partitions:,} | {r['create']:.1f} s | {r['idle_cpu']:.1%} | {r['rss'] / 2**20:.0f} MB | "
                     f"{r['fds']:,} | {r['metadata']:.1f} ms | {r['restart']:.1f} s |")
    written = [(partitions, r) for partitions, r in rows if "written_restart" in r]
    if written:
        lines += ["", "| partitions holding a record each | restart after a clean stop | restart after kill -9 |",
                  "|---|---|---|"]
        lines += [f"| {partitions:,} | {r['written_restart']:.1f} s | {r['written_crash_restart']:.1f} s |"
                  for partitions, r in written]
    for r in (r for partitions, r in rows if not partitions):
        lines += ["", "| topics of one partition | created in | Metadata (one topic), broker CPU | restart |",
                  "|---|---|---|---|",
                  f"| {r['topics']:,} | {r['create']:.1f} s | {r['metadata_us']:.0f} µs | {r['restart']:.1f} s |"]
    return "\n".join(lines)
