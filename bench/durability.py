"""What the throughput rows are worth after a crash, for `make bench`: acknowledged records still readable
after kill -9.

librdkafka writes records of 1 KiB with an idempotent producer (acks=all) and in committed transactions;
every one of them is acknowledged. The broker is then killed with SIGKILL at once, started again on the same
data directory and port, and a read_committed consumer counts what it can read back. A broker that answers
from memory and writes its data later (a snapshot, a background flush) loses what it acknowledged since; one
that appends to the page cache before answering (Kafka's default flush policy, and kbroker's) loses nothing
to the death of its process. (Losing the machine is another matter: that is what replication is for.)
"""

from __future__ import annotations

import time
import uuid

RECORDS = 10_000           # by the idempotent producer
TRANSACTIONS = 5           # committed, of TRANSACTION_RECORDS each
TRANSACTION_RECORDS = 1_000
SIZE = 1024
READ_IDLE_S = 8.0          # the count is final once nothing more arrives for this long


def _produce(bootstrap: str, topic: str) -> int:
    """Write the records; how many the broker acknowledged."""
    from confluent_kafka import Producer

    acked = []
    payload = b"d" * SIZE

    def report(err, _msg) -> None:
        acked.append(err is None)

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for _ in range(RECORDS):
        producer.produce(topic, payload, on_delivery=report)
        producer.poll(0)
    producer.flush(60)
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"durability-{uuid.uuid4().hex[:8]}",
                    "linger.ms": 5})
    txn.init_transactions(30)
    for _ in range(TRANSACTIONS):
        txn.begin_transaction()
        for _ in range(TRANSACTION_RECORDS):
            txn.produce(topic, payload)
            txn.poll(0)
        txn.commit_transaction(30)   # raises unless the broker committed it: all its records count as acknowledged
        acked += [True] * TRANSACTION_RECORDS
    return sum(acked)


def _count(bootstrap: str, topic: str, expected: int) -> int:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"durability-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    got, last = 0, time.monotonic()
    try:
        while got < expected and time.monotonic() - last < READ_IDLE_S:
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is None:
                    got += 1
                    last = time.monotonic()
    finally:
        consumer.close()
    return got


def measure(broker, create_topic) -> list[tuple]:
    """The broker is killed and started again: run this last on it. ``broker.kill_and_restart()`` does both."""
    topic = f"bench-durability-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic)
    name = "acknowledged records read back after kill -9"
    try:
        acked = _produce(broker.bootstrap, topic)
        broker.kill_and_restart()
        kept = _count(broker.bootstrap, topic, acked)
    except Exception as exc:
        cell = f"failed: {type(exc).__name__}: {str(exc)[:80]}"
    else:
        cell = f"{kept:,} of {acked:,}" + ("" if kept >= acked else f" (lost {acked - kept:,})")
    print(f"  {broker.name:9} {name:34}: {cell}", flush=True)
    return [(broker.name, name, cell)]
