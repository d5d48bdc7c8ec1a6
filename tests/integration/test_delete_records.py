"""DeleteRecords through kafka-python's and confluent-kafka's admin clients: the log start offset moves, the
records below it are gone for every consumer (earliest is the new start, a fetch below it is out of range),
the move survives a restart, bad offsets and compacted topics are refused with Kafka's errors, and in a
cluster every replica's log start follows the leader's."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition

from tests.brokerproc import BrokerProcess
from tests.cluster import Cluster, wait_until
from tests.integration.test_metrics import metrics_port, scrape, value

pytestmark = pytest.mark.timeout(180)


def fill(bootstrap: str, topic: str, count: int, configs: dict | None = None, rf: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, rf, config=configs or {})])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 10, "acks": "all"})
    for i in range(count):
        producer.produce(topic, b"r%d" % i, key=b"k%d" % i)
        producer.poll(0)
    assert producer.flush(30) == 0


def first_offsets(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-w"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()


def read_from_start(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    """What a new group reads from the earliest offset: until ``expected`` records came, or 3 s of nothing."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-r{expected}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got, quiet = [], 0
    try:
        while len(got) < expected or (expected == 0 and quiet < 6):
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
            else:
                quiet += 1
                assert quiet < 60, f"only {len(got)} of {expected} records"
        return got
    finally:
        consumer.close()


def test_records_below_the_new_log_start_are_gone_for_every_client(tmp_path, topic_name):
    broker = BrokerProcess(str(tmp_path / "data"), {"log.segment.bytes": "1024"})
    broker.start()
    try:
        fill(broker.bootstrap, topic_name, 100)
        client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            result = client.delete_records({KTopicPartition(topic_name, 0): 40})
        finally:
            client.close()
        assert [v["low_watermark"] for v in result.values()] == [40]
        assert first_offsets(broker.bootstrap, topic_name) == (40, 100)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        deleted = admin.delete_records([TopicPartition(topic_name, 0, 70)])
        assert [f.result(30).low_watermark for f in deleted.values()] == [70]
        assert read_from_start(broker.bootstrap, topic_name, 30) == [b"r%d" % i for i in range(70, 100)]
        # Reading below the start: out of range (reset to earliest above, an error without a reset policy).
        strict = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic_name}-s",
                           "auto.offset.reset": "error"})
        strict.assign([TopicPartition(topic_name, 0, 10)])
        errors = []
        for _ in range(20):
            msg = strict.poll(0.5)
            if msg is not None and msg.error():
                errors.append(msg.error().code())
                break
        strict.close()
        assert errors == [KafkaError._AUTO_OFFSET_RESET]
        for bad in (101, -7):
            with pytest.raises(KafkaException) as info:
                [f.result(30) for f in admin.delete_records([TopicPartition(topic_name, 0, bad)]).values()]
            assert info.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
        broker.stop()
        broker.start()
        assert first_offsets(broker.bootstrap, topic_name) == (70, 100)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})   # (the restarted broker has a new port)
        # -1: everything up to the high watermark
        assert [f.result(30).low_watermark for f in
                admin.delete_records([TopicPartition(topic_name, 0, -1)]).values()] == [100]
        assert read_from_start(broker.bootstrap, topic_name, 0) == []
        compacted = f"{topic_name}-compacted"
        fill(broker.bootstrap, compacted, 5, {"cleanup.policy": "compact"})
        with pytest.raises(KafkaException) as info:
            [f.result(30) for f in admin.delete_records([TopicPartition(compacted, 0, 2)]).values()]
        assert info.value.args[0].code() == KafkaError.POLICY_VIOLATION
    finally:
        assert broker.stop() == 0


def test_every_replica_follows_the_leaders_log_start(tmp_path, topic_name):
    cluster = Cluster(str(tmp_path / "cluster"), overrides={"metrics.port": "0", "log.segment.bytes": "1024"}).start()
    try:
        fill(cluster.bootstrap, topic_name, 100, rf=3)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        assert [f.result(30).low_watermark for f in
                admin.delete_records([TopicPartition(topic_name, 0, 60)]).values()] == [60]
        ports = [metrics_port(b) for b in cluster.brokers.values()]
        wait_until(lambda: [value(scrape(p), "kafka_log_log_logstartoffset", topic=topic_name, partition="0")
                            for p in ports] == [60, 60, 60], 30, 0.2, "every replica starts at 60")
        assert read_from_start(cluster.bootstrap, topic_name, 40) == [b"r%d" % i for i in range(60, 100)]
    finally:
        assert all(code == 0 for code in cluster.stop().values())
