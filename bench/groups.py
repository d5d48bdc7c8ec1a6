"""Consumer-group scenarios for `make bench`, with librdkafka consumers (confluent-kafka) against any broker.

* first assignment: a new consumer subscribes to a new group; time until its
  assignment callback runs (FindCoordinator, JoinGroup, SyncGroup, and
  whatever initial rebalance delay the broker applies);
* rebalance after a leave: ten consumers share a 20-partition topic; one
  closes (LeaveGroup); time until each of the nine has its new assignment and
  together they own every partition again;
* commit throughput: one member commits one partition's offset
  synchronously, back to back, for a fixed count; commits per second.

Every scenario reports the median of its runs; each run uses a fresh group.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid

from bench.group_members import Member, wait
from bench.loadgen import cpu_seconds
from bench.modern_groups import settle_after_join, share_consumption

PARTITIONS = 20
MEMBERS = 10
COMMITS = 2000
RUNS = 3


def first_assignment(bootstrap: str, topic: str) -> float:
    started = time.monotonic()
    member = Member(bootstrap, f"bench-first-{uuid.uuid4().hex[:8]}", topic)
    try:
        if not wait(lambda: member.assign_times, 60):
            raise TimeoutError("no assignment within 60 s")
        return member.assign_times[0] - started
    finally:
        member.close()


def rebalance_after_leave(bootstrap: str, topic: str) -> float:
    group = f"bench-rebalance-{uuid.uuid4().hex[:8]}"
    members = [Member(bootstrap, group, topic) for _ in range(MEMBERS)]
    try:
        def complete(ms) -> bool:
            owned = [m.assigned for m in ms]
            return all(owned) and set().union(*owned) == set(range(PARTITIONS)) and \
                sum(len(o) for o in owned) == PARTITIONS

        if not wait(lambda: complete(members), 120):
            raise TimeoutError("ten members never shared the partitions")
        time.sleep(1)   # let the group settle in Stable
        leaving, staying = members[0], members[1:]
        marks = [len(m.assign_times) for m in staying]
        started = time.monotonic()
        leaving.close()
        if not wait(lambda: all(len(m.assign_times) > k for m, k in zip(staying, marks)) and complete(staying),
                     60):
            raise TimeoutError("no new assignment within 60 s of a member leaving")
        return max(m.assign_times[-1] for m in staying) - started
    finally:
        for m in members[1:]:
            m.close()


def commit_throughput(bootstrap: str, topic: str) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-commit-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)   # finds the coordinator
        started = time.monotonic()
        for offset in range(1, COMMITS + 1):
            consumer.commit(offsets=[TopicPartition(topic, offset % PARTITIONS, offset)], asynchronous=False)
        return COMMITS / (time.monotonic() - started)
    finally:
        consumer.close()


COMMITTERS = 8


def concurrent_commit_throughput(bootstrap: str, topic: str) -> float:
    """``COMMITTERS`` consumers of one group (standalone commits, as consumers using assign() make), each on its
    own thread committing synchronously back to back: commits per second over all of them. Their commits all
    go to one ``__consumer_offsets`` partition, where a broker can batch what arrives together."""
    from confluent_kafka import Consumer, TopicPartition

    group = f"bench-commit-{uuid.uuid4().hex[:8]}"
    consumers = [Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
                 for _ in range(COMMITTERS)]
    per_consumer = COMMITS // COMMITTERS
    try:
        for c in consumers:
            c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)   # finds the coordinator

        def commit(c, partition: int) -> None:
            for offset in range(1, per_consumer + 1):
                c.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)

        threads = [threading.Thread(target=commit, args=(c, i % PARTITIONS)) for i, c in enumerate(consumers)]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return per_consumer * COMMITTERS / (time.monotonic() - started)
    finally:
        for c in consumers:
            c.close()


# (name, scenario, format, scale, requests per run: set for the commit rows, whose cells add the broker's CPU
# time per commit, the figure that says how much of the round trip is the broker's own work)
SCENARIOS = [
    ("group: first assignment", first_assignment, "{:.0f} ms", 1000, 0),
    (f"group: rebalance after 1 of {MEMBERS} leaves", rebalance_after_leave, "{:.0f} ms", 1000, 0),
    ("group: sync offset commits", commit_throughput, "{:,.0f} commits/s", 1, COMMITS),
    (f"group: sync offset commits, {COMMITTERS} committers", concurrent_commit_throughput, "{:,.0f} commits/s", 1,
     COMMITS // COMMITTERS * COMMITTERS),
    ("group: 4th member joins 3, settled (classic, range)", settle_after_join("classic"), "{:.0f} ms", 1000, 0),
    ("group: 4th member joins 3, settled (KIP-848, uniform)", settle_after_join("consumer"), "{:.0f} ms", 1000, 0),
    ("share group: 1 KiB records, 1 consumer, explicit acks", share_consumption(1), "{:,.0f} rec/s", 1, 0),
    ("share group: 1 KiB records, 4 consumers, explicit acks", share_consumption(4), "{:,.0f} rec/s", 1, 0),
]


def measure(broker, create_topic) -> list[tuple]:
    """(broker, scenario, cell) rows; a scenario a broker cannot do says why in its cell."""
    topic = f"bench-groups-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    rows = []
    for name, scenario, fmt, scale, requests in SCENARIOS:
        cpu = cpu_seconds(broker.pid)
        try:
            values = [scenario(broker.bootstrap, topic) for _ in range(RUNS)]
        except Exception as exc:   # one broker's failure is a finding, not the end of the run
            cell = f"failed: {type(exc).__name__}: {str(exc)[:80]}"
        else:
            cell = fmt.format(statistics.median(values) * scale)
            if requests:   # (the runs' few set-up requests and consumer closes are counted in, a few %)
                cell += f" ({(cpu_seconds(broker.pid) - cpu) / (requests * RUNS) * 1e6:.0f} µs broker CPU each)"
        print(f"  {broker.name:9} {name:34}: {cell}", flush=True)
        rows.append((broker.name, name, cell))
    return rows
