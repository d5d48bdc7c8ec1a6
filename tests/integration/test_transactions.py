"""Transactions with real clients: each producer commits and aborts, each consumer reads both isolation levels.

Aborted records never reach read_committed consumers of any client and do
reach read_uncommitted ones; a zombie producer is fenced; a broker restart in
the middle of a transaction loses nothing committed and exposes nothing aborted.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.integration.workload import make_topic

PRODUCERS = ["confluent", "kafka-python", "aiokafka"]
CONSUMERS = ["confluent", "kafka-python", "aiokafka"]
PARTITIONS = 3


def transact_confluent(bootstrap, topic, txn_id, batches):
    """batches: [(commit?, [values])], each its own transaction."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 2})
    producer.init_transactions(20)
    for commit, values in batches:
        producer.begin_transaction()
        for i, value in enumerate(values):
            producer.produce(topic, value, partition=i % PARTITIONS)
        producer.flush(20)
        producer.commit_transaction(20) if commit else producer.abort_transaction(20)


def transact_kafka_python(bootstrap, topic, txn_id, batches):
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
    producer.init_transactions()
    for commit, values in batches:
        producer.begin_transaction()
        for i, value in enumerate(values):
            producer.send(topic, value, partition=i % PARTITIONS)
        producer.flush()
        producer.commit_transaction() if commit else producer.abort_transaction()
    producer.close()


def transact_aiokafka(bootstrap, topic, txn_id, batches):
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
        await producer.start()
        try:
            for commit, values in batches:
                await producer.begin_transaction()
                for i, value in enumerate(values):
                    await producer.send(topic, value, partition=i % PARTITIONS)
                await producer.flush()
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())


TRANSACT = {"confluent": transact_confluent, "kafka-python": transact_kafka_python, "aiokafka": transact_aiokafka}


def read_confluent(bootstrap, topic, isolation, expected):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "readers", "isolation.level": isolation,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got, deadline = [], time.monotonic() + 15
    while len(got) < expected and time.monotonic() < deadline:
        for m in consumer.consume(500, timeout=0.5):
            if not m.error():
                got.append(m.value())
    extra_until = time.monotonic() + 0.5   # anything beyond what is expected would show up now
    while time.monotonic() < extra_until:
        got += [m.value() for m in consumer.consume(500, timeout=0.1) if not m.error()]
    consumer.close()
    return got


def read_kafka_python(bootstrap, topic, isolation, expected):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    got, deadline = [], time.monotonic() + 15
    while time.monotonic() < deadline:
        batch = consumer.poll(timeout_ms=300)
        got += [r.value for records in batch.values() for r in records]
        if len(got) >= expected and not batch:
            break
    consumer.close()
    return got


def read_aiokafka(bootstrap, topic, isolation, expected):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            await consumer.seek_to_beginning()
            got, deadline = [], time.monotonic() + 15
            while time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=300)
                got += [r.value for records in batch.values() for r in records]
                if len(got) >= expected and not batch:
                    break
            return got
        finally:
            await consumer.stop()

    return asyncio.run(run())


READ = {"confluent": read_confluent, "kafka-python": read_kafka_python, "aiokafka": read_aiokafka}


@pytest.mark.parametrize("producer", PRODUCERS)
def test_aborted_records_never_reach_read_committed_consumers(broker, topic_name, producer):
    make_topic(broker.bootstrap, topic_name, PARTITIONS)
    batches = [(n % 3 != 1, [f"{'C' if n % 3 != 1 else 'A'}{n}-{i}".encode() for i in range(20)])
               for n in range(6)]
    TRANSACT[producer](broker.bootstrap, topic_name, f"txn-{topic_name}", batches)
    committed = sorted(v for commit, values in batches if commit for v in values)
    everything = sorted(v for _, values in batches for v in values)
    for consumer in CONSUMERS:
        assert sorted(READ[consumer](broker.bootstrap, topic_name, "read_committed", len(committed))) == committed, \
            f"{consumer} read_committed"
        assert sorted(READ[consumer](broker.bootstrap, topic_name, "read_uncommitted", len(everything))) == \
            everything, f"{consumer} read_uncommitted"


def test_a_zombie_producer_is_fenced(broker, topic_name):
    from confluent_kafka import KafkaException, Producer

    make_topic(broker.bootstrap, topic_name, PARTITIONS)
    txn_id = f"zombie-{topic_name}"
    zombie = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id})
    zombie.init_transactions(20)
    zombie.begin_transaction()
    zombie.produce(topic_name, b"from the zombie", partition=0)
    zombie.flush(20)
    successor = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id})
    successor.init_transactions(20)            # fences the zombie and aborts its transaction
    successor.begin_transaction()
    successor.produce(topic_name, b"from the successor", partition=0)
    successor.commit_transaction(20)
    with pytest.raises(KafkaException) as raised:
        zombie.produce(topic_name, b"zombie again", partition=0)
        zombie.commit_transaction(20)
    assert raised.value.args[0].fatal() or "fenced" in str(raised.value).lower()
    assert read_confluent(broker.bootstrap, topic_name, "read_committed", 1) == [b"from the successor"]


def test_a_broker_restart_mid_transaction_loses_nothing_committed(fresh_broker, topic_name):
    from confluent_kafka import Producer

    fresh_broker.start()
    make_topic(fresh_broker.bootstrap, topic_name, PARTITIONS)
    txn_id = f"restart-{topic_name}"
    transact_confluent(fresh_broker.bootstrap, topic_name, txn_id, [(True, [b"before-%d" % i for i in range(9)])])
    producer = Producer({"bootstrap.servers": fresh_broker.bootstrap, "transactional.id": txn_id})
    producer.init_transactions(20)
    producer.begin_transaction()
    for i in range(9):
        producer.produce(topic_name, b"open-%d" % i, partition=i % PARTITIONS)
    producer.flush(20)
    fresh_broker.kill()   # kill -9 with the transaction open
    fresh_broker.start()
    committed = read_confluent(fresh_broker.bootstrap, topic_name, "read_committed", 9)
    assert sorted(committed) == sorted(b"before-%d" % i for i in range(9))   # the open one stays hidden
    # A new instance with the same id aborts what the old one left open, then commits its own.
    transact_confluent(fresh_broker.bootstrap, topic_name, txn_id, [(True, [b"after-%d" % i for i in range(9)])])
    final = read_confluent(fresh_broker.bootstrap, topic_name, "read_committed", 18)
    assert sorted(final) == sorted([b"before-%d" % i for i in range(9)] + [b"after-%d" % i for i in range(9)])
    uncommitted = read_confluent(fresh_broker.bootstrap, topic_name, "read_uncommitted", 27)
    assert len(uncommitted) == 27
