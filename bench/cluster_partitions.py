"""A replicated cluster holding many partitions: what a change and a write cost it when most partitions are idle.

ZooKeeper and three kbroker brokers (the cluster tests' settings, data on tmpfs), ``TOPICS`` topics of 100
partitions at replication factor 3 created 10 at a time; then a follower killed with kill -9 (leaders moved,
its ISRs left) and started again, timed until every ISR is whole again; then acks=all writes of 100 B to one
partition of its own, one at a time (librdkafka, ``linger.ms`` 0, one in flight), their rate and the three
brokers' CPU per write, while every other partition stays idle. The same rows with no other topic, beside.
"""

from __future__ import annotations

import tempfile
import time

from bench.loadgen import cpu_seconds
from tests.cluster import Cluster, controller_of, wait_until

SIZES = (0, 20)   # topics of 100 partitions
WRITES = 1500
POLL_S = 0.5   # (a Metadata of every partition at each look: looking more often loads the brokers measured)


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _whole(bootstrap: str, partitions: int) -> bool:
    topics = _admin(bootstrap).list_topics(timeout=30).topics
    return sum(1 for name, t in topics.items() if not name.startswith("__")
               for p in t.partitions.values() if p.leader >= 0 and len(p.isrs) == 3) == partitions


def measure_one(root: str, topics: int) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    cluster = Cluster(root).start()
    try:
        admin = _admin(cluster.bootstrap)
        for first in range(0, topics, 10):
            batch = [NewTopic(f"idle-{i}", 100, 3) for i in range(first, min(first + 10, topics))]
            for future in admin.create_topics(batch, operation_timeout=60, request_timeout=120).values():
                future.result()
        for future in admin.create_topics([NewTopic("hot", 1, 3)], operation_timeout=60).values():
            future.result()
        partitions = topics * 100 + 1
        wait_until(lambda: _whole(cluster.bootstrap, partitions), 120, POLL_S, "every replica in sync")
        controller = controller_of(cluster)
        victim = next(b for i, b in cluster.brokers.items() if i != controller)
        victim.kill()
        wait_until(lambda: not _whole(cluster.bootstrap, partitions), 120, POLL_S, "the killed follower out of an ISR")
        victim.start(timeout=300)
        began = time.monotonic()
        wait_until(lambda: _whole(cluster.bootstrap, partitions), 600, POLL_S, "the follower back in every ISR")
        rejoin = time.monotonic() - began
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0,
                             "max.in.flight": 1})
        for _ in range(200):   # (warm-up: connections, metadata, the followers' sessions)
            producer.produce("hot", b"x" * 100)
            producer.flush()
        pids = [b.proc.pid for b in cluster.brokers.values()]
        cpu, began = sum(map(cpu_seconds, pids)), time.monotonic()
        for _ in range(WRITES):
            producer.produce("hot", b"x" * 100)
            producer.flush()
        took = time.monotonic() - began
        return {"partitions": partitions, "rejoin": rejoin, "rate": WRITES / took,
                "cpu_us": (sum(map(cpu_seconds, pids)) - cpu) / WRITES * 1e6}
    finally:
        cluster.stop()


def measure() -> list[dict]:
    out = []
    for topics in SIZES:
        with tempfile.TemporaryDirectory(prefix="kbroker-bench-cluster-", dir="/dev/shm") as root:
            r = measure_one(root, topics)
        print(f"  {r['partitions']:,} RF=3 partitions: follower rejoined in {r['rejoin']:.1f} s; acks=all writes "
              f"{r['rate']:.0f}/s, {r['cpu_us']:,.0f} µs of broker CPU each", flush=True)
        out.append(r)
    return out


def table(rows: list[dict]) -> str:
    lines = ["| RF=3 partitions | a follower back from kill -9 in every ISR after | acks=all writes to one | "
             "broker CPU per write |", "|---|---|---|---|"]
    lines += [f"| {r['partitions']:,} | {r['rejoin']:.1f} s | {r['rate']:.0f}/s | {r['cpu_us']:,.0f} µs |"
              for r in rows]
    return "\n".join(lines)
