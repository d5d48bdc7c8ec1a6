"""Idempotent producers retrying through dropped responses write every record exactly once."""

import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer

from tests.integration.workload import make_topic, read_partition
from tests.proxy import DroppingProxy

COUNT = 3000


def read_values(bootstrap, topic):
    return [m.value() for m in read_partition(bootstrap, topic)]


@pytest.fixture
def proxied_broker(fresh_broker):
    """A broker that advertises the proxy's address, so clients talk to it only through the proxy."""
    proxy = DroppingProxy(0, api_key=0, drop_every=5).start()
    fresh_broker.overrides["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{proxy.port}"
    proxy.upstream_port = fresh_broker.start().port
    yield fresh_broker, proxy
    proxy.stop()


def produce_kafka_python(bootstrap, topic):
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=2, batch_size=2000,
                             retries=100, retry_backoff_ms=20, max_in_flight_requests_per_connection=5,
                             reconnect_backoff_ms=20, request_timeout_ms=5000, metadata_max_age_ms=100000)
    futures = [producer.send(topic, value=b"%06d" % i, partition=0) for i in range(COUNT)]
    producer.flush(60)
    for f in futures:
        f.get(timeout=30)
    producer.close()


def produce_confluent(bootstrap, topic):
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2,
                         "batch.num.messages": 100, "retry.backoff.ms": 20, "reconnect.backoff.ms": 20,
                         "message.timeout.ms": 60000})
    errors = []
    for i in range(COUNT):
        producer.produce(topic, value=b"%06d" % i, partition=0,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]


@pytest.mark.parametrize("produce", [produce_kafka_python, produce_confluent], ids=["kafka-python", "confluent"])
def test_retries_through_dropped_responses_write_once(proxied_broker, topic_name, produce):
    broker, proxy = proxied_broker
    make_topic(f"127.0.0.1:{proxy.port}", topic_name)
    started = time.monotonic()
    produce(f"127.0.0.1:{proxy.port}", topic_name)
    assert proxy.dropped >= 3, f"the proxy dropped only {proxy.dropped} responses: no retries were forced"
    proxy.drop_every = 10**9
    values = read_values(f"127.0.0.1:{proxy.port}", topic_name)
    assert len(values) == COUNT, f"{len(values) - COUNT:+d} records (duplicates or losses)"
    assert values == [b"%06d" % i for i in range(COUNT)]
    assert time.monotonic() - started < 60


def produce_aiokafka(bootstrap, topic):
    import asyncio

    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all",
                                    linger_ms=2, max_batch_size=2000, retry_backoff_ms=20,
                                    request_timeout_ms=5000, metadata_max_age_ms=100000)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=b"%06d" % i, partition=0) for i in range(COUNT)]
            await producer.flush()
            for f in futures:
                await f
        finally:
            await producer.stop()

    asyncio.run(run())


@pytest.mark.parametrize("produce", [produce_kafka_python, produce_confluent, produce_aiokafka],
                         ids=["kafka-python", "confluent", "aiokafka"])
def test_retries_across_a_broker_restart_write_once(proxied_broker, topic_name, produce):
    """Dropped responses and a kill -9 of the broker mid-stream: producer state (rebuilt from the log at
    start-up) still recognises the retried batches, so each record is in the log once, in order."""
    import threading

    broker, proxy = proxied_broker
    make_topic(f"127.0.0.1:{proxy.port}", topic_name)
    restarted = threading.Event()

    def restart_midway():
        deadline = time.monotonic() + 30
        while proxy.seen < 15 and time.monotonic() < deadline:
            time.sleep(0.005)
        broker.kill()
        proxy.upstream_port = broker.start().port
        restarted.set()

    restarter = threading.Thread(target=restart_midway, daemon=True)
    restarter.start()
    produce(f"127.0.0.1:{proxy.port}", topic_name)
    restarter.join(60)
    assert restarted.is_set(), "the broker was not restarted while the producer ran"
    proxy.drop_every = 10**9
    values = read_values(f"127.0.0.1:{proxy.port}", topic_name)
    assert len(values) == COUNT, f"{len(values) - COUNT:+d} records (duplicates or losses)"
    assert values == [b"%06d" % i for i in range(COUNT)]
