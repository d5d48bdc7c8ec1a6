"""One consumer-group member in its own process, so a test can SIGKILL it like a crashed consumer.

Usage: ``python -m tests.integration.group_worker CLIENT BOOTSTRAP TOPIC GROUP [options]``.

It consumes with manual commits (process a batch, then commit it: at-least-
once) and reports on stdout, one JSON object per line, with a
``time.monotonic()`` stamp shared by every process on the machine:
``{"ev": "rec", "p", "o", "i"}`` for each record, ``{"ev": "commit", "offsets"}``
after a successful commit, ``{"ev": "assigned"|"revoked", "partitions"}`` on
rebalances. SIGTERM closes it gracefully (the client leaves the group).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time

STOP = False


def emit(event: str, **fields) -> None:
    sys.stdout.write(json.dumps({"t": time.monotonic(), "ev": event, **fields}) + "\n")
    sys.stdout.flush()


def _on_term(*_):
    global STOP
    STOP = True


def _index(headers) -> int:
    return int(dict(headers or [])["i"])


def run_kafka_python(args) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.structs import OffsetAndMetadata

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                 "sticky": StickyPartitionAssignor, "cooperative-sticky": CooperativeStickyAssignor}

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            emit("revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned):
            emit("assigned", partitions=sorted(tp.partition for tp in assigned))

    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, group_id=args.group,
                             group_instance_id=args.instance_id, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=args.session_ms,
                             heartbeat_interval_ms=args.heartbeat_ms, max_poll_records=args.batch,
                             partition_assignment_strategy=[assignors[args.assignor]])
    consumer.subscribe([args.topic], listener=Listener())
    while not STOP:
        # A long poll: kafka-python 3.0.12 loses a join that completes after poll()'s timeout when the
        # rejoin was triggered by a metadata change (the leader's first assignment saw no partitions):
        # need_rejoin() is False by then, the join task's result is never consumed, and heartbeats stay
        # disabled until the session expires. Seen in its debug log; with 1 s polls the join finishes
        # inside the poll that started it.
        batches = consumer.poll(timeout_ms=1000)
        offsets = {}
        for tp, messages in batches.items():
            for m in messages:
                emit("rec", p=m.partition, o=m.offset, i=_index(m.headers))
            offsets[tp] = OffsetAndMetadata(messages[-1].offset + 1, "", -1)
        if offsets:
            time.sleep(args.process_ms / 1000)
            try:
                consumer.commit(offsets)
                emit("commit", offsets={tp.partition: om.offset for tp, om in offsets.items()})
            except Exception as exc:   # CommitFailedError during a rebalance: these get redelivered
                emit("commit_failed", error=type(exc).__name__)
    consumer.close()


def run_confluent(args) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    config = {"bootstrap.servers": args.bootstrap, "group.id": args.group, "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000}
    if args.protocol == "consumer":
        # KIP-848: the broker assigns and sets the session and heartbeat timing; the assignor is its own.
        config.update({"group.protocol": "consumer", "group.remote.assignor": args.assignor})
    else:
        config.update({"session.timeout.ms": args.session_ms, "heartbeat.interval.ms": args.heartbeat_ms,
                       "partition.assignment.strategy": args.assignor})
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    if os.environ.get("GROUP_WORKER_DEBUG"):   # librdkafka's own debug log on stderr
        config["debug"] = "cgrp,fetch,consumer"
    consumer = Consumer(config)

    def on_assign(c, partitions):
        emit("assigned", partitions=sorted(tp.partition for tp in partitions))

    def on_revoke(c, partitions):
        emit("revoked", partitions=sorted(tp.partition for tp in partitions))

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    while not STOP:
        messages = consumer.consume(num_messages=args.batch, timeout=0.1)
        last = {}
        for m in messages:
            if m.error():
                continue
            emit("rec", p=m.partition(), o=m.offset(), i=_index(m.headers()))
            last[m.partition()] = m.offset() + 1
        if last:
            time.sleep(args.process_ms / 1000)
            try:
                consumer.commit(offsets=[TopicPartition(args.topic, p, o) for p, o in last.items()],
                                asynchronous=False)
                emit("commit", offsets=last)
            except KafkaException as exc:
                emit("commit_failed", error=str(exc))
    consumer.close()


async def run_aiokafka(args) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                 "sticky": StickyPartitionAssignor}

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            emit("revoked", partitions=sorted(tp.partition for tp in revoked))

        async def on_partitions_assigned(self, assigned):
            emit("assigned", partitions=sorted(tp.partition for tp in assigned))

    consumer = AIOKafkaConsumer(bootstrap_servers=args.bootstrap, group_id=args.group,
                                group_instance_id=args.instance_id, enable_auto_commit=False,
                                auto_offset_reset="earliest", session_timeout_ms=args.session_ms,
                                heartbeat_interval_ms=args.heartbeat_ms, max_poll_records=args.batch,
                                partition_assignment_strategy=(assignors[args.assignor],))
    consumer.subscribe([args.topic], listener=Listener())
    await consumer.start()
    try:
        while not STOP:
            batches = await consumer.getmany(timeout_ms=100)
            offsets = {}
            for tp, messages in batches.items():
                for m in messages:
                    emit("rec", p=m.partition, o=m.offset, i=_index(m.headers))
                offsets[tp] = messages[-1].offset + 1
            if offsets:
                await asyncio.sleep(args.process_ms / 1000)
                try:
                    await consumer.commit(offsets)
                    emit("commit", offsets={tp.partition: o for tp, o in offsets.items()})
                except Exception as exc:
                    emit("commit_failed", error=type(exc).__name__)
    finally:
        await consumer.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("client", choices=["aiokafka", "kafka-python", "confluent"])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("group")
    parser.add_argument("--assignor", default="range")
    parser.add_argument("--instance-id", default=None)
    parser.add_argument("--protocol", default="classic", choices=["classic", "consumer"])   # confluent only
    parser.add_argument("--session-ms", type=int, default=3000)
    parser.add_argument("--heartbeat-ms", type=int, default=300)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--process-ms", type=int, default=50)
    args = parser.parse_args()
    if os.environ.get("GROUP_WORKER_DEBUG"):   # the client's own debug log on stderr, for diagnosing a hang
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                            format="%(relativeCreated)d %(name)s %(message)s")
    signal.signal(signal.SIGTERM, _on_term)
    emit("started")
    if args.client == "aiokafka":
        asyncio.run(run_aiokafka(args))
    elif args.client == "kafka-python":
        run_kafka_python(args)
    else:
        run_confluent(args)
    emit("stopped")


if __name__ == "__main__":
    main()
