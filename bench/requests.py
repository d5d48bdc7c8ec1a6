"""The small-request path, per API: one connection sending one request after another, as a consumer that
commits after every poll or a producer that waits for each record does.

Each scenario's request frames are encoded once (the client costs nothing per request but a socket write
and a read of the answer's length and bytes), the broker answers them for ``SECONDS``, and the table gives
requests per second and the broker's CPU time per request; with py-spy installed, the frames the broker
spends its samples in. The first answer of each kind is decoded and checked, so that a scenario measures
the work it names and not a stream of errors.
"""

from __future__ import annotations

import asyncio
import collections
import io
import os
import re
import struct
import subprocess
import tempfile
import time

from bench import share_parked
from bench.brokers import KBroker
from bench.loadgen import cpu_seconds
from kbroker.client.connection import KafkaConnection
from kbroker.protocol import schema
from kbroker.protocol.headers import RequestHeader, encode_request_header
from kbroker.protocol.records import build_batch

SECONDS = 5.0
TOPIC, GROUP, TXN = "bench-small", "bench-small-group", "bench-small-txn"
PY_SPY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".venv", "bin", "py-spy")


def frame(api_key: int, version: int, body: dict, correlation_id: int = 1) -> bytes:
    flexible = schema.REGISTRY[api_key].is_flexible(version)
    out = io.BytesIO()
    out.write(encode_request_header(RequestHeader(api_key, version, correlation_id, "bench"), flexible))
    schema.encode(schema.struct_for(api_key, version, True), body, out)
    data = out.getvalue()
    return struct.pack(">i", len(data)) + data


def _produce(acks: int, batch: bytes, topic: str = TOPIC) -> bytes:
    return frame(0, 9, {"transactional_id": None, "acks": acks, "timeout_ms": 30000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})


