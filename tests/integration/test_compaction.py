"""Compaction on a running broker: a user topic with cleanup.policy=compact, and __consumer_offsets."""

from __future__ import annotations

import os

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.brokerproc import BrokerProcess
from tests.integration.groupworkers import wait_until
from tests.integration.workload import make_topic, read_partition


def log_bytes(directory: str) -> int:
    """The size of a partition's segments now. The cleaner swaps and deletes segments while this runs, so a file
    listed may be gone before its size is read: it counts as nothing, which is what it holds by then."""
    total = 0
    for entry in os.scandir(directory):
        if entry.name.endswith(".log"):
            try:
                total += entry.stat().st_size
            except FileNotFoundError:
                pass
    return total


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    return [(m.offset(), m.key(), m.value()) for m in read_partition(bootstrap, topic, poll_timeout=5)]


def test_compacted_topic_keeps_the_latest_value_per_key(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, 1, {"cleanup.policy": "compact", "internal.segment.bytes": "2048",
                                                 "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    expected: dict[bytes, bytes | None] = {}
    for i in range(600):
        key = f"key-{i % 20}".encode()
        value = None if i % 97 == 0 else f"value-{i}".encode()
        producer.produce(topic_name, key=key, value=value)
        producer.flush(10)
        expected[key] = value
    live = {k: v for k, v in expected.items() if v is not None}
    wait_until(lambda: len(read_all(broker.bootstrap, topic_name)) < 100, 30, "the cleaner to compact")
    got = read_all(broker.bootstrap, topic_name)
    final = {}
    for offset, key, value in got:
        final[key] = value
    assert {k: v for k, v in final.items() if v is not None} == live
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(offsets) and offsets[-1] == 599   # offsets never change; the last one stays


def test_a_topic_switched_to_compact_by_an_admin_client_is_compacted(broker, topic_name):
    """The cleaner walks a list of the compacted logs, kept as logs come and go; a topic made with
    cleanup.policy=delete joins it when librdkafka's admin client switches the policy."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    make_topic(broker.bootstrap, topic_name, 1, {"internal.segment.bytes": "2048",
                                                 "min.cleanable.dirty.ratio": "0.01"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(400):
        producer.produce(topic_name, key=f"key-{i % 10}".encode(), value=f"value-{i}".encode())
        producer.flush(10)
    assert len(read_all(broker.bootstrap, topic_name)) == 400   # (not compacted while the policy is delete)
    resource = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})   # (kept alive until the result arrives)
    admin.incremental_alter_configs([resource])[resource].result(30)
    wait_until(lambda: len(read_all(broker.bootstrap, topic_name)) < 100, 30, "the cleaner to compact")
    got = read_all(broker.bootstrap, topic_name)
    latest = {key: value for _, key, value in got}
    assert latest == {f"key-{k}".encode(): f"value-{390 + k}".encode() for k in range(10)}


def test_keyless_records_are_refused_on_a_compacted_topic(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, 1, {"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0})
    errors = []
    producer.produce(topic_name, value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert len(errors) == 1 and errors[0].code() == KafkaError.INVALID_RECORD, errors


def test_consumer_offsets_are_compacted_and_still_resume(tmp_path):
    broker = BrokerProcess(str(tmp_path / "data"), overrides={"offsets.topic.segment.bytes": "4096",
                                                              "offsets.topic.num.partitions": "1"}).start()
    try:
        make_topic(broker.bootstrap, "events", 1)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "committer",
                             "enable.auto.commit": False})
        for offset in range(1, 1001):
            consumer.commit(offsets=[TopicPartition("events", 0, offset)], asynchronous=False)
        consumer.close()
        directory = os.path.join(str(tmp_path / "data"), "__consumer_offsets-0")

        written = 1000 * 100   # each commit is a batch of about a hundred bytes
        wait_until(lambda: log_bytes(directory) < written / 4, 30, "the cleaner to compact __consumer_offsets")
        assert broker.stop() == 0
        broker.start()
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "committer"})
        [committed] = consumer.committed([TopicPartition("events", 0)], timeout=10)
        consumer.close()
        assert committed.offset == 1000
    finally:
        broker.kill()


def test_the_broker_keeps_answering_while_it_compacts(tmp_path):
    """A compaction is long work (here 80 MiB rewritten to a few hundred KiB); done in one go on the event loop
    it held every client for its whole length (hundreds of milliseconds here, seconds for a 1 GiB segment).
    Cleaned in slices, requests sent all through it are answered within a small fraction of that."""
    import asyncio
    import time

    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    from kbroker.client.connection import KafkaConnection

    data = str(tmp_path / "data")
    broker = BrokerProcess(data, overrides={"log.cleaner.backoff.ms": "200"}).start()
    try:
        # Nothing is cleanable while it is written (min.compaction.lag.ms), so one pass compacts all of it.
        make_topic(broker.bootstrap, "compacted", 1, {"cleanup.policy": "compact", "segment.bytes": str(4 << 20),
                                                      "min.cleanable.dirty.ratio": "0.01",
                                                      "min.compaction.lag.ms": "3600000"})
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
        for i in range(80 * 1024):
            producer.produce("compacted", key=b"key-%d" % (i % 300), value=b"v" * 1000)
            if i % 5000 == 0:
                producer.poll(0)
        assert producer.flush(60) == 0
        directory = os.path.join(data, "compacted-0")

        assert log_bytes(directory) > 75 << 20

        async def probe() -> tuple[float, float]:
            conn = await KafkaConnection.open("127.0.0.1", broker.port)
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            resource = ConfigResource(ResourceType.TOPIC, "compacted", incremental_configs=[ConfigEntry(
                "min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)])
            admin.incremental_alter_configs([resource])[resource].result(30)
            began = time.monotonic()
            slowest, deadline = 0.0, began + 60
            try:
                while log_bytes(directory) > 8 << 20 and time.monotonic() < deadline:
                    sent = time.monotonic()
                    await conn.request(18, 3, {"client_software_name": "probe", "client_software_version": "1"})
                    slowest = max(slowest, time.monotonic() - sent)
                    await asyncio.sleep(0.002)
            finally:
                await conn.close()
            return slowest, time.monotonic() - began

        slowest, took = asyncio.run(probe())
        assert log_bytes(directory) <= 8 << 20, "the cleaner did not compact within a minute"
        # Within 150 ms, or an eighth of the compaction's length on a machine slow enough to stretch it (a
        # compaction in one go holds a request for most of its length; a loaded shared machine has held one for
        # 168 ms of a sliced one, its own scheduling, not the broker's)
        assert slowest < max(0.15, took / 8), \
            f"a request waited {slowest * 1000:.0f} ms while the log was compacted in {took * 1000:.0f} ms"
        latest = {m.key(): m.offset() for m in read_partition(broker.bootstrap, "compacted", poll_timeout=5)}
        assert len(latest) == 300 and max(latest.values()) == 80 * 1024 - 1
    finally:
        broker.stop()
