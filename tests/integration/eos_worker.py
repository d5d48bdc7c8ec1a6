"""A consume-transform-produce loop with exactly-once semantics (librdkafka), to be killed at any moment.

Usage: ``python -m tests.integration.eos_worker BOOTSTRAP INPUT OUTPUT GROUP TXN_ID``.
Each poll's records are transformed (value upper-cased, the ``i`` header
kept) and written to OUTPUT inside a transaction together with the input
offsets (``send_offsets_to_transaction``), then committed. It prints
``committed N`` after each commit.

Errors are handled as a Kafka application must: a retriable failure of a
commit is retried, an abortable one aborts the transaction and rewinds the
consumer to its committed offsets, anything fatal ends the process (the
test restarts it, and the restart fences the old instance).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition


def main() -> None:
    faulthandler.register(signal.SIGUSR1)   # a test that finds it stuck asks for its stacks
    debug = {"debug": os.environ["RDKAFKA_DEBUG"]} if os.environ.get("RDKAFKA_DEBUG") else {}
    bootstrap, source, sink, group, txn_id = sys.argv[1:6]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                         # A restarted static member takes its old place at once, without waiting out
                         # the killed process's session.
                         "group.instance.id": txn_id, "reconnect.backoff.max.ms": 1000, **debug})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 2,
                         # Long enough to outlast a coordinator failover (a ZooKeeper session, then the
                         # client's reconnect backoff, capped here at 1 s): a transaction the coordinator
                         # times out meanwhile fences this producer, which a restart then recovers from.
                         "transaction.timeout.ms": 30000, "reconnect.backoff.max.ms": 1000, **debug})
    producer.init_transactions(30)
    consumer.subscribe([source])
    while True:
        messages = [m for m in consumer.consume(50, timeout=0.2) if not m.error()]
        if not messages:
            continue
        try:
            transform(producer, consumer, messages, source, sink)
        except KafkaException as exc:
            if not exc.args[0].txn_requires_abort():
                raise
            producer.abort_transaction(30)
            rewind(consumer)
            continue
        print(f"committed {len(messages)}", flush=True)


def transform(producer, consumer, messages, source: str, sink: str) -> None:
    producer.begin_transaction()
    for m in messages:
        producer.produce(sink, m.value().upper(), key=m.key(), headers=m.headers(), partition=m.partition())
    positions = {}
    for m in messages:
        positions[m.partition()] = m.offset() + 1
    producer.send_offsets_to_transaction([TopicPartition(source, p, o) for p, o in positions.items()],
                                         consumer.consumer_group_metadata(), 30)
    while True:
        try:
            producer.commit_transaction(30)
            return
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise


def rewind(consumer) -> None:
    """After an abort: read again from the group's committed offsets (what the aborted batch did not move)."""
    for tp in consumer.committed(consumer.assignment(), 30):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))


if __name__ == "__main__":
    main()
