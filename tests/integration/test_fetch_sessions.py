"""Incremental fetch sessions (KIP-227) on an in-process broker (the kbroker fixture): kafka-python, which
uses them by default, consumes 60 partitions through one session whose epoch climbs with every incremental
fetch; raw requests show what an incremental answer holds and the errors for misuse."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

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


async def _caught_up_session(conn, topic: str, end: int) -> int:
    """A session over every partition, its second fetch at ``end`` in each (named: nothing at rest yet); its
    id (the next epoch is 2)."""
    full = await conn.request(FETCH, 12, _fetch(0, 0, [(topic, p, 0) for p in range(PARTITIONS)]))
    await conn.request(FETCH, 12, _fetch(full.session_id, 1, [(topic, p, end) for p in range(PARTITIONS)]))
    return full.session_id


def test_a_session_listens_on_its_partitions_at_rest_once_and_not_after_it_closes(kbroker, topic_name):
    """An idle session's rounds neither look at its partitions at rest nor watch them anew each round
    (broker/partitions/session_rest.py): the session listens on each once, parks its fetch on nothing else,
    and a closed session leaves no listener behind."""
    produce(kbroker.bootstrap_servers, topic_name, 1)
    purgatory = kbroker.broker.replica_manager.fetch_purgatory
    ours = {(topic_name, p) for p in range(PARTITIONS)}

    async def main():
        conn = await KafkaConnection.open("127.0.0.1", kbroker.port)
        try:
            sid = await _caught_up_session(conn, topic_name, 1)
            listened, rounds = [], []
            for epoch in range(2, 6):   # idle rounds, each a long poll that runs out
                rounds.append(await conn.request(FETCH, 12, _fetch(sid, epoch, [], max_wait_ms=50, min_bytes=1)))
                listened.append({tp: list(fns) for tp, fns in purgatory.listeners.items() if tp in ours})
            watched_between = sum(len(ops) for tp, ops in purgatory.watchers.items() if tp in ours)
            closed = await conn.request(FETCH, 12, _fetch(sid, -1, []))
            return rounds, listened, watched_between, closed
        finally:
            await conn.close()

    rounds, listened, watched_between, closed = asyncio.run(main())
    assert all(r.error_code == 0 and r.responses == [] for r in rounds)
    assert set(listened[0]) == ours and all(len(fns) == 1 for fns in listened[0].values())
    assert all(later == listened[0] for later in listened[1:])   # the same listener, kept from round to round
    assert watched_between == 0
    assert closed.error_code == 0 and not ours & set(purgatory.listeners)


def test_records_deleted_below_a_partition_at_rest_are_told_at_the_next_round(kbroker, topic_name):
    """DeleteRecords moves a log start offset without an append: a session holding the partition at rest must
    still send the new log start at its next round (Kafka's sessions answer a partition whose log start
    moved), not when the session next looks at every partition."""
    produce(kbroker.bootstrap_servers, topic_name, 3)
    admin = KafkaAdminClient(bootstrap_servers=kbroker.bootstrap_servers)

    async def main():
        conn = await KafkaConnection.open("127.0.0.1", kbroker.port)
        try:
            sid = await _caught_up_session(conn, topic_name, 3)
            at_rest = await conn.request(FETCH, 12, _fetch(sid, 2, []))
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, lambda: admin.delete_records({TopicPartition(topic_name, 5): 2}))
            told = await conn.request(FETCH, 12, _fetch(sid, 3, []))
            return at_rest, told
        finally:
            await conn.close()

    try:
        at_rest, told = asyncio.run(main())
    finally:
        admin.close()
    assert at_rest.error_code == 0 and at_rest.responses == []
    (topic,) = told.responses
    (partition,) = topic.partitions
    assert partition.partition_index == 5 and partition.log_start_offset == 2 and partition.high_watermark == 3


def test_retention_below_a_partition_at_rest_is_told_within_a_round(fresh_broker):
    """Retention moves a log start offset without an append, as DeleteRecords does: a session holding the
    partition at rest sends the new log start within a round of the move, not when the session next looks
    at every partition (``session_rest.REVALIDATE_MS``, 5 s)."""
    import time

    import confluent_kafka.admin as ck

    fresh_broker.overrides.update({"log.retention.check.interval.ms": "200", "log.segment.delete.delay.ms": "0"})
    broker = fresh_broker.start()
    topic = "retained"
    admin = ck.AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([ck.NewTopic(topic, 1, 1, config={"internal.segment.bytes": "2000"})])[topic].result(10)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.size": 500})
    for _ in range(100):
        producer.produce(topic, b"x" * 100, partition=0)
        producer.flush(10)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = TopicPartition(topic, 0)

    async def main():
        conn = await KafkaConnection.open("127.0.0.1", broker.port)
        try:
            full = await conn.request(FETCH, 12, _fetch(0, 0, [(topic, 0, 100)]))
            sid, epoch = full.session_id, 1
            at_rest = await conn.request(FETCH, 12, _fetch(sid, epoch, []))
            resource = ck.ConfigResource("topic", topic, incremental_configs=[ck.ConfigEntry(
                "retention.bytes", "3000", incremental_operation=ck.AlterConfigOpType.SET)])
            admin.incremental_alter_configs([resource])[resource].result(10)
            moved_at = told_at = told = None
            deadline = time.monotonic() + 15
            while told is None and time.monotonic() < deadline:
                if moved_at is None and consumer.beginning_offsets([tp])[tp] > 0:
                    moved_at = time.monotonic()
                epoch += 1
                answer = await conn.request(FETCH, 12, _fetch(sid, epoch, []))
                if answer.responses:
                    told, told_at = answer.responses[0].partitions[0], time.monotonic()
                await asyncio.sleep(0.02)
            return at_rest, moved_at, told_at, told
        finally:
            await conn.close()

    try:
        at_rest, moved_at, told_at, told = asyncio.run(main())
    finally:
        consumer.close()
    assert at_rest.error_code == 0 and at_rest.responses == []
    assert told is not None and 0 < told.log_start_offset < 100 and told.high_watermark == 100
    assert moved_at is None or told_at - moved_at < 1.0, f"told {told_at - moved_at:.2f} s after the move"


def test_a_connection_sends_an_idle_fetch_again_from_its_callback_until_an_answer_says_something(kbroker,
                                                                                                  topic_name):
    """A ``repeater`` (client/connection.py) answers an empty answer by sending the request again at the session's
    next epoch, in the transport's callback (a follower's idle rounds: broker/replication/idle_rounds.py). The
    broker takes each repeat as the session's next round, each repeat restarts the request's timeout (the rounds
    here outlast it several times), and the first answer that says something reaches the caller."""
    from kbroker.broker.partitions.fetch_sessions import next_epoch
    from kbroker.broker.replication.idle_rounds import empty_answer

    produce(kbroker.bootstrap_servers, topic_name, 1)
    cache = kbroker.broker.fetch_sessions

    async def main():
        conn = await KafkaConnection.open("127.0.0.1", kbroker.port)
        try:
            sid = await _caught_up_session(conn, topic_name, 1)
            answer, epochs = empty_answer(FETCH, 12, sid), [2]

            def repeat(response, request) -> bool:
                if response[4:] != answer:
                    return False
                epochs.append(next_epoch(epochs[-1]))
                request[-8:-4] = epochs[-1].to_bytes(4, "big")   # (the epoch, before the empty lists and tags)
                return True

            conn.repeater = repeat
            waiting = asyncio.ensure_future(conn.request(FETCH, 12, _fetch(sid, 2, [], max_wait_ms=100, min_bytes=1),
                                                         timeout=0.5))
            while len(epochs) < 20:   # 2 s of rounds: four times the request's timeout
                assert not waiting.done(), waiting.result()
                await asyncio.sleep(0.05)
            repeated = len(epochs) - 1
            producer = Producer({"bootstrap.servers": kbroker.bootstrap_servers})
            producer.produce(topic_name, b"late", partition=11)
            assert await asyncio.get_running_loop().run_in_executor(None, producer.flush, 30) == 0
            told = await asyncio.wait_for(waiting, 10)
            return repeated, epochs, told, cache.get(sid).epoch
        finally:
            await conn.close()

    repeated, epochs, told, session_epoch = asyncio.run(main())
    assert repeated >= 19 and told.error_code == 0
    (topic,) = told.responses
    (partition,) = topic.partitions
    assert partition.partition_index == 11 and partition.high_watermark == 2 and bytes(partition.records)
    assert session_epoch == epochs[-1] + 1   # the broker took every repeat as the session's next round


def test_kafka_python_under_a_small_fetch_bound_is_served_every_partition_in_turn(kbroker, topic_name):
    """A consumer whose responses hold one batch each (``fetch_max_bytes`` 1: a fetch still returns its first
    batch) and that drains each before it fetches again keeps every partition in its session. The session moves
    a partition an incremental answer served to its end, as Kafka's does, so one round of answers reaches every
    partition; a
    session that read in one fixed order would serve partition 0 until it ran dry."""
    for start in range(3):   # three batches in every partition
        produce(kbroker.bootstrap_servers, topic_name, 1, start)
    consumer = KafkaConsumer(topic_name, bootstrap_servers=kbroker.bootstrap_servers, group_id="g",
                             auto_offset_reset="earliest", fetch_max_bytes=1, fetch_max_wait_ms=100)
    try:
        order: list[int] = []
        while len(order) < 3 * PARTITIONS:
            for tp, records in consumer.poll(timeout_ms=1000).items():
                order.extend(tp.partition for _ in records)
    finally:
        consumer.close()
    # (the session's first answer is a full one, which moves nothing: its partition is served again next)
    assert sorted(set(order[:PARTITIONS + 1])) == list(range(PARTITIONS)), order[:PARTITIONS + 1]
    assert sorted(order) == sorted(list(range(PARTITIONS)) * 3)
