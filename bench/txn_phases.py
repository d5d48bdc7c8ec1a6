"""Where a transaction's broker work goes, phase by phase, without sockets: ``python -m bench.txn_phases``.

An in-process broker (``broker.embedded.KBroker``) is handed, on its own event loop, the three requests a
librdkafka transactional producer sends per transaction (AddPartitionsToTxn v0, one Produce v9 of 100
records of 1 KiB, EndTxn v1), one transaction after another; each request is decoded, handled and its
answer encoded as ``Connection._dispatch`` does, and the actions EndTxn leaves for after its answer (the
marker and the Complete state) are run as the connection runs them. The medians, in µs, are the broker's
Python and file work per phase with hot caches: a real run adds the sockets and the other process
(docs/BENCHMARKS.md, "Idempotent and transactional producers").
"""

from __future__ import annotations

import asyncio
import io
import statistics
import struct
import time

import crc32c
import structlog

from bench.requests import error_codes, frame
from kbroker.broker.network.context import RequestContext
from kbroker.broker.embedded import KBroker
from kbroker.broker.network.registry import HANDLERS
from kbroker.client.connection import KafkaConnection
from kbroker.protocol import schema
from kbroker.protocol.headers import decode_request_header, response_header
from kbroker.protocol.records import CRC_OFFSET, build_batch
from kbroker.protocol.types import BufferReader

TRANSACTIONS, WARMUP = 3000, 200
TOPIC, TXN = "phases", "phases-txn"
_SEQUENCE_OFFSET = 53   # base sequence, in a v2 batch header
_CRC_FROM = CRC_OFFSET + 4


class _Connection:
    """What a handler reaches of its connection here: the after-response list, no principal."""

    def __init__(self) -> None:
        self.after_response: list = []
        self.principal = None
        self.ip = "127.0.0.1"


async def _producer_id(port: int) -> tuple[int, int]:
    conn = await KafkaConnection.open("127.0.0.1", port)
    try:
        await conn.request(19, 4, {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1,
                                               "assignments": [], "configs": []}],
                                   "timeout_ms": 30000, "validate_only": False})
        for _ in range(50):   # the first FindCoordinator makes __transaction_state
            if (await conn.request(10, 3, {"key": TXN, "key_type": 1})).error_code == 0:
                break
            await asyncio.sleep(0.2)
        txn = await conn.request(22, 3, {"transactional_id": TXN, "transaction_timeout_ms": 60000,
                                         "producer_id": -1, "producer_epoch": -1})
        return txn.producer_id, txn.producer_epoch
    finally:
        await conn.close()


async def _phases(broker, producer_id: int, epoch: int, transactions: int) -> dict[str, list[int]]:
    add = frame(24, 0, {"v3_and_below_transactional_id": TXN, "v3_and_below_producer_id": producer_id,
                        "v3_and_below_producer_epoch": epoch,
                        "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]})[4:]
    end = frame(26, 1, {"transactional_id": TXN, "producer_id": producer_id, "producer_epoch": epoch,
                        "committed": True})[4:]
    batch = build_batch([(None, b"x" * 1024, [])] * 100, producer_id=producer_id, producer_epoch=epoch,
                        base_sequence=0, transactional=True)
    produce = bytearray(frame(0, 9, {"transactional_id": TXN, "acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})[4:])
    at = bytes(produce).index(batch)
    connection, log = _Connection(), structlog.get_logger("broker.connection").bind(peer="bench")
    times: dict[str, list[int]] = {}

    def lap(name: str, started: int) -> int:
        now = time.perf_counter_ns()
        times.setdefault(name, []).append(now - started)
        return now

    async def one(data: bytes, name: str) -> None:
        started = time.perf_counter_ns()
        api_key, version = struct.unpack_from(">hh", data)
        flexible = schema.REGISTRY[api_key].is_flexible(version)
        reader = BufferReader(data)
        header = decode_request_header(reader, flexible)
        request = schema.decode(schema.struct_for(api_key, version, True), reader)
        started = lap(f"{name} decode", started)
        handler = HANDLERS[api_key]
        ctx = RequestContext(broker, api_key, version, header.correlation_id, header.client_id, log, "bench",
                             "PLAINTEXT", connection, handler.name)
        result = handler.handle(ctx, request)
        if asyncio.iscoroutine(result):
            result = await result
        started = lap(f"{name} handler", started)
        out = io.BytesIO()
        out.write(response_header(header.correlation_id, api_key, flexible))
        schema.encode(schema.struct_for(api_key, version, False), result, out)
        started = lap(f"{name} encode", started)
        if connection.after_response:
            actions, connection.after_response = connection.after_response, []
            for action in actions:
                action()
            lap(f"{name} after the answer", started)
        codes = [c for c in error_codes(result) if c]
        if codes:
            raise RuntimeError(f"{name} answered {codes}")

    sequence = 0
    for i in range(transactions + WARMUP):
        if i == WARMUP:
            times.clear()
        await one(add, "AddPartitionsToTxn")
        struct.pack_into(">i", produce, at + _SEQUENCE_OFFSET, sequence)
        struct.pack_into(">I", produce, at + CRC_OFFSET, crc32c.crc32c(bytes(produce[at + _CRC_FROM:at + len(batch)])))
        sequence += 100
        await one(bytes(produce), "Produce")
        await one(end, "EndTxn")
    return times


def measure(transactions: int = TRANSACTIONS) -> dict[str, float]:
    """Median µs per phase over ``transactions`` transactions (after a warm-up)."""
    with KBroker() as kb:
        producer_id, epoch = asyncio.run(_producer_id(kb.port))
        times = kb.run_on_loop(_phases(kb.broker, producer_id, epoch, transactions))
    return {name: statistics.median(values) / 1000 for name, values in times.items()}


if __name__ == "__main__":
    medians = measure()
    for phase, us in medians.items():
        print(f"{phase:34} {us:7.1f} µs")
    print(f"{'a transaction':34} {sum(medians.values()):7.1f} µs")
