"""A produce's cost while a share consumer waits at its partition's lock limit.

A share partition holds at most ``group.share.partition.max.record.locks`` records in flight (2,000 by
default). A group whose members process slowly reaches that limit: one member holds the records, and another
member's ShareFetch finds nothing to acquire and parks for its MaxWaitMs. Every record produced to the partition
meanwhile wakes that parked fetch to look again. The row measures what a 1-record produce then costs the broker,
beside the same produce with no share fetch waiting (the small-request table's row).
"""

from __future__ import annotations

import asyncio
import time
import uuid

from bench.loadgen import cpu_seconds
from kbroker.client.connection import KafkaConnection
from kbroker.protocol.records import build_batch

TOPIC, GROUP = "bench-share-parked", "bench-share-parked-group"
HEARTBEAT, SHARE_FETCH = 76, 78
LIMIT = 2000   # group.share.partition.max.record.locks, Kafka's default


def _share_fetch(member: str, epoch: int, topic_id: bytes, max_wait: int, max_records: int) -> dict:
    return {"group_id": GROUP, "member_id": member, "share_session_epoch": epoch, "max_wait_ms": max_wait,
            "min_bytes": 1, "max_bytes": 1 << 24, "max_records": max_records, "batch_size": max_records,
            "share_acquire_mode": 0, "is_renew_ack": False, "forgotten_topics_data": [],
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]}


async def _assigned(conn: KafkaConnection, member: str) -> None:
    """Join the share group and heartbeat until the partition is assigned (its share state initialized)."""
    epoch, deadline = 0, time.monotonic() + 60
    body = {"group_id": GROUP, "member_id": member, "rack_id": None, "subscribed_topic_names": [TOPIC]}
    while time.monotonic() < deadline:
        answer = await conn.request(HEARTBEAT, 1, {**body, "member_epoch": epoch})
        if answer.error_code == 0:
            epoch = answer.member_epoch
            body["subscribed_topic_names"] = None
            if answer.assignment is not None and answer.assignment.topic_partitions:
                return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"share member {member} was never assigned {TOPIC}")


async def _produce(conn: KafkaConnection, records: int, per_batch: int) -> None:
    for first in range(0, records, per_batch):
        batch = build_batch([(None, b"x" * 100, [])] * min(per_batch, records - first))
        await conn.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 30000, "topic_data": [
            {"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}]})


async def _measure(port: int, pid: int, seconds: float, produce_frame: bytes) -> tuple[float, float]:
    holder, waiter = uuid.uuid4().hex, uuid.uuid4().hex
    admin = await KafkaConnection.open("127.0.0.1", port)
    hold = await KafkaConnection.open("127.0.0.1", port)
    wait = await KafkaConnection.open("127.0.0.1", port)
    try:
        await admin.request(19, 4, {"topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1,
                                                "assignments": [], "configs": []}],
                                    "timeout_ms": 30000, "validate_only": False})
        metadata = await admin.request(3, 12, {"topics": [{"topic_id": bytes(16), "name": TOPIC}],
                                               "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False})
        topic_id = bytes(metadata.topics[0].topic_id)
        configured = await admin.request(44, 1, {"resources": [{   # (from the log's start: records written next)
            "resource_type": 32, "resource_name": GROUP, "configs": [
                {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}],
            "validate_only": False})
        assert configured.responses[0].error_code == 0, configured
        await _assigned(hold, holder)
        await _assigned(wait, waiter)
        await _produce(admin, LIMIT, 100)
        held = await hold.request(SHARE_FETCH, 1, _share_fetch(holder, 0, topic_id, 2000, LIMIT))
        acquired = sum(r.last_offset - r.first_offset + 1 for t in held.responses for p in t.partitions
                       for r in p.acquired_records)
        assert acquired == LIMIT, f"the holding member acquired {acquired} records, not {LIMIT}"
        stop = asyncio.Event()

        async def keep_waiting():   # the second member's fetches, each parked for 500 ms, one after another
            epoch = 0
            while not stop.is_set():
                await wait.request(SHARE_FETCH, 1, _share_fetch(waiter, epoch, topic_id, 500, 500))
                epoch += 1
        waiting = asyncio.create_task(keep_waiting())
        await asyncio.sleep(0.2)   # (its first fetch parked)
        from bench.requests import _drive   # (here: bench.requests imports this module)

        cpu0, began = cpu_seconds(pid), time.monotonic()
        sent = await _drive(port, [produce_frame], seconds)
        wall, cpu = time.monotonic() - began, cpu_seconds(pid) - cpu0
        stop.set()
        await waiting
        return sent / wall, cpu / sent * 1e6
    finally:
        for conn in (admin, hold, wait):
            await conn.close()


def row(broker, produce_frame: bytes, seconds: float) -> tuple[str, int, float, str]:
    """(scenario, requests/s, broker CPU µs per request, note) for ``produce_frame`` (a 1-record produce to
    partition 0 of ``TOPIC``)."""
    rate, cpu = asyncio.run(_measure(broker.proc.port, broker.pid, seconds, produce_frame))
    name = "Produce 1 record acks=1, a share fetch parked at the lock limit"
    print(f"  {name:30} {rate:9.0f} req/s  {cpu:7.1f} µs broker CPU/req", flush=True)
    return name, round(rate), cpu, f"{LIMIT:,} records in flight, another member's ShareFetch waiting"
