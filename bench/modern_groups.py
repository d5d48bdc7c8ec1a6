"""Kafka 4 group scenarios for `make bench` (issue 28), with librdkafka clients against any broker:

* settle after a join: a group of three consumers shares a 20-partition topic; a fourth joins; the time until
  the four own every partition once, with the classic protocol (range assignor, eager) and with KIP-848's
  (``group.protocol=consumer``, the broker's uniform assignor, incremental);
* share-group consumption: 1 KiB records on a 4-partition topic read by 1 and by 4 share consumers (KIP-932)
  that accept each record explicitly and commit the acknowledgements after each poll; records per second
  from the first poll until every record is accepted.

Every scenario reports the median of its runs; each run uses a fresh group.
"""

from __future__ import annotations

import threading
import time
import uuid

from bench.group_members import Member, wait

SHARE_RECORDS = 100000
SHARE_PARTITIONS = 4
JOINED = 3


def _settled(members, partitions: int) -> bool:
    owned = [m.assigned for m in members]
    return all(owned) and set().union(*owned) == set(range(partitions)) and \
        sum(len(o) for o in owned) == partitions


def settle_after_join(protocol: str):
    def scenario(bootstrap: str, topic: str, partitions: int = 20) -> float:
        group = f"bench-join-{protocol}-{uuid.uuid4().hex[:8]}"
        members = [Member(bootstrap, group, topic, protocol, poll_s=0.02) for _ in range(JOINED)]
        try:
            if not wait(lambda: _settled(members, partitions), 60):
                raise TimeoutError(f"{JOINED} members never shared the partitions")
            time.sleep(1)   # let the group settle
            started = time.monotonic()
            members.append(Member(bootstrap, group, topic, protocol, poll_s=0.02))
            if not wait(lambda: _settled(members, partitions), 60):
                raise TimeoutError("the group did not settle within 60 s of a member joining")
            return time.monotonic() - started
        finally:
            for m in members:
                m.close()
    return scenario


def share_consumption(consumers: int):
    def scenario(bootstrap: str, _topic: str) -> float:
        from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
        from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic,
                                           ResourceType)

        topic, group = f"bench-share-{uuid.uuid4().hex[:8]}", f"bench-share-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, SHARE_PARTITIONS, 1)])[topic].result(30)
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        value = b"x" * 1024
        for _ in range(SHARE_RECORDS):
            producer.produce(topic, value)
            producer.poll(0)
        producer.flush(60)
        accepted, lock, started = [0], threading.Lock(), [None]
        done = threading.Event()

        def consume() -> None:
            c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                               "share.acknowledgement.mode": "explicit"})
            c.subscribe([topic])
            try:
                while not done.is_set():
                    messages = [m for m in c.poll(0.2) if m.error() is None]
                    if not messages:
                        continue
                    with lock:
                        if started[0] is None:
                            started[0] = time.monotonic()
                    for m in messages:
                        c.acknowledge(m, AcknowledgeType.ACCEPT)
                    c.commit_sync(30)
                    with lock:
                        accepted[0] += len(messages)
                        if accepted[0] >= SHARE_RECORDS:
                            done.set()
            finally:
                c.close()

        threads = [threading.Thread(target=consume, daemon=True) for _ in range(consumers)]
        for t in threads:
            t.start()
        # A broker that hands out nothing within 30 s does not serve share groups: no need to wait longer.
        waited = time.monotonic()
        finished = done.wait(30) or (accepted[0] > 0 and done.wait(90))
        ended = time.monotonic()
        done.set()
        for t in threads:
            t.join(30)
        if not finished:
            raise TimeoutError(f"{accepted[0]} of {SHARE_RECORDS} accepted within {time.monotonic() - waited:.0f} s")
        return SHARE_RECORDS / (ended - started[0])
    return scenario
