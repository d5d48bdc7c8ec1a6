"""KIP-848 consumer groups (``group.protocol=consumer``) with librdkafka consumers in their own processes:
the broker assigns, members join, leave, crash, restart and scale, and no committed record comes twice."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from tests.integration.groupworkers import Worker, check_at_least_once, commit_start, consumed, fill, wait_until
from tests.integration.workload import make_topic

OPTS = dict(protocol="consumer", assignor="uniform", batch=20)


def stop_all(workers: list[Worker]) -> None:
    for w in workers:
        w.terminate()


def test_members_join_leave_and_crash_without_losing_records(broker, topic_name):
    first, later = 3000, 1500
    count = first + later
    make_topic(broker.bootstrap, topic_name, partitions=6)
    fill(broker.bootstrap, topic_name, first)
    group = f"group-{topic_name}"
    commit_start(broker.bootstrap, topic_name, group, 6)
    workers = [Worker("confluent", broker.bootstrap, topic_name, group, name=f"w{n}", process_ms=40, **OPTS)
               for n in range(3)]
    try:
        wait_until(lambda: len(consumed(workers)) >= first * 0.2, 60, "20% consumed", workers)
        workers.append(Worker("confluent", broker.bootstrap, topic_name, group, name="w3", process_ms=40, **OPTS))
        wait_until(lambda: workers[3].owned(), 60, "the fourth member to be assigned", workers)
        fill(broker.bootstrap, topic_name, later, first=first)
        wait_until(lambda: workers[3].of("rec"), 60, "the fourth member to get records", workers)
        workers[0].terminate()   # leaves the group (member epoch -1)
        wait_until(lambda: len(consumed(workers)) >= count * 0.6, 60, "60% consumed", workers)
        orphaned = workers[1].owned()
        workers[1].kill()        # crashes: its session (6 s here) has to expire
        killed_at = max(e["t"] for e in workers[1].events)
        wait_until(lambda: len(consumed(workers)) == count, 60, "every record consumed", workers)
        wait_until(lambda: orphaned <= {p for w in workers[2:] for e in w.of("assigned") if e["t"] > killed_at
                                        for p in e["partitions"]}, 30, "the orphaned partitions reassigned", workers)
    finally:
        stop_all(workers)
    check_at_least_once(workers, count)


def test_a_group_scales_from_one_member_to_four_and_back(broker, topic_name):
    """Each partition is revoked from its member before another is given it, so with commits after each batch
    no record committed by one member is read again by the next."""
    make_topic(broker.bootstrap, topic_name, partitions=8)
    fill(broker.bootstrap, topic_name, 4000)
    group = f"group-{topic_name}"
    commit_start(broker.bootstrap, topic_name, group, 8)
    workers = [Worker("confluent", broker.bootstrap, topic_name, group, name="w0", process_ms=20, **OPTS)]
    try:
        wait_until(lambda: len(workers[0].owned()) == 8, 60, "the first member owning everything", workers)
        workers += [Worker("confluent", broker.bootstrap, topic_name, group, name=f"w{n}", process_ms=20, **OPTS)
                    for n in range(1, 4)]
        wait_until(lambda: [len(w.owned()) for w in workers] == [2, 2, 2, 2], 60, "four members of two each",
                   workers)
        owned = [w.owned() for w in workers]
        assert set().union(*owned) == set(range(8))
        for w in workers[1:]:
            w.terminate()
        wait_until(lambda: len(workers[0].owned()) == 8, 60, "the first member owning everything again", workers)
        wait_until(lambda: len(consumed(workers)) == 4000, 60, "every record consumed", workers)
    finally:
        stop_all(workers)
    assert check_at_least_once(workers, 4000) == 0


def test_a_static_member_restarts_into_its_partitions_without_a_rebalance(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, partitions=6)
    fill(broker.bootstrap, topic_name, 60)
    group = f"group-{topic_name}"
    opts = dict(OPTS, process_ms=0)
    a = Worker("confluent", broker.bootstrap, topic_name, group, name="a", instance_id="instance-a", **opts)
    b = Worker("confluent", broker.bootstrap, topic_name, group, name="b", instance_id="instance-b", **opts)
    restarted = None
    try:
        wait_until(lambda: len(consumed([a, b])) == 60 and a.owned() and b.owned()
                   and a.owned() | b.owned() == set(range(6)), 60, "a stable two-member group", [a, b])
        a_partitions, b_events = a.owned(), len([e for e in b.events if e["ev"] in ("assigned", "revoked")])
        a.terminate()   # a static member's close is a temporary leave (epoch -2): it keeps its place
        restarted = Worker("confluent", broker.bootstrap, topic_name, group, name="a2", instance_id="instance-a",
                           **opts)
        wait_until(lambda: restarted.owned(), 30, "the restarted member's assignment", [restarted, b])
        assert restarted.owned() == a_partitions
        fill(broker.bootstrap, topic_name, 60, first=60)
        wait_until(lambda: consumed([a, b, restarted]) >= set(range(120)), 30, "new records consumed",
                   [restarted, b])
        assert len([e for e in b.events if e["ev"] in ("assigned", "revoked")]) == b_events, \
            "the other member saw a rebalance"
    finally:
        stop_all([w for w in (a, b, restarted) if w is not None])


def _assigned(consumer, partitions: int, timeout: float = 30) -> float:
    """Poll until ``consumer`` is assigned ``partitions`` partitions; the deadline it had (for a test's later
    waits)."""
    deadline = time.monotonic() + timeout
    while len(consumer.assignment()) < partitions:
        assert time.monotonic() < deadline, consumer.assignment()
        consumer.poll(0.1)
    return deadline


def test_a_regex_subscription_picks_up_a_topic_made_later(broker, topic_name):
    prefix = f"rx-{uuid.uuid4().hex[:8]}"
    make_topic(broker.bootstrap, f"{prefix}-a", partitions=2)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"group-{prefix}",
                         "group.protocol": "consumer", "auto.offset.reset": "earliest",
                         "topic.metadata.refresh.interval.ms": 500})
    consumer.subscribe([f"^{prefix}-.*"])
    try:
        deadline = _assigned(consumer, 2)
        make_topic(broker.bootstrap, f"{prefix}-b", partitions=1)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce(f"{prefix}-b", b"late")
        assert producer.flush(10) == 0
        got = []
        while not got:
            assert time.monotonic() < deadline + 30, consumer.assignment()
            m = consumer.poll(0.2)
            if m is not None and m.error() is None:
                got.append((m.topic(), m.value()))
        assert got == [(f"{prefix}-b", b"late")]
        assert {tp.topic for tp in consumer.assignment()} == {f"{prefix}-a", f"{prefix}-b"}
    finally:
        consumer.close()


def test_a_regex_subscription_is_read_in_re2s_syntax(broker, topic_name):
    """The broker resolves a KIP-848 regex as Kafka does, in RE2's syntax: a POSIX class, which Python's re
    reads as a set of characters, matches the topic."""
    suffix = uuid.uuid4().hex[:8]
    make_topic(broker.bootstrap, f"posix-{suffix}", partitions=2)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"group-{suffix}",
                         "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    consumer.subscribe([f"^[[:alpha:]]+-{suffix}"])
    try:
        _assigned(consumer, 2)
        assert {tp.topic for tp in consumer.assignment()} == {f"posix-{suffix}"}
    finally:
        consumer.close()


def test_admin_clients_list_and_describe_a_consumer_group(broker, topic_name):
    from confluent_kafka import ConsumerGroupType
    make_topic(broker.bootstrap, topic_name, partitions=3)
    group = f"group-{topic_name}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer"})
    consumer.subscribe([topic_name])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 3:
            assert time.monotonic() < deadline
            consumer.poll(0.1)
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(10)
        assert [(g.group_id, g.type) for g in listed.valid if g.group_id == group] == [
            (group, ConsumerGroupType.CONSUMER)]
        classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(10)
        assert group not in {g.group_id for g in classic.valid}
        described = admin.describe_consumer_groups([group])[group].result(10)
        assert described.type == ConsumerGroupType.CONSUMER
        assert [sorted(tp.partition for tp in m.assignment.topic_partitions) for m in described.members] == [
            [0, 1, 2]]
    finally:
        consumer.close()


def test_the_group_survives_kill_9_of_its_broker(fresh_broker, topic_name):
    """Members, epochs and assignments are replayed from ``__consumer_offsets`` at restart: the members carry on
    (fenced members rejoin), every record is consumed and none committed comes again."""
    fresh_broker.start()
    make_topic(fresh_broker.bootstrap, topic_name, partitions=4)
    fill(fresh_broker.bootstrap, topic_name, 2000)
    group = f"group-{topic_name}"
    workers = [Worker("confluent", fresh_broker.bootstrap, topic_name, group, name=f"w{n}", process_ms=20, **OPTS)
               for n in range(2)]
    try:
        wait_until(lambda: len(consumed(workers)) >= 600, 60, "600 consumed", workers)
        fresh_broker.kill()
        fresh_broker.start()
        wait_until(lambda: len(consumed(workers)) == 2000, 90, "every record consumed", workers)
        admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(10)
        assert sorted(p for m in described.members for p in (tp.partition for tp in m.assignment.topic_partitions)) \
            == [0, 1, 2, 3]
    finally:
        stop_all(workers)
    check_at_least_once(workers, 2000)
