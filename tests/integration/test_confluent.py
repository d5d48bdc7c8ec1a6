"""confluent-kafka (librdkafka) against a real kbroker: codecs, acks, idempotence, offsets by time, admin."""

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic

from tests.integration.workload import CODECS, check_received, records


def create(broker, name, partitions=6, configs=None):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})])
    futures[name].result(10)


def consume_all(broker, name, partitions, expected):
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(name, p, 0) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < expected and time.monotonic() < deadline:
            for m in consumer.consume(1000, timeout=1):
                if m.error():
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                    continue
                got.append((m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or [])))
    finally:
        consumer.close()
    return got


def produce(broker, name, sent, **conf):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **conf})
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)

    for s in sent:
        while True:
            try:
                producer.produce(name, value=s.value, key=s.key, headers=list(s.headers), on_delivery=report)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(30) == 0
    assert not errors, errors


@pytest.mark.parametrize("codec", CODECS + ["none"])
def test_produce_and_consume_every_codec(broker, topic_name, codec):
    create(broker, topic_name)
    sent = records(2000, tag=codec)
    produce(broker, topic_name, sent, **{"compression.type": codec, "enable.idempotence": True})
    check_received(sent, consume_all(broker, topic_name, 6, len(sent)))


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks_levels(broker, topic_name, acks):
    create(broker, topic_name, partitions=3)
    sent = records(500)
    produce(broker, topic_name, sent, acks=acks)
    check_received(sent, consume_all(broker, topic_name, 3, len(sent)))


def test_acks_all_to_a_topic_of_fewer_replicas_than_its_min_insync_replicas(broker, topic_name):
    """Kafka 4 bounds min.insync.replicas by a partition's replicas: a one-replica topic asking for two in sync
    takes acks=all writes while its one replica is in sync (librdkafka would see NOT_ENOUGH_REPLICAS before)."""
    create(broker, topic_name, partitions=2, configs={"min.insync.replicas": "2"})
    sent = records(200)
    produce(broker, topic_name, sent, acks="all", **{"enable.idempotence": True, "message.timeout.ms": 10000})
    check_received(sent, consume_all(broker, topic_name, 2, len(sent)))


def test_offsets_for_times_and_watermarks(broker, topic_name):
    create(broker, topic_name, partitions=1)
    base = int(time.time() * 1000) - 100_000
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(100):
        producer.produce(topic_name, value=b"v%d" % i, timestamp=base + i * 1000)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (0, 100)
        found = consumer.offsets_for_times([TopicPartition(topic_name, 0, base + 42_500)], timeout=10)
        assert found[0].offset == 43
        consumer.assign([TopicPartition(topic_name, 0, 43)])
        m = None
        deadline = time.monotonic() + 10
        while m is None and time.monotonic() < deadline:
            m = consumer.poll(1)
        assert m is not None and m.value() == b"v43" and m.timestamp()[1] == base + 43_000
    finally:
        consumer.close()


def test_topic_admin(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, 1, config={"retention.bytes": "100000"})])[topic_name].result(10)
    with pytest.raises(Exception) as exists:
        admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(10)
    assert exists.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    admin.create_partitions([NewPartitions(topic_name, 3)])[topic_name].result(10)
    assert len(admin.list_topics(topic_name, timeout=10).topics[topic_name].partitions) == 3
    resource = ConfigResource("topic", topic_name)
    change = ConfigEntry("retention.ms", "7000", incremental_operation=AlterConfigOpType.SET)
    admin.incremental_alter_configs([ConfigResource("topic", topic_name, incremental_configs=[change])])[
        resource].result(10)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "7000"
    assert configs["retention.bytes"].value == "100000", "incremental alter keeps other overrides"
    admin.delete_topics([topic_name])[topic_name].result(10)
    assert topic_name not in admin.list_topics(timeout=10).topics


def test_kafka_3_topic_configs_and_an_empty_cleanup_policy(broker, topic_name):
    """Configs Kafka 3.x deprecated are still accepted and described (3.x clients set them); subtracting the
    last policy from cleanup.policy leaves it empty, as in Kafka 4.x, instead of failing."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1, config={"message.format.version": "2.8",
                                                            "message.downconversion.enable": "false"})])[
        topic_name].result(10)
    resource = ConfigResource("topic", topic_name)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert (configs["message.format.version"].value, configs["message.downconversion.enable"].value) == \
        ("2.8", "false")
    subtract = ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)
    admin.incremental_alter_configs([ConfigResource("topic", topic_name, incremental_configs=[subtract])])[
        resource].result(10)
    assert admin.describe_configs([resource])[resource].result(10)["cleanup.policy"].value == ""
    append = ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)
    admin.incremental_alter_configs([ConfigResource("topic", topic_name, incremental_configs=[append])])[
        resource].result(10)
    assert admin.describe_configs([resource])[resource].result(10)["cleanup.policy"].value == "compact"


def test_topic_refusals_reach_the_client_in_kafkas_words(broker, topic_name):
    """librdkafka's admin client passes the broker's message on: a replication factor past the brokers and fewer
    partitions are told in Kafka 4.2's controller's words."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(10)

    def refusal(future) -> tuple[int, str]:
        with pytest.raises(Exception) as refused:
            future.result(10)
        return refused.value.args[0].code(), refused.value.args[0].str()
    code, message = refusal(admin.create_topics([NewTopic(f"{topic_name}-x", 1, 3)])[f"{topic_name}-x"])
    assert code == KafkaError.INVALID_REPLICATION_FACTOR and message == (
        "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached because "
        "only 1 broker(s) are registered.")
    code, message = refusal(admin.create_partitions([NewPartitions(topic_name, 1)])[topic_name])
    assert code == KafkaError.INVALID_PARTITIONS and message == (
        f"The topic {topic_name} currently has 2 partition(s); 1 would not be an increase.")
