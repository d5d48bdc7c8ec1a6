"""The replicated rows of `make bench`: one three-broker kbroker cluster (ZooKeeper and three kbroker processes on
this machine) and one of three Apache Kafka KRaft nodes, one after the other in one run.

- Throughput: rdkafka_performance produces 1 KiB records to a 6-partition topic with replication factor 1
  and acks=1, then to one with replication factor 3, acks=all and min.insync.replicas=2. Leaders are spread
  over the three brokers in both, so the difference is what replication costs: every batch written twice more
  by the followers' fetchers, and each acks=all produce parked until the ISR has it.
- Latency: a librdkafka producer sends at a fixed rate (``RATE`` records/s, ``linger.ms=0``) and times each
  record from ``produce()`` to its delivery report; p50 and p99 of those.

The CPU cell sums the three broker processes (share of one core): on a 2-core machine the brokers and the
load generator compete for the same cores, and replication triples the broker work.
"""

from __future__ import annotations

import os
import tempfile
import time

from bench import loadgen
from tests.cluster import Cluster, wait_until

PARTITIONS = 6
SIZE = 1024
RECORDS = 1_200_000   # long enough (seconds, not a fraction of one) for the RF=1 run to be stable
RATE = 2000            # records/s for the latency rows
LATENCY_SECONDS = 10
REPEATS = 3

# Kafka's defaults where the test cluster shortens them for speed.
BENCH_OVERRIDES = {"replica.lag.time.max.ms": "30000", "replica.fetch.wait.max.ms": "500",
                   "log.retention.check.interval.ms": "600000", "zookeeper.session.timeout.ms": "18000"}


def create(bootstrap: str, name: str, rf: int, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, rf, config=configs)])[name].result(60)


def throughput(cluster, topic: str, acks: str, count: int) -> loadgen.Run:
    pids = cluster.pids()
    runs = sorted((loadgen.run(["-P", "-t", topic, "-s", str(SIZE), "-c", str(count), "-a", acks,
                                "-b", cluster.bootstrap, "-X", "linger.ms=5"], pids, timeout=180)
                   for _ in range(REPEATS)), key=lambda r: r.mb_per_s)
    return runs[len(runs) // 2]


def latency(bootstrap: str, topic: str, acks: str) -> tuple[float, float]:
    """(p50, p99) in ms of produce-to-delivery-report at RATE records/s.

    A second thread blocks in ``poll()`` and takes each delivery report as it arrives; the producing thread
    paces itself with sleeps. (Polling from the pacing loop with sub-millisecond timeouts, which librdkafka
    rounds to 0, is a busy loop that takes a core from the brokers on this machine.)
    """
    import threading

    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0})
    samples: list[float] = []
    payload = b"x" * SIZE
    total = RATE * LATENCY_SECONDS

    def poller():
        while len(samples) < total and not stop.is_set():
            producer.poll(0.1)

    stop = threading.Event()
    thread = threading.Thread(target=poller, daemon=True)
    thread.start()
    started = time.perf_counter()
    for i in range(total):
        delay = started + i / RATE - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        sent = time.perf_counter()
        producer.produce(topic, payload, on_delivery=lambda err, _msg, sent=sent: err is None and samples.append(
            time.perf_counter() - sent))
    producer.flush(30)
    stop.set()
    thread.join(5)
    samples.sort()
    return samples[len(samples) // 2] * 1000, samples[int(len(samples) * 0.99)] * 1000


class _KBrokerCluster(Cluster):
    def pids(self) -> list[int]:
        return [b.proc.pid for b in self.brokers.values()]


def clusters() -> dict:
    """name -> a function of a folder starting that cluster (ZooKeeper + 3 kbroker brokers; 3 KRaft nodes
    of Apache Kafka with the reference heap, each broker and controller)."""
    from tests.reference.apache_kafka import KafkaCluster

    return {"kbroker cluster": lambda root: _KBrokerCluster(root, overrides=BENCH_OVERRIDES).start(),
            "kafka cluster": lambda root: KafkaCluster(root).start()}


def measure(scale: float = 1.0, parent: str | None = None) -> list[tuple]:
    """``parent``: where the brokers' data goes (a tmpfs such as /dev/shm takes the disk out of the picture)."""
    rows = []
    for name, start in clusters().items():
        print(f"{name}:", flush=True)
        rows += _measure(name, start, scale, parent)
    return rows


def _measure(name: str, start, scale: float, parent: str | None) -> list[tuple]:
    rows = []
    count = int(RECORDS * scale)
    with tempfile.TemporaryDirectory(prefix="kbroker-bench-cluster-", dir=parent) as tmp:
        cluster = start(os.path.join(tmp, "cluster"))
        try:
            wait_until(lambda: cluster.bootstrap, 30, 0.2, "the cluster")
            cases = [("RF=1 acks=1", 1, "1", {}), ("RF=3 acks=all, min ISR 2", 3, "-1",
                                                   {"min.insync.replicas": "2"})]
            results = {}
            for label, rf, acks, configs in cases:
                topic = f"bench-rf{rf}"
                create(cluster.bootstrap, topic, rf, configs)
                os.sync()   # each measurement starts without the previous one's writeback still running
                run = throughput(cluster, topic, acks, count)
                os.sync()
                p50, p99 = latency(cluster.bootstrap, topic, "all" if acks == "-1" else acks)
                results[label] = (run, p50, p99, rf)
                print(f"  {name:15} produce {SIZE} B {label:26}: {run.mb_per_s:8.1f} MB/s {run.msgs_per_s:10.0f} "
                      f"rec/s  brokers {run.broker_cpu:4.0%}  p50 {p50:.1f} ms  p99 {p99:.1f} ms", flush=True)
            for label, (run, p50, p99, rf) in results.items():
                rows.append((name, f"produce {SIZE} B {label}",
                             f"{run.mb_per_s:.1f} MB/s, {run.msgs_per_s:,.0f} rec/s "
                             f"(gen {run.loadgen_cpu:.0%}, 3 brokers {run.broker_cpu:.0%})"))
                # What each replicated byte costs: bytes appended on all replicas per broker CPU-second.
                appended = run.mb_per_s * rf / run.broker_cpu if run.broker_cpu else 0.0
                rows.append((name, f"MB appended per broker CPU-second, {label}", f"{appended:.0f}"))
                rows.append((name, f"latency at {RATE}/s {label}", f"p50 {p50:.1f} ms, p99 {p99:.1f} ms"))
            (base, *_), (replicated, *_) = results.values()
            ratio = replicated.mb_per_s / base.mb_per_s
            rows.append((name, "replicated / unreplicated throughput", f"{ratio:.0%}"))
            print(f"  {name:15} replicated / unreplicated: {ratio:.0%}", flush=True)
        finally:
            cluster.stop()
    return rows