async def _prepare(port: int) -> dict[str, list[bytes]]:
    """Each scenario's frames, after the set-up its requests need (a group member, a transactional producer)."""
    conn = await KafkaConnection.open("127.0.0.1", port)
    try:
        await conn.request(19, 4, {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1,
                                               "assignments": [], "configs": []}],
                                   "timeout_ms": 30000, "validate_only": False})
        for key, key_type in ((GROUP, 0), (TXN, 1)):   # makes the internal topics
            for _ in range(50):
                found = await conn.request(10, 3, {"key": key, "key_type": key_type})
                if found.error_code == 0:
                    break
                await asyncio.sleep(0.2)
        join = {"group_id": GROUP, "session_timeout_ms": 60000, "rebalance_timeout_ms": 60000, "member_id": "",
                "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}], "reason": None}
        joined = await conn.request(11, 7, join)
        joined = await conn.request(11, 7, {**join, "member_id": joined.member_id})   # MEMBER_ID_REQUIRED first
        await conn.request(14, 5, {"group_id": GROUP, "generation_id": joined.generation_id,
                                   "member_id": joined.member_id, "group_instance_id": None,
                                   "protocol_type": "consumer", "protocol_name": "range",
                                   "assignments": [{"member_id": joined.member_id, "assignment": b""}]})
        txn = await conn.request(22, 3, {"transactional_id": TXN, "transaction_timeout_ms": 60000,
                                         "producer_id": -1, "producer_epoch": -1})
    finally:
        await conn.close()
    batch = build_batch([(None, b"x" * 100, [])])
    add = {"v3_and_below_transactional_id": TXN, "v3_and_below_producer_id": txn.producer_id,
           "v3_and_below_producer_epoch": txn.producer_epoch,
           "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]}
    end = {"transactional_id": TXN, "producer_id": txn.producer_id, "producer_epoch": txn.producer_epoch,
           "committed": True}
    return {
        "Metadata (1 topic)": [frame(3, 12, {"topics": [{"topic_id": bytes(16), "name": TOPIC}],
                                             "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False})],
        "Produce 1 record acks=1": [_produce(1, batch)],
        "Produce 1 record acks=all": [_produce(-1, batch)],
        # (a group of its own: a standalone commit, as a consumer with manual assignment makes, needs no member)
        "OffsetCommit (1 partition)": [frame(8, 8, {"group_id": GROUP + "-commits", "generation_id_or_member_epoch": -1,
                                                    "member_id": "", "group_instance_id": None,
                                                    "topics": [{"name": TOPIC, "partitions": [
                                                        {"partition_index": 0, "committed_offset": 1,
                                                         "committed_leader_epoch": -1,
                                                         "committed_metadata": ""}]}]})],
        "Heartbeat": [frame(12, 4, {"group_id": GROUP, "generation_id": joined.generation_id,
                                    "member_id": joined.member_id, "group_instance_id": None})],
        "AddPartitionsToTxn + EndTxn": [frame(24, 3, add), frame(26, 3, end)],
    }


async def _check(port: int, frames: list[bytes]) -> None:
    """Send one round raw and decode the answers: every error code in them must be 0."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for f in frames:
            writer.write(f)
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            answer = await reader.readexactly(size)
            api_key, version = struct.unpack(">hh", f[4:8])
            codes = error_codes(_decode(api_key, version, answer))
            assert not any(codes), f"api {api_key} answered {codes}"
    finally:
        writer.close()


def error_codes(body) -> list[int]:
    """Every ``*error_code`` in a decoded answer, at every depth."""
    if isinstance(body, dict):
        return [int(v) for k, v in body.items() if k.endswith("error_code")] + \
            [c for v in body.values() for c in error_codes(v)]
    if isinstance(body, list):
        return [c for v in body for c in error_codes(v)]
    return []


def _decode(api_key: int, version: int, answer: bytes):
    from kbroker.protocol.headers import decode_response_header
    from kbroker.protocol.types import BufferReader

    reader = BufferReader(answer)
    decode_response_header(reader, api_key, schema.REGISTRY[api_key].is_flexible(version))
    return schema.decode(schema.struct_for(api_key, version, False), reader)


async def _drive(port: int, frames: list[bytes], seconds: float) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sent = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            for f in frames:
                writer.write(f)
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                await reader.readexactly(size)
                sent += 1
    finally:
        writer.close()
    return sent


MANY = 1000   # partitions of the fetch-session rows


def _fetch_body(session_id: int, epoch: int, partitions: int) -> dict:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 24, "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": TOPIC + "-many", "partitions": [
                {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1,
                 "last_fetched_epoch": -1, "log_start_offset": -1} for p in range(partitions)]}] if partitions else []}


async def _fetch_rounds(port: int, pid: int, seconds: float, incremental: bool) -> tuple[float, float]:
    """(rounds/s, broker CPU µs per round) of a caught-up consumer of MANY partitions fetching in a loop."""
    conn = await KafkaConnection.open("127.0.0.1", port)
    try:
        session, epoch = 0, -1
        if incremental:
            opened = await conn.request(1, 12, _fetch_body(0, 0, MANY))
            session, epoch = opened.session_id, 1
        full = frame(1, 12, _fetch_body(0, -1, MANY))
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        rounds, cpu0, began = 0, cpu_seconds(pid), time.monotonic()
        while time.monotonic() - began < seconds:
            writer.write(frame(1, 12, _fetch_body(session, epoch, 0)) if incremental else full)
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            await reader.readexactly(size)
            rounds += 1
            epoch += 1
        wall, cpu = time.monotonic() - began, cpu_seconds(pid) - cpu0
        writer.close()
        return rounds / wall, cpu / rounds * 1e6
    finally:
        await conn.close()


def fetch_session_rows(broker, seconds: float = SECONDS) -> list[tuple[str, int, float, str]]:
    async def create():
        conn = await KafkaConnection.open("127.0.0.1", broker.proc.port)
        try:
            await conn.request(19, 4, {"topics": [{"name": TOPIC + "-many", "num_partitions": MANY,
                                                   "replication_factor": 1, "assignments": [], "configs": []}],
                                       "timeout_ms": 60000, "validate_only": False})
        finally:
            await conn.close()
    asyncio.run(create())
    rows = []
    for name, incremental in (("without a session", False), ("in an incremental session", True)):
        rate, cpu = asyncio.run(_fetch_rounds(broker.proc.port, broker.pid, seconds, incremental))
        rows.append((f"Fetch round, {MANY:,} caught-up partitions, {name}", round(rate), cpu, ""))
        print(f"  {rows[-1][0]:60} {rate:7.0f} rounds/s {cpu:9.1f} µs broker CPU/round", flush=True)
    return rows


def _profile(pid: int, seconds: float, out: str) -> subprocess.Popen | None:
    if not os.path.exists(PY_SPY):
        return None
    return subprocess.Popen([PY_SPY, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "500", "-f", "raw",
                             "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def top_frames(path: str, count: int = 4) -> str:
    """The frames with most samples (inclusive), leaving out the event loop's own."""
    inclusive: collections.Counter = collections.Counter()
    total = 0
    for line in open(path):
        stack, _, n = line.rstrip().rpartition(" ")
        if not stack:
            continue
        total += int(n)
        names = {re.sub(r" \(.*\)$", "", f) for f in stack.split(";")}
        for name in names:
            inclusive[name] += int(n)
    skip = {"<module>", "_run_module_as_main", "_run_code", "main", "run", "serve", "Runner.run", "_run_once",
            "Connection.run", "Connection._dispatch", "_run", "run_until_complete", "run_forever", "_serve",
            "Broker.serve", "Task.__step", "Handle._run"}
    busy = [(name, n) for name, n in inclusive.most_common(40) if name not in skip]
    return ", ".join(f"{name} {n / max(total, 1):.0%}" for name, n in busy[:count])


def measure(seconds: float = SECONDS) -> list[tuple[str, int, float, str]]:
    """(scenario, requests/s, broker CPU µs per request, profile) for each scenario."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="kbroker-bench-") as tmp:
        broker = KBroker(os.path.join(tmp, "small"))
        try:
            scenarios = asyncio.run(_prepare(broker.proc.port))
            for name, frames in scenarios.items():
                asyncio.run(_check(broker.proc.port, frames))
                rate, cpu_us = _timed_drive(broker.pid, broker.proc.port, frames, seconds)
                profile_path = os.path.join(tmp, "profile.txt")
                spy = _profile(broker.pid, 3, profile_path)
                profile = ""
                if spy is not None:
                    asyncio.run(_drive(broker.proc.port, frames, 3.5))
                    spy.wait(30)
                    profile = top_frames(profile_path) if os.path.exists(profile_path) else ""
                rows.append((name, round(rate), cpu_us, profile))
                print(f"  {name:30} {rate:9.0f} req/s  {cpu_us:7.1f} µs broker CPU/req  {profile}", flush=True)
            rows += fetch_session_rows(broker, seconds)
            rows.append(share_parked.row(broker, _produce(1, build_batch([(None, b"x" * 100, [])]),
                                                          share_parked.TOPIC), seconds))
            rows.append(echo_floor(scenarios["Heartbeat"], seconds))
        finally:
            broker.stop()
    return rows


ECHO_SERVER = """
import asyncio, sys, uvloop

class Echo(asyncio.BufferedProtocol):
    def connection_made(self, transport):
        self.transport, self.buffer = transport, bytearray(65536)
    def get_buffer(self, sizehint):
        return self.buffer
    def buffer_updated(self, nbytes):
        self.transport.write(bytes(self.buffer[:nbytes]))

async def main():
    server = await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(3600)

uvloop.run(main())
"""


def _timed_drive(pid: int, port: int, frames: list[bytes], seconds: float) -> tuple[float, float]:
    """After a second's warm-up, ``frames`` one after another for ``seconds``: (requests/s, CPU µs per request
    of the server process ``pid``)."""
    asyncio.run(_drive(port, frames, 1.0))
    cpu0, wall0 = cpu_seconds(pid), time.monotonic()
    sent = asyncio.run(_drive(port, frames, seconds))
    cpu, wall = cpu_seconds(pid) - cpu0, time.monotonic() - wall0
    return sent / wall, cpu / sent * 1e6


def echo_floor(frames: list[bytes], seconds: float = SECONDS) -> tuple[str, int, float, str]:
    """The floor under every row: a uvloop server that does nothing but send each request's bytes back (no
    decoding, no task, no await), driven by the same client. What it costs per round trip any Python broker
    on uvloop pays before doing any work: the event loop's turn and the kernel's receive, send and wake-up."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    server = subprocess.Popen([os.path.join(root, ".venv", "bin", "python"), "-c", ECHO_SERVER],
                              stdout=subprocess.PIPE, text=True)
    try:
        rate, cpu_us = _timed_drive(server.pid, int(server.stdout.readline()), frames, seconds)
    finally:
        server.kill()
        server.wait()
    name = "(floor) uvloop echo of the Heartbeat frame"
    print(f"  {name:30} {rate:9.0f} req/s  {cpu_us:7.1f} µs server CPU/req", flush=True)
    return name, round(rate), cpu_us, "one Python callback per request, no decoding: event loop and kernel"


EMBEDDED_START = """
import time
began = time.perf_counter()
from kbroker.broker.embedded import KBroker
with KBroker() as first:
    cold = time.perf_counter() - began
warm = []
for _ in range(5):
    with KBroker() as b:
        warm.append(b.start_seconds)
print(cold * 1000, sorted(warm)[2] * 1000)
"""


def embedded_start() -> tuple[float, float]:
    """(ms to import and start the first in-process broker of a fresh interpreter, median ms of later starts)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([os.path.join(root, ".venv", "bin", "python"), "-c", EMBEDDED_START], cwd=root,
                         capture_output=True, text=True, timeout=120, check=True).stdout.split()
    return float(out[0]), float(out[1])


def table(rows: list[tuple[str, int, float, str]]) -> str:
    lines = ["| request | requests/s | broker CPU µs/request | where the broker spends it (py-spy, inclusive) |",
             "|---|---|---|---|"]
    for name, rate, cpu, profile in rows:
        lines.append(f"| {name} | {rate:,} | {cpu:.0f} | {profile} |")
    return "\n".join(lines)
