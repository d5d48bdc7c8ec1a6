"""kill -9 mid-stream: every acknowledged record survives, in order, with no gap."""

import asyncio
import os
import random
import threading
import time

import pytest

from confluent_kafka import Consumer, Producer, TopicPartition

from kbroker.broker.metadata import JOURNAL_FILE, STORE_FILE
from kbroker.client.connection import KafkaConnection
from tests.integration.workload import make_topic

PARTITIONS = 3
STORE_FILES = (STORE_FILE, JOURNAL_FILE)


def read_partition(bootstrap, topic, partition):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, partition, 0)])
    out = []
    try:
        while True:
            m = consumer.poll(10)
            assert m is not None, "timed out reading back"
            if m.error():
                break  # partition EOF
            out.append((m.offset(), m.value()))
    finally:
        consumer.close()
    return out


def test_acknowledged_records_survive_kill_9(fresh_broker):
    broker = fresh_broker.start()
    make_topic(broker.bootstrap, "crash", PARTITIONS)
    acked = {p: [] for p in range(PARTITIONS)}
    produce_then_kill(broker, "crash", acked, at_least=20000, first=0)
    broker.start()  # same port, same data dir: recovery runs
    verify(broker, "crash", acked)
    assert broker.stop() == 0


@pytest.mark.slow
def test_repeated_kill_9_cycles_lose_nothing(fresh_broker):
    """Five crash/recover cycles on the same data: each recovery starts from an already recovered log."""
    broker = fresh_broker.start()
    make_topic(broker.bootstrap, "crash", PARTITIONS, configs={"internal.segment.bytes": "1000000"})
    acked = {p: [] for p in range(PARTITIONS)}
    rng = random.Random(7)
    for cycle in range(5):
        produce_then_kill(broker, "crash", acked, at_least=rng.randrange(5000, 40000), first=cycle * 10**7)
        broker.start()
        verify(broker, "crash", acked)
    assert broker.stop() == 0


def produce_then_kill(broker, topic, acked, *, at_least: int, first: int) -> None:
    """Produce with acks=1 until ``at_least`` more records are acknowledged, then kill -9 mid-stream."""
    start_count = sum(map(len, acked.values()))
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is None:
            acked[msg.partition()].append((msg.offset(), msg.value()))

    def produce_forever():
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "1", "linger.ms": 1,
                             "enable.idempotence": False, "message.timeout.ms": 3000, "retries": 0})
        i = first
        while not stop.is_set():
            try:
                producer.produce(topic, value=b"record-%010d" % i, partition=i % PARTITIONS, on_delivery=on_delivery)
                i += 1
            except BufferError:
                pass
            producer.poll(0)
        producer.flush(5)

    worker = threading.Thread(target=produce_forever)
    worker.start()
    deadline = time.monotonic() + 60
    while sum(map(len, acked.values())) - start_count < at_least and time.monotonic() < deadline:
        time.sleep(0.01)
    broker.kill()
    stop.set()
    worker.join(30)
    total = sum(map(len, acked.values())) - start_count
    assert total >= at_least, f"only {total} records were acknowledged before the kill"


def verify(broker, topic, acked) -> None:
    """Every acknowledged record is at its acknowledged offset; offsets have no gap; order is kept."""
    for p in range(PARTITIONS):
        stored = read_partition(broker.bootstrap, topic, p)
        offsets = [o for o, _ in stored]
        assert offsets == list(range(len(stored))), f"partition {p} has a gap"
        by_offset = dict(stored)
        for offset, value in acked[p]:
            assert by_offset.get(offset) == value, f"acknowledged record lost at {p}:{offset}"
        values = [v for _, v in stored]
        assert values == sorted(values), f"partition {p} out of order"


async def epoch_ends(port: int) -> list[tuple]:
    """OffsetForLeaderEpoch of epoch 0 on partitions 0 and 1 of ``epochs``, as a consumer validating its
    position asks it: (error, epoch, end offset) each, and the epoch ListOffsets names for partition 0's
    earliest record."""
    conn = await KafkaConnection.open("127.0.0.1", port)
    try:
        epochs = await conn.request(23, 4, {"replica_id": -1, "topics": [{"topic": "epochs", "partitions": [
            {"partition": p, "current_leader_epoch": -1, "leader_epoch": 0} for p in (0, 1)]}]})
        earliest = await conn.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{
            "name": "epochs", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                              "timestamp": -2}]}]})
        return [(p.error_code, p.leader_epoch, p.end_offset) for p in epochs.topics[0].partitions] + \
            [earliest.topics[0].partitions[0].leader_epoch]
    finally:
        await conn.close()


