"""kill -9 mid-stream: every acknowledged record survives, in order, with no gap."""

import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.workload import make_topic

PARTITIONS = 3


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
    topic = "crash"
    make_topic(broker.bootstrap, topic, PARTITIONS)
    acked: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is None:
            acked[msg.partition()].append((msg.offset(), msg.value()))

    def produce_forever():
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "1", "linger.ms": 1,
                             "enable.idempotence": False, "message.timeout.ms": 3000, "retries": 0})
        i = 0
        while not stop.is_set():
            try:
                producer.produce(topic, value=b"record-%08d" % i, partition=i % PARTITIONS, on_delivery=on_delivery)
                i += 1
            except BufferError:
                pass
            producer.poll(0)
        producer.flush(5)

    worker = threading.Thread(target=produce_forever)
    worker.start()
    deadline = time.monotonic() + 30
    while sum(map(len, acked.values())) < 20000 and time.monotonic() < deadline:
        time.sleep(0.01)
    broker.kill()
    stop.set()
    worker.join(30)
    total = sum(map(len, acked.values()))
    assert total >= 20000, f"only {total} records were acknowledged before the kill"

    broker.start()  # same port, same data dir: recovery runs
    for p in range(PARTITIONS):
        stored = read_partition(broker.bootstrap, topic, p)
        offsets = [o for o, _ in stored]
        assert offsets == list(range(len(stored))), f"partition {p} has a gap"
        by_offset = dict(stored)
        for offset, value in acked[p]:
            assert by_offset.get(offset) == value, f"acknowledged record lost at {p}:{offset}"
        values = [v for _, v in stored]
        assert values == sorted(values), f"partition {p} out of order"
    assert broker.stop() == 0
