"""Fetch answers bounded by the broker and sent without holding the log in memory: consumers asking for the
largest answers a client allows read a large topic while the broker's resident memory is measured, with
sendfile and with chunked reads (the TLS path); a raw Fetch asking for 2 GiB gets fetch.max.bytes."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kbroker.client.connection import KafkaConnection
from tests import hostile
from tests.brokerproc import BrokerProcess
from tests.integration.workload import make_topic

pytestmark = pytest.mark.timeout(300)
MB = 1 << 20
PARTITIONS = 6
GREEDY = {"fetch.max.bytes": 2147483135, "max.partition.fetch.bytes": 1000000000,
          "receive.message.max.bytes": 2147483647}


def fill(bootstrap: str, topic: str, megabytes: int) -> int:
    """``megabytes`` of 1 KiB records over the topic's partitions; how many records."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1000000,
                         "compression.type": "none"})
    count = megabytes * 1024
    value = b"r" * 1024
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return count


def read_all(bootstrap: str, topic: str, count: int, group: str, results: list) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **GREEDY})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got, deadline = 0, time.monotonic() + 240
    try:
        while got < count and time.monotonic() < deadline:
            got += sum(1 for m in consumer.consume(10000, 1.0) if m.error() is None)
    finally:
        consumer.close()
    results.append(got)


def greedy_readers(broker: BrokerProcess, topic: str, count: int, readers: int) -> int:
    """``readers`` consumers read the whole topic at once; the broker's peak RSS over its RSS before."""
    pid = broker.proc.pid
    before = hostile.settled_rss(pid)
    results: list[int] = []
    threads = [threading.Thread(target=read_all, args=(broker.bootstrap, topic, count, f"reader-{i}", results))
               for i in range(readers)]
    for t in threads:
        t.start()
    peak = before
    while any(t.is_alive() for t in threads):
        peak = max(peak, hostile.rss_bytes(pid))
        time.sleep(0.02)
    assert results == [count] * readers, "a consumer did not read every record"
    return peak - before


@pytest.mark.parametrize("sendfile", ["true", "false"])
def test_greedy_consumers_cost_the_broker_little_memory(tmp_path, sendfile):
    broker = BrokerProcess(str(tmp_path / "data"), {"kbroker.fetch.sendfile": sendfile}).start()
    try:
        make_topic(broker.bootstrap, "big", PARTITIONS)
        count = fill(broker.bootstrap, "big", 200)
        grown = greedy_readers(broker, "big", count, readers=10)
        assert grown < 300 * MB, f"+{grown / MB:.0f} MB while 10 consumers read 200 MB"
    finally:
        assert broker.stop() == 0


@pytest.mark.slow
def test_forty_greedy_consumers_of_a_600_mb_topic(tmp_path):
    broker = BrokerProcess(str(tmp_path / "data")).start()
    try:
        make_topic(broker.bootstrap, "big", PARTITIONS)
        count = fill(broker.bootstrap, "big", 600)
        for readers in (10, 40):
            grown = greedy_readers(broker, "big", count, readers)
            assert grown < 300 * MB, f"+{grown / MB:.0f} MB while {readers} consumers read 600 MB"
    finally:
        assert broker.stop() == 0


def test_a_fetch_asking_for_2_gib_gets_fetch_max_bytes(tmp_path):
    limit = 4 * MB   # (Kafka's default is 55 MiB: a smaller one keeps the test quick)
    broker = BrokerProcess(str(tmp_path / "data"), {"fetch.max.bytes": str(limit)}).start()
    try:
        make_topic(broker.bootstrap, "big", 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 1000000})
        for _ in range(16 * 1024):
            producer.produce("big", value=b"x" * 1024)
        assert producer.flush(60) == 0

        async def fetch(max_bytes: int) -> int:
            conn = await KafkaConnection.open("127.0.0.1", broker.port)
            try:
                answer = await conn.request(1, 12, {
                    "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes,
                    "isolation_level": 0, "session_epoch": -1, "topics": [{"topic": "big", "partitions": [
                        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 0x7FFFFFFF}]}]})
            finally:
                await conn.close()
            partition = answer.responses[0].partitions[0]
            assert partition.error_code == 0
            return len(partition.records)

        got = asyncio.run(fetch(0x7FFFFFFF))
        assert limit - MB < got <= limit   # whole batches up to the broker's limit, not the 16 MiB asked for
        assert asyncio.run(fetch(MB)) <= MB   # a client asking for less gets less
    finally:
        assert broker.stop() == 0
