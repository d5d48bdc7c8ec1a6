"""Incremental fetch sessions (KIP-227) on an in-process broker (the kbroker fixture): kafka-python, which
uses them by default, consumes 60 partitions through one session whose epoch climbs with every incremental
fetch; raw requests show what an incremental answer holds and the errors for misuse."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer

from kbroker.client.connection import KafkaConnection
from kbroker.protocol.errors import ErrorCode

FETCH = 1
PARTITIONS = 60


@pytest.fixture
def kbroker_config():
    return {"num.partitions": str(PARTITIONS)}


def produce(bootstrap: str, topic: str, per_partition: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(PARTITIONS):
        for i in range(start, start + per_partition):
            producer.produce(topic, b"%d-%d" % (p, i), partition=p)
    assert producer.flush(30) == 0


def test_kafka_python_consumes_many_partitions_through_one_session(kbroker, topic_name):
    produce(kbroker.bootstrap_servers, topic_name, 5)
    consumer = KafkaConsumer(topic_name, bootstrap_servers=kbroker.bootstrap_servers, group_id="g",
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
    try:
        got: dict[int, list[bytes]] = {}
        for rounds, start in enumerate((5, 10, None)):
            while sum(len(v) for v in got.values()) < PARTITIONS * (5 * (rounds + 1)):
                for tp, records in consumer.poll(timeout_ms=1000).items():
                    got.setdefault(tp.partition, []).extend(r.value for r in records)
            if start is not None:
                produce(kbroker.bootstrap_servers, topic_name, 5, start)
        for _ in range(5):   # caught up: the fetches go on, incrementally and empty
            assert not consumer.poll(timeout_ms=300)
    finally:
        consumer.close()
    assert got == {p: [b"%d-%d" % (p, i) for i in range(15)] for p in range(PARTITIONS)}
    cache = kbroker.broker.fetch_sessions
    (session,) = cache.sessions.values()
    assert cache.created == 1 and len(session.partitions) == PARTITIONS and session.epoch > 5


def _fetch(session_id: int, epoch: int, partitions: list[tuple[str, int, int]], forgotten=(),
           max_wait_ms: int = 0, min_bytes: int = 0) -> dict:
    topics: dict[str, list] = {}
    for topic, p, offset in partitions:
        topics.setdefault(topic, []).append({"partition": p, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
                                             "current_leader_epoch": -1, "last_fetched_epoch": -1,
                                             "log_start_offset": -1})
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 24,
            "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [{"topic": t, "partitions": list(ps)} for t, ps in forgotten], "rack_id": ""}


def test_an_incremental_answer_holds_only_what_changed_and_misuse_is_refused(kbroker, topic_name):
    produce(kbroker.bootstrap_servers, topic_name, 2)

    async def main():
        conn = await KafkaConnection.open("127.0.0.1", kbroker.port)
        try:
            full = await conn.request(FETCH, 12, _fetch(0, 0, [(topic_name, p, 0) for p in range(PARTITIONS)]))
            sid = full.session_id
            answered_full = sum(len(t.partitions) for t in full.responses)
            # The client moves every partition past what it got; nothing is new: the answer holds no partition.
            quiet = await conn.request(FETCH, 12, _fetch(sid, 1, [(topic_name, p, 2) for p in range(PARTITIONS)]))
            produce(kbroker.bootstrap_servers, topic_name, 1, start=2)
            # A record more in every partition; the client sends no partition, and forgets partition 59.
            moved = await conn.request(FETCH, 12, _fetch(sid, 2, [], forgotten=[(topic_name, [59])]))
            stale = await conn.request(FETCH, 12, _fetch(sid, 2, []))
            unknown = await conn.request(FETCH, 12, _fetch(sid + 1 if sid < 0x7FFFFFFF else 1, 1, []))
            closed = await conn.request(FETCH, 12, _fetch(sid, -1, [(topic_name, 0, 0)]))
            after_close = await conn.request(FETCH, 12, _fetch(sid, 3, []))
            return answered_full, sid, quiet, moved, stale, unknown, closed, after_close
        finally:
            await conn.close()

    answered_full, sid, quiet, moved, stale, unknown, closed, after_close = asyncio.run(main())
    assert sid != 0 and answered_full == PARTITIONS
    assert quiet.error_code == 0 and quiet.session_id == sid and quiet.responses == []
    partitions = {p.partition_index: p for t in moved.responses for p in t.partitions}
    assert sorted(partitions) == list(range(PARTITIONS - 1))   # 59 was forgotten
    assert bytes(partitions[0].records) and all(p.high_watermark == 3 for p in partitions.values())
    assert stale.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert closed.error_code == 0 and closed.session_id == 0
    assert after_close.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_a_long_poll_over_partitions_at_rest_is_woken_by_an_append_to_one(kbroker, topic_name):
    """A caught-up consumer's incremental fetch reads none of its partitions at rest (at the high watermark,
    nothing moved since its last answer: broker/partitions/delayed_fetch.py) but still watches them: a record
    appended to one completes the long poll at once, with that partition alone."""
    produce(kbroker.bootstrap_servers, topic_name, 1)
    purgatory = kbroker.broker.replica_manager.fetch_purgatory

    async def main():
        conn = await KafkaConnection.open("127.0.0.1", kbroker.port)
        try:
            full = await conn.request(FETCH, 12, _fetch(0, 0, [(topic_name, p, 0) for p in range(PARTITIONS)]))
            sid = full.session_id
            caught_up = await conn.request(FETCH, 12, _fetch(sid, 1, [(topic_name, p, 1) for p in range(PARTITIONS)]))
            loop = asyncio.get_running_loop()
            waiting = asyncio.ensure_future(conn.request(FETCH, 12, _fetch(sid, 2, [], max_wait_ms=20000,
                                                                           min_bytes=1)))
            while purgatory.watched() < PARTITIONS:   # parked, watching every partition of the session
                assert not waiting.done(), waiting.result()
                await asyncio.sleep(0.01)
            producer = Producer({"bootstrap.servers": kbroker.bootstrap_servers})
            producer.produce(topic_name, b"late", partition=7)
            assert await loop.run_in_executor(None, producer.flush, 30) == 0
            woken = await asyncio.wait_for(waiting, 10)   # (its own timeout is 20 s)
            return full, caught_up, woken
        finally:
            await conn.close()

    full, caught_up, woken = asyncio.run(main())
    assert full.session_id != 0 and caught_up.responses == []
    (topic,) = woken.responses
    (partition,) = topic.partitions
    assert partition.partition_index == 7 and partition.high_watermark == 2 and bytes(partition.records)
