"""A three-broker cluster on a real ZooKeeper: replication, ISR, failover, fencing, controlled shutdown."""

from __future__ import annotations

import os

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from protocol.records import split_batches
from tests.cluster import Cluster, wait_until

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(str(tmp_path_factory.mktemp("cluster"))).start()
    yield c
    codes = c.stop()
    assert all(code == 0 for code in codes.values() if code is not None), codes


def describe(bootstrap: str, topic: str) -> dict[int, dict]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        found = admin.describe_topics([topic])[0]
    finally:
        admin.close()
    return {p["partition_index"]: {"leader": p["leader_id"], "replicas": p["replica_nodes"], "isr": p["isr_nodes"]}
            for p in found["partitions"]}


def create(bootstrap: str, topic: str, partitions: int = 3, rf: int = 3, configs=None) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(topic, partitions, rf, topic_configs=configs or {})], timeout_ms=30000)
    finally:
        admin.close()


def batches(data_dir: str, topic: str, partition: int) -> list[bytes]:
    """Every batch in a replica's .log files, byte for byte."""
    folder = os.path.join(data_dir, f"{topic}-{partition}")
    out = []
    for name in sorted(n for n in os.listdir(folder) if n.endswith(".log")):
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        out += [bytes(data[pos:pos + h.size]) for pos, h in split_batches(data)]
    return out


def consume_all(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000,
                             auto_offset_reset="earliest")
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    out = []
    for record in consumer:
        out.append((record.partition, record.offset, record.value))
    consumer.close()
    return out


def test_replication_factor_three_copies_every_batch_to_every_replica(cluster, topic_name):
    create(cluster.bootstrap, topic_name)
    parts = describe(cluster.bootstrap, topic_name)
    assert sorted(parts) == [0, 1, 2]
    assert all(sorted(p["replicas"]) == [1, 2, 3] and sorted(p["isr"]) == [1, 2, 3] for p in parts.values())
    assert sorted(Counter_leaders(parts)) == [1, 1, 1], "leaders spread over the brokers"
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5)
    for i in range(300):
        producer.send(topic_name, value=b"v%d" % i, partition=i % 3)
    producer.flush()
    producer.close()
    for p in range(3):
        wait_until(lambda p=p: len({tuple(batches(b.data_dir, topic_name, p)) for b in cluster.brokers.values()}) == 1,
                   message=f"replicas of partition {p} identical")
    values = sorted(v for _, _, v in consume_all(cluster.bootstrap, topic_name, 3))
    assert values == sorted(b"v%d" % i for i in range(300))


def Counter_leaders(parts):
    from collections import Counter

    return Counter(p["leader"] for p in parts.values()).values()


def test_too_few_brokers_is_invalid_replication_factor(cluster, topic_name):
    from kafka.errors import InvalidReplicationFactorError

    with pytest.raises(InvalidReplicationFactorError):
        create(cluster.bootstrap, topic_name, 1, 4)
