"""What the Python clients make of each broker: kafka-python's version inference, and a consumer group of
aiokafka and of kafka-python committing and reading back offsets; size retention moving the log start."""

import asyncio
import time

import pytest

from kbroker.protocol.records import build_batch
from tests.reference.differential import same
from tests.waiting import settled
from tests.reference.test_produce_fetch import create, list_offset, produce

pytestmark = pytest.mark.reference


async def test_kafka_python_infers_the_same_broker_version(targets):
    def scenario(target):
        from kafka import KafkaAdminClient
        admin = KafkaAdminClient(bootstrap_servers=target.bootstrap)
        try:
            return admin._client.check_version()   # (what it inferred from ApiVersions)
        finally:
            admin.close()
    assert await same(targets, scenario) == (4, 2)


async def test_an_aiokafka_group_commits_and_reads_back(targets, topic):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    async def scenario(target):
        await create(target, topic, partitions=2)
        producer = AIOKafkaProducer(bootstrap_servers=target.bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            sent = [await producer.send_and_wait(topic, b"v%d" % i, partition=i % 2) for i in range(6)]
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=target.bootstrap, group_id=f"g-{topic}",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            got = []
            while len(got) < 6:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 30)
                got += [(m.partition, m.offset, m.value) for ms in batch.values() for m in ms]
            await consumer.commit()
            committed = {p: await consumer.committed(TopicPartition(topic, p)) for p in range(2)}
        finally:
            await consumer.stop()
        return {"sent": sorted((m.partition, m.offset) for m in sent), "got": sorted(got), "committed": committed}
    await same(targets, scenario)


async def test_a_kafka_python_group_commits_and_reads_back(targets, topic):
    def scenario(target):
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition
        asyncio.run(create(target, topic, partitions=2))
        producer = KafkaProducer(bootstrap_servers=target.bootstrap, linger_ms=0)
        sent = [producer.send(topic, b"v%d" % i, partition=i % 2).get(10) for i in range(6)]
        producer.close()
        consumer = KafkaConsumer(topic, bootstrap_servers=target.bootstrap, group_id=f"g-{topic}",
                                 auto_offset_reset="earliest", enable_auto_commit=False)
        got, deadline = [], time.monotonic() + 30
        while len(got) < 6 and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                got += [(r.partition, r.offset, r.value) for r in records]
        consumer.commit()
        committed = {p: consumer.committed(TopicPartition(topic, p)) for p in range(2)}
        consumer.close()
        return {"sent": sorted((m.partition, m.offset) for m in sent), "got": sorted(got), "committed": committed}
    await same(targets, scenario)


async def test_size_retention_moves_the_log_start(targets, topic):
    """Three segments of about 1 MiB; retention.bytes of one segment deletes the oldest whole segments."""
    async def scenario(target):
        await create(target, topic, segment_bytes=1 << 20, retention_bytes=1 << 20)
        batch = build_batch([(None, b"x" * 1000, []) for _ in range(100)])     # ~100 KB
        for _ in range(30):
            await produce(target, topic, batch)
        start = await settled(lambda: list_offset(target, topic, -2), lambda a: a[1] > 0, timeout=30)
        return {"start": start, "end": await list_offset(target, topic, -1)}
    seen = await same(targets, scenario)
    assert 0 < seen["start"][1] < seen["end"][1] == 3000
