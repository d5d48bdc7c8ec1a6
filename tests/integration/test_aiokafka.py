"""aiokafka against a real kbroker: produce and consume across partitions, codecs, acks, seeks, admin."""

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import TopicAlreadyExistsError

from tests.integration.workload import CODECS, check_received, records


async def create(broker, name, partitions=6, configs=None):
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
    finally:
        await admin.close()


async def consume_all(broker, name, expected, **kw):
    consumer = AIOKafkaConsumer(name, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False, **kw)
    await consumer.start()
    got = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < expected and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=1000)
            for tp, msgs in batch.items():
                got += [(tp.partition, m.offset, m.key, m.value, list(m.headers)) for m in msgs]
    finally:
        await consumer.stop()
    return got


@pytest.mark.parametrize("codec", CODECS + [None])
async def test_produce_and_consume_every_codec(broker, topic_name, codec):
    await create(broker, topic_name)
    sent = records(2000, tag=str(codec))
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, acks="all",
                                linger_ms=5)
    await producer.start()
    try:
        futures = [await producer.send(topic_name, s.value, key=s.key, headers=list(s.headers)) for s in sent]
        metas = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    assert len({m.partition for m in metas}) == 6
    check_received(sent, await consume_all(broker, topic_name, len(sent)))


@pytest.mark.parametrize("acks", [0, 1, "all"])
async def test_acks_levels(broker, topic_name, acks):
    await create(broker, topic_name, partitions=3)
    sent = records(500)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks)
    await producer.start()
    try:
        for s in sent:
            await producer.send(topic_name, s.value, key=s.key, headers=list(s.headers))
        await producer.flush()
    finally:
        await producer.stop()
    check_received(sent, await consume_all(broker, topic_name, len(sent)))


async def test_idempotent_producer_gets_a_producer_id(broker, topic_name):
    await create(broker, topic_name, partitions=2)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        metas = [await (await producer.send(topic_name, b"v%d" % i, partition=i % 2)) for i in range(100)]
    finally:
        await producer.stop()
    assert sorted(m.offset for m in metas if m.partition == 0) == list(range(50))


async def test_seek_and_offsets_for_times(broker, topic_name):
    await create(broker, topic_name, partitions=1)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
    await producer.start()
    base = int(time.time() * 1000) - 100_000
    try:
        for i in range(100):
            await producer.send_and_wait(topic_name, b"v%d" % i, timestamp_ms=base + i * 1000)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic_name, 0)
        consumer.assign([tp])
        found = await consumer.offsets_for_times({tp: base + 42_500})
        assert found[tp].offset == 43 and found[tp].timestamp == base + 43_000
        assert (await consumer.offsets_for_times({tp: base + 10_000_000}))[tp] is None
        assert (await consumer.beginning_offsets([tp]))[tp] == 0
        assert (await consumer.end_offsets([tp]))[tp] == 100
        consumer.seek(tp, 90)
        msgs = (await consumer.getmany(tp, timeout_ms=5000))[tp]
        assert [m.value for m in msgs] == [b"v%d" % i for i in range(90, 100)]
        assert msgs[0].timestamp == base + 90_000
    finally:
        await consumer.stop()


async def describe(admin, resource) -> dict:
    response = await admin.describe_configs([resource])
    return {entry[0]: entry[1] for entry in response[0].resources[0][4]}


async def test_topic_admin(broker, topic_name):
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        created = await admin.create_topics([NewTopic(topic_name, 2, 1, topic_configs={"retention.ms": "3600000"})])
        assert created.topic_errors[0][1] == 0
        again = await admin.create_topics([NewTopic(topic_name, 2, 1)])
        assert again.topic_errors[0][1] == TopicAlreadyExistsError.errno
        assert topic_name in await admin.list_topics()
        await admin.create_partitions({topic_name: NewPartitions(5)})
        described = await admin.describe_topics([topic_name])
        assert len(described[0]["partitions"]) == 5
        resource = ConfigResource(ConfigResourceType.TOPIC, topic_name)
        entries = await describe(admin, resource)
        assert entries["retention.ms"] == "3600000"
        assert entries["cleanup.policy"] == "delete"
        altered = await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name,
                                                            {"retention.bytes": "1000000"})])
        assert altered[0].resources[0][0] == 0
        entries = await describe(admin, resource)
        assert entries["retention.bytes"] == "1000000"
        assert entries["retention.ms"] == "604800000", "legacy AlterConfigs replaces the whole override set"
        await admin.delete_topics([topic_name])
        assert topic_name not in await admin.list_topics()
    finally:
        await admin.close()


async def test_log_append_time_topics_stamp_records_on_append(broker, topic_name):
    await create(broker, topic_name, partitions=1, configs={"message.timestamp.type": "LogAppendTime"})
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
    await producer.start()
    before = int(time.time() * 1000)
    try:
        meta = await producer.send_and_wait(topic_name, b"v", timestamp_ms=1_000_000)
    finally:
        await producer.stop()
    after = int(time.time() * 1000)
    assert before - 1000 <= meta.timestamp <= after + 1000, "the produce response carries the append time"
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic_name, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        msg = (await consumer.getmany(tp, timeout_ms=5000))[tp][0]
        assert msg.timestamp_type == 1 and before - 1000 <= msg.timestamp <= after + 1000
    finally:
        await consumer.stop()
