"""Transactional produce for `make bench`: librdkafka (confluent-kafka) producing 1 KiB records in 100-record
transactions, committed one after another; records per second, median of 3 runs, each with its own
transactional id. (rdkafka_performance has no transactional mode, so this drives librdkafka from Python;
the per-record Python cost is a few microseconds, far below a transaction's commit round trips.)"""

from __future__ import annotations

import statistics
import time
import uuid

from bench.loadgen import cpu_seconds

RECORDS = 30_000
PER_TRANSACTION = 100
SIZE = 1024
RUNS = 3


def transactional_throughput(bootstrap: str, topic: str) -> float:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
                         "linger.ms": 5})
    producer.init_transactions(30)
    payload = b"x" * SIZE
    started = time.monotonic()
    for first in range(0, RECORDS, PER_TRANSACTION):
        producer.begin_transaction()
        for _ in range(PER_TRANSACTION):
            producer.produce(topic, payload)
        producer.commit_transaction(30)
    return RECORDS / (time.monotonic() - started)


def measure(broker, create_topic) -> list[tuple]:
    topic = f"bench-txn-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic)
    name = f"transactional produce {SIZE} B ({PER_TRANSACTION}/txn)"
    cpu = cpu_seconds(broker.pid)
    try:
        rate = statistics.median(transactional_throughput(broker.bootstrap, topic) for _ in range(RUNS))
    except Exception as exc:   # a broker without transactions: the cell says why
        cell = f"failed: {type(exc).__name__}: {str(exc)[:80]}"
    else:
        per_txn = (cpu_seconds(broker.pid) - cpu) / (RECORDS // PER_TRANSACTION * RUNS) * 1e3
        cell = f"{rate * SIZE / 1e6:.1f} MB/s, {rate:,.0f} rec/s ({per_txn:.2f} ms broker CPU per transaction)"
    print(f"  {broker.name:9} {name:34}: {cell}", flush=True)
    return [(broker.name, name, cell)]
