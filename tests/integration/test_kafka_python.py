"""kafka-python against a real kbroker: codecs, acks, idempotence (its default), seeks and admin."""

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import InvalidTopicError, TopicAlreadyExistsError

from tests.integration.workload import CODECS, check_received, records


def create(broker, name, partitions=6, configs=None):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
    finally:
        admin.close()


def consume_all(broker, name, expected):
    consumer = KafkaConsumer(name, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, group_id=None)
    got = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < expected and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=1000).items():
                got += [(tp.partition, m.offset, m.key, m.value, list(m.headers)) for m in msgs]
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("codec", CODECS + [None])
def test_produce_and_consume_every_codec(broker, topic_name, codec):
    create(broker, topic_name)
    sent = records(2000, tag=str(codec))
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, acks="all", linger_ms=5)
    try:
        futures = [producer.send(topic_name, value=s.value, key=s.key, headers=list(s.headers)) for s in sent]
        producer.flush()
        partitions = {f.get(timeout=10).partition for f in futures}
    finally:
        producer.close()
    assert partitions == set(range(6))
    check_received(sent, consume_all(broker, topic_name, len(sent)))


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks_levels(broker, topic_name, acks):
    create(broker, topic_name, partitions=3)
    sent = records(500)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks, enable_idempotence=acks == "all")
    try:
        for s in sent:
            producer.send(topic_name, value=s.value, key=s.key, headers=list(s.headers))
        producer.flush()
    finally:
        producer.close()
    check_received(sent, consume_all(broker, topic_name, len(sent)))


def test_seek_and_offsets_for_times(broker, topic_name):
    create(broker, topic_name, partitions=1)
    base = int(time.time() * 1000) - 100_000
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(100):
        producer.send(topic_name, value=b"v%d" % i, timestamp_ms=base + i * 1000)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None)
    try:
        tp = TopicPartition(topic_name, 0)
        consumer.assign([tp])
        found = consumer.offsets_for_times({tp: base + 42_500})[tp]
        assert (found.offset, found.timestamp) == (43, base + 43_000)
        assert consumer.beginning_offsets([tp])[tp] == 0
        assert consumer.end_offsets([tp])[tp] == 100
        consumer.seek(tp, 95)
        got = []
        deadline = time.monotonic() + 10
        while len(got) < 5 and time.monotonic() < deadline:
            got += [m.value for msgs in consumer.poll(timeout_ms=500).values() for m in msgs]
        assert got == [b"v%d" % i for i in range(95, 100)]
    finally:
        consumer.close()


def test_topic_admin(broker, topic_name):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, 2, 1, topic_configs={"cleanup.policy": "delete"})])
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(topic_name, 2, 1)])
        with pytest.raises(InvalidTopicError):
            admin.create_topics([NewTopic("no/slashes", 1, 1)])
        admin.create_partitions({topic_name: NewPartitions(4)})
        assert len(admin.describe_topics([topic_name])[0]["partitions"]) == 4
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name, configs={"retention.ms": "5000"})])
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)])
        modified = described["topic"][topic_name]
        assert modified["retention.ms"]["value"] == "5000"
        assert "segment.bytes" not in modified, "only overrides count as modified"
        admin.delete_topics([topic_name])
        assert topic_name not in admin.list_topics()
    finally:
        admin.close()
