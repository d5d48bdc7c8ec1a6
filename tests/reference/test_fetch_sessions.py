"""Consumers' incremental fetch sessions (KIP-227) side by side: opening, continuing, closing, the epoch and id
errors, forgetting every partition (Kafka then closes the session), a version that names topics otherwise
than the request that opened the session, and partitions served in turn when a response's bound holds one."""

from __future__ import annotations

import uuid

import pytest

from kbroker.client.connection import KafkaConnection
from kbroker.protocol.records import build_batch
from tests.reference.differential import call, same
from tests.reference.test_produce_fetch import create, create_written, produce

pytestmark = pytest.mark.reference

FETCH, METADATA = 1, 3


def fetch_body(session_id, epoch, partitions, topic_id, forgotten=()) -> dict:
    """Fetch v12+ by topic id; ``partitions`` as (index, fetch offset)."""
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch, "rack_id": "",
            "topics": [{"topic_id": topic_id, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p, o in partitions]}] if partitions else [],
            "forgotten_topics_data": [{"topic_id": topic_id, "partitions": list(forgotten)}] if forgotten else []}


def shape(answer):
    """(error, whether there is a session, [(partition, error, high watermark, records or not)])."""
    return answer.error_code, answer.session_id != 0, sorted(
        (p.partition_index, p.error_code, p.high_watermark, bool(p.records)) for t in answer.responses
        for p in t.partitions)


@pytest.mark.parametrize("case", [
    "incremental rounds", "a wrong epoch", "an unknown session id", "closed, then used", "closed by epoch -1",
    "a partition swapped", "every partition forgotten", "another version's topic naming", "an unknown topic id"])
async def test_a_consumers_fetch_session(targets, topic, case):
    async def scenario(target):
        await create_written(target, topic, [3, 1])
        known = await call(target, METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
        tid = bytes(known.topics[0].topic_id)
        conn = await KafkaConnection.open("127.0.0.1", target.port)

        async def fetch(session_id, epoch, partitions, version=16, **kw):
            return await conn.request(FETCH, version, fetch_body(session_id, epoch, partitions, tid, **kw))
        try:
            if case == "an unknown topic id":
                return [shape(await conn.request(FETCH, 16, fetch_body(0, 0, [(0, 0)], uuid.uuid4().bytes)))]
            first = await fetch(0, 0, [(0, 0), (1, 0)])
            sid, seen = first.session_id, [shape(first)]
            if case == "incremental rounds":
                seen.append(shape(await fetch(sid, 1, [(0, 3), (1, 1)])))
                seen.append(shape(await fetch(sid, 2, [])))
                await produce(target, topic, build_batch([(None, b"v", [])] * 2))
                seen.append(shape(await fetch(sid, 3, [])))
            elif case == "a wrong epoch":
                seen.append(shape(await fetch(sid, 5, [])))
                seen.append(shape(await fetch(sid, 1, [(0, 3), (1, 1)])))
            elif case == "an unknown session id":
                seen.append(shape(await fetch(sid + 12345, 1, [])))
            elif case == "closed, then used":
                seen.append(shape(await fetch(sid, -1, [(0, 0)])))
                seen.append(shape(await fetch(sid, 1, [])))
            elif case == "closed by epoch -1":
                seen.append(shape(await fetch(sid, -1, [])))
            elif case == "a partition swapped":
                seen.append(shape(await fetch(sid, 1, [(0, 3)], forgotten=[1])))
            elif case == "every partition forgotten":
                seen.append(shape(await fetch(sid, 1, [], forgotten=[0, 1])))
                seen.append(shape(await fetch(sid, 2, [(1, 0)])))
            elif case == "another version's topic naming":
                seen.append(shape(await conn.request(FETCH, 12, {**fetch_body(sid, 1, [], tid), "topics": []})))
            return seen
        finally:
            await conn.close()
    await same(targets, scenario)


async def test_a_session_serves_its_partitions_in_turn_under_a_response_bound(targets, topic):
    """Three partitions of records, a response bound of about one batch, the client moving past what it got: in
    Kafka a partition an incremental answer sends records of goes to the end of its session, so the rounds serve
    each partition in turn (and answer them in the session's order) instead of the first again and again."""
    async def scenario(target):
        await create(target, topic, 3)
        for partition in range(3):
            for _ in range(4):
                await produce(target, topic, build_batch([(None, b"v" * 200, [])]), partition)
        known = await call(target, METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False})
        tid = bytes(known.topics[0].topic_id)
        conn = await KafkaConnection.open("127.0.0.1", target.port)
        offsets, served = [0, 0, 0], []
        try:
            sid, epoch, named = 0, 0, [0, 1, 2]
            for _ in range(6):
                body = fetch_body(sid, epoch, [(p, offsets[p]) for p in named], tid)
                answer = await conn.request(FETCH, 16, {**body, "max_bytes": 100})
                sid, epoch = answer.session_id, epoch + 1
                got = [(p.partition_index, bool(p.records)) for t in answer.responses for p in t.partitions]
                named = [p for p, records in got if records]
                for p in named:
                    offsets[p] += 1   # (a batch of one record each)
                served.append(got)
            return served
        finally:
            await conn.close()
    served = await same(targets, scenario)
    assert [[p for p, records in got if records] for got in served[1:]] == [[0], [1], [2], [0], [1]]
