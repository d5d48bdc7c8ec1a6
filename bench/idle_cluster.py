"""What replicated partitions cost a cluster that does nothing, and what followers' fetch sessions save (issue
30): ZooKeeper and three kbroker brokers on Kafka's defaults (no test shortcuts), CPU of the three broker
processes (utime + stime from /proc) over ``SECONDS``, first with no topic, then with ``TOPICS`` topics of 3
partitions at replication factor 3; once with followers fetching in incremental sessions (KIP-227, the
default) and once with a full fetch every round (``kbroker.replica.fetch.sessions=false``), in one run; the
floor under both (``bench/idle_floor.py``: the same twelve parked round trips a second among three processes doing
no work); what the machine charges a thread that only sleeps, per wake (the hour's price of waking, which every
idle figure carries: microseconds on a quiet hour, milliseconds on others); and the same for Apache Kafka (three
KRaft nodes, each broker and controller, from Maven Central's jars), beside."""

from __future__ import annotations

import tempfile
import time

from bench import idle_floor
from bench.loadgen import cpu_seconds
from tests.cluster import Cluster, create

TOPICS = 43   # 129 partitions
SECONDS = 60   # (utime and stime count 10 ms ticks: a shorter window cannot tell 0.1 % apart)
SETTLE_SECONDS = 8
# Kafka's defaults where the test cluster shortens them for speed (the bench's broker keeps none of them).
DEFAULTS = {"replica.fetch.wait.max.ms": "500", "replica.fetch.backoff.ms": "1000", "replica.lag.time.max.ms": "30000",
            "log.cleaner.backoff.ms": "15000", "log.retention.check.interval.ms": "300000",
            "group.initial.rebalance.delay.ms": "3000", "zookeeper.session.timeout.ms": "18000"}


def _share_of_a_core(pids: list[int], seconds: float) -> float:
    before, began = sum(map(cpu_seconds, pids)), time.monotonic()
    time.sleep(seconds)   # (measuring a cluster left alone: the wait is the measurement)
    return (sum(map(cpu_seconds, pids)) - before) / (time.monotonic() - began)


def _idle_then_with_topics(cluster, pids: list[int]) -> tuple[float, float]:
    """(share of a core with no topic, with TOPICS * 3 replicated partitions), each after a settling wait."""
    time.sleep(SETTLE_SECONDS)
    empty = _share_of_a_core(pids, SECONDS)
    for i in range(TOPICS):
        create(cluster.bootstrap, f"idle-{i}", 3, 3)
    time.sleep(SETTLE_SECONDS)
    return empty, _share_of_a_core(pids, SECONDS)


def measure(sessions: bool) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="kbroker-bench-idle-") as root:
        cluster = Cluster(root, overrides={**DEFAULTS, "kbroker.replica.fetch.sessions": str(sessions).lower()})
        cluster.start()
        try:
            return _idle_then_with_topics(cluster, [b.proc.pid for b in cluster.brokers.values()])
        finally:
            cluster.stop()


def measure_kafka() -> tuple[float, float]:
    """The same for Apache Kafka's three KRaft nodes (their JVMs' CPU)."""
    from tests.reference.apache_kafka import KafkaCluster

    with tempfile.TemporaryDirectory(prefix="kafka-bench-idle-") as root:
        cluster = KafkaCluster(root, size=3).start()
        try:
            return _idle_then_with_topics(cluster, [n.proc.pid for n in cluster.nodes])
        finally:
            cluster.stop()


def rows() -> list[tuple]:
    out = []
    for sessions in (False, True):
        empty, busy = measure(sessions)
        how = "followers in fetch sessions" if sessions else "followers' full fetches"
        print(f"  idle cluster, {how}: {empty:.2%} of a core without topics, {busy:.2%} with {TOPICS * 3} "
              "RF=3 partitions", flush=True)
        out.append(("kbroker cluster", f"idle CPU, {TOPICS * 3} RF=3 partitions, {how}",
                    f"{busy:.2%} of a core ({empty:.2%} without topics)"))
    floor = idle_floor.measure(SECONDS)
    rounds = f"{idle_floor.ROUND_TRIPS_PER_S} round trips/s parked {idle_floor.WAIT_MS} ms"
    print(f"  idle floor (three uvloop processes, {rounds}, no work): {floor:.2%} of a core", flush=True)
    out.append(("kbroker cluster", f"(floor) {rounds} among three uvloop processes, no work", f"{floor:.2%} of a core"))
    wake = idle_floor.wake_cost()
    print(f"  CPU charged per wake of a thread sleeping {idle_floor.WAIT_MS} ms: {wake:.0f} µs", flush=True)
    out.append(("kbroker cluster", f"(floor) CPU charged per wake of a thread that only sleeps {idle_floor.WAIT_MS} ms",
                f"{wake:.0f} µs"))
    empty, busy = measure_kafka()
    print(f"  idle cluster, Apache Kafka: {empty:.2%} of a core without topics, {busy:.2%} with {TOPICS * 3} RF=3 "
          "partitions", flush=True)
    out.append(("kafka cluster", f"idle CPU, {TOPICS * 3} RF=3 partitions, three KRaft nodes",
                f"{busy:.2%} of a core ({empty:.2%} without topics)"))
    return out


if __name__ == "__main__":
    rows()