def written_epochs(broker) -> list[tuple]:
    """``epochs`` made with two partitions and ten records written to partition 0: what epoch_ends finds."""
    make_topic(broker.bootstrap, "epochs", 2)
    assert asyncio.run(epoch_ends(broker.port))[:2] == [(0, 0, 0), (0, 0, 0)]
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("epochs", value=b"%d" % i, partition=0)
    assert producer.flush(10) == 0
    written = [(0, 0, 10), (0, 0, 0), 0]
    assert asyncio.run(epoch_ends(broker.port)) == written
    return written


def test_where_epoch_0_ends_is_known_written_or_empty_across_kill_9(fresh_broker):
    """A single broker's partitions start leader epoch 0 when it takes them, as Kafka's leader does: a
    consumer validating its position (OffsetForLeaderEpoch) learns where the epoch ends on an empty
    partition as on a written one, and so it does after kill -9 (the written log's epochs come back from its
    batches, the empty one's from leading it again); ListOffsets names the epoch of the earliest record."""
    written = written_epochs(fresh_broker.start())
    fresh_broker.kill()
    broker = fresh_broker.start()
    assert asyncio.run(epoch_ends(broker.port)) == written
    assert broker.stop() == 0


@pytest.mark.parametrize("damage", ["", "0\n1\n"], ids=["emptied", "cut short"])
def test_a_damaged_epoch_checkpoint_is_rebuilt_from_the_batches(fresh_broker, damage):
    """A restart rebuilds a leader-epoch-checkpoint without an fsync, so a crash can leave one empty or cut
    short: the next start reads it as missing and rebuilds it from the batches, and a consumer validating its
    position still learns where epoch 0 ends (read as "no epochs", the log answered that it did not know)."""
    broker = fresh_broker.start()
    written = written_epochs(broker)
    assert broker.stop() == 0
    checkpoint = os.path.join(fresh_broker.data_dir, "epochs-0", "leader-epoch-checkpoint")
    assert open(checkpoint).read() == "0\n1\n0 0\n"   # (the clean stop wrote it)
    with open(checkpoint, "w") as f:
        f.write(damage)
    broker = fresh_broker.start()
    assert asyncio.run(epoch_ends(broker.port)) == written
    assert broker.stop() == 0
    assert open(checkpoint).read() == "0\n1\n0 0\n"


def test_admin_changes_survive_kill_9_whether_journaled_or_folded_into_the_snapshot(fresh_broker):
    """Topics (made, grown, configured, deleted), a group's and a client's configs, kept as journal lines and,
    past a thousand changes, folded into the metadata snapshot: all there after kill -9, as librdkafka's admin
    client describes them."""
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                       NewTopic, ResourceType)

    broker = fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for first in range(0, 1100, 275):   # (a snapshot folds the journal in at 1,000 changes; the rest stay lines)
        for future in admin.create_topics([NewTopic(f"many-{i}", 1, 1) for i in range(first, first + 275)]).values():
            future.result(60)
    admin.create_partitions([NewPartitions("many-7", 3)])["many-7"].result(30)
    admin.delete_topics(["many-8"])["many-8"].result(30)
    resources = [ConfigResource(ResourceType.TOPIC, "many-1099", incremental_configs=[
                     ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)]),
                 ConfigResource(ResourceType.GROUP, "g", incremental_configs=[
                     ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])]
    for future in admin.incremental_alter_configs(resources).values():
        future.result(30)
    snapshot, journal = (os.path.join(broker.data_dir, name) for name in STORE_FILES)
    assert os.path.getsize(snapshot) > 0 and os.path.getsize(journal) > 0   # (both ways are read back)
    broker.kill()

    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = admin.list_topics(timeout=30).topics
    assert {f"many-{i}" for i in range(1100)} - topics.keys() == {"many-8"}
    assert len(topics["many-7"].partitions) == 3 and len(topics["many-1099"].partitions) == 1
    described = {r.name: configs.result(30) for r, configs in admin.describe_configs(resources).items()}
    assert described["many-1099"]["retention.ms"].value == "123456"
    assert described["g"]["share.auto.offset.reset"].value == "earliest"
    assert broker.stop() == 0
