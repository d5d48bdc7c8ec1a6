"""Kafka 4's groups on kbroker, runnable against `make run`: a share group as a work queue, and a consumer group
on the KIP-848 protocol.

    python -m examples.queues --bootstrap-server 127.0.0.1:9092

Jobs go to a topic; three share consumers take them one by one. A worker that fails a job releases it, so
another worker (or the same) gets it again with a higher delivery count; every job ends accepted exactly once.
Then a consumer group with ``group.protocol=consumer`` reads the same topic, the broker assigning its partitions.
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid

from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

JOBS = 60


def share_group_demo(bootstrap: str, topic: str) -> dict[int, list[str]]:
    """Three workers on a share group; each job's deliveries, in order: who took it, and how it ended."""
    group = f"workers-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(10)
    history: dict[int, list[str]] = {}
    accepted = set()
    lock, done = threading.Lock(), threading.Event()

    def worker(name: str) -> None:
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "share.acknowledgement.mode": "explicit"})
        consumer.subscribe([topic])
        try:
            while not done.is_set():
                for msg in consumer.poll(0.5):
                    if msg.error():
                        continue
                    job = int(msg.value())
                    fails = job % 7 == 0 and msg.delivery_count() == 1     # every 7th job fails once
                    consumer.acknowledge(msg, AcknowledgeType.RELEASE if fails else AcknowledgeType.ACCEPT)
                    with lock:
                        history.setdefault(job, []).append(
                            f"{name}#{msg.delivery_count()}:{'released' if fails else 'accepted'}")
                        if not fails:
                            accepted.add(job)
                        if len(accepted) == JOBS:
                            done.set()
                consumer.commit_sync(10)
        finally:
            consumer.close()

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    done.wait(60)
    done.set()
    for t in threads:
        t.join(30)
    return history


def consumer_group_demo(bootstrap: str, topic: str) -> list[list[int]]:
    """Two consumers with group.protocol=consumer: the partitions each was given by the broker."""
    group = f"readers-{uuid.uuid4().hex[:6]}"
    consumers = [Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                           "auto.offset.reset": "earliest"}) for _ in range(2)]
    for c in consumers:
        c.subscribe([topic])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sum(len(c.assignment()) for c in consumers) < 4 or \
            not all(c.assignment() for c in consumers):
        for c in consumers:
            c.poll(0.1)
    owned = [sorted(tp.partition for tp in c.assignment()) for c in consumers]
    for c in consumers:
        c.close()
    return owned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    bootstrap = parser.parse_args().bootstrap_server
    topic = f"jobs-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": bootstrap})
    for job in range(JOBS):
        producer.produce(topic, str(job).encode())
    producer.flush(10)
    history = share_group_demo(bootstrap, topic)
    accepted = sum(1 for h in history.values() if h[-1].endswith("accepted"))
    again = sorted(job for job, h in history.items() if len(h) > 1)
    print(f"share group: {accepted} of {JOBS} jobs accepted exactly once; delivered again after a release: {again}")
    for job in again[:3]:
        print(f"  job {job}: {' -> '.join(history[job])}")
    print(f"consumer group (KIP-848): partitions per member {consumer_group_demo(bootstrap, topic)}")


if __name__ == "__main__":
    main()
