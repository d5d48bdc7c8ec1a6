"""The replicated rows of `make bench`: one three-broker kbroker cluster (ZooKeeper and three kbroker processes on
this machine) and one of three Apache Kafka KRaft nodes, one after the other in one run.

- Throughput: rdkafka_performance produces 1 KiB records to a 6-partition topic with replication factor 1
  and acks=1, then to one with replication factor 3, acks=all and min.insync.replicas=2. Leaders are spread
  over the three brokers in both, so the difference is what replication costs: every batch written twice more
  by the followers' fetchers, and each acks=all produce parked until the ISR has it. Each round has a topic of
  its own, deleted after it; the two cases' rounds alternate, ``REPEATS`` of each, quiet and then with one core
  kept busy by a CPU-bound process (issue 30). Every round's MB appended per broker CPU-second (the records'
  bytes times the replication factor over the brokers' utime + stime in the round) is a figure of the table,
  and so is the median RF=3 round's over the best RF=1 round's. The data go to a tmpfs where there is one, so
  that the disk does not decide the figures. Between the two clusters, ``bench/replication_floor.py`` moves the
  same bytes at both replication factors with plain processes that do nothing else: the floor under the ratio.
- Latency: a librdkafka producer sends at a fixed rate (``RATE`` records/s, ``linger.ms=0``) and times each
  record from ``produce()`` to its delivery report; p50 and p99 of those.

The CPU cell sums the three broker processes (share of one core): on a 2-core machine the brokers and the
load generator compete for the same cores, and replication triples the broker work.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

from bench import loadgen, replication_floor
from tests.cluster import Cluster, wait_until

PARTITIONS = 6
SIZE = 1024
RECORDS = 1_200_000   # long enough (seconds, not a fraction of one) for the RF=1 run to be stable
RATE = 2000            # records/s for the latency rows
LATENCY_SECONDS = 10
REPEATS = 3
CASES = [("RF=1 acks=1", 1, "1", {}), ("RF=3 acks=all, min ISR 2", 3, "-1", {"min.insync.replicas": "2"})]
TMPFS_NEEDS = 6 * 2**30   # one RF=3 round's three copies (3.7 GB at the default count), and room to spare

# Kafka's defaults where the test cluster shortens them for speed.
BENCH_OVERRIDES = {"replica.lag.time.max.ms": "30000", "replica.fetch.wait.max.ms": "500",
                   "log.retention.check.interval.ms": "600000", "zookeeper.session.timeout.ms": "18000"}

# Kafka removes a deleted topic's folders after the broker's delay, whatever the topic's file.delete.delay.ms: a
# minute between rounds, with the round's gigabytes still on the tmpfs, without this.
KAFKA_OVERRIDES = {"log.segment.delete.delay.ms": "0"}


def create(bootstrap: str, name: str, rf: int, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, rf, config=configs)])[name].result(60)


def delete(bootstrap: str, name: str, root: str) -> None:
    """The topic deleted and its replicas' folders gone from under ``root`` (a round's gigabytes leave the tmpfs
    before the next round writes its own)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})   # (held: a client destroyed fails its futures)
    admin.delete_topics([name])[name].result(60)
    wait_until(lambda: not _replica_dirs(root, name), 120, 0.2, f"{name}'s replicas removed")


def _replica_dirs(root: str, topic: str) -> list[str]:
    prefix = topic + "-"
    return [d for _, dirs, _ in os.walk(root) for d in dirs if d.startswith(prefix) and d[len(prefix):][:1].isdigit()]


def tmpfs() -> str | None:
    """A tmpfs to hold the clusters' data (/dev/shm where it is one), so that the disk does not decide the
    figures; None: none here (the system's temporary folder, and the figures say the disk's part too)."""
    with open("/proc/mounts") as mounts:
        points = {fields[1] for fields in (line.split() for line in mounts) if fields[2] == "tmpfs"}
    for point in ("/dev/shm", *sorted(points)):
        if point in points and os.access(point, os.W_OK) and shutil.disk_usage(point).free > TMPFS_NEEDS:
            return point
    return None


@contextlib.contextmanager
def busy_core():
    """One core kept busy by a plain CPU-bound process, started and stopped here."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)   # (running before the round starts)
        yield
    finally:
        hog.kill()
        hog.wait()


def one_round(cluster, root: str, topic: str, rf: int, acks: str, configs: dict[str, str], count: int) -> loadgen.Run:
    """One throughput round on a topic of its own, deleted afterwards."""
    create(cluster.bootstrap, topic, rf, {**configs, "file.delete.delay.ms": "0"})
    os.sync()   # each measurement starts without the previous one's writeback still running
    try:
        return loadgen.run(["-P", "-t", topic, "-s", str(SIZE), "-c", str(count), "-a", acks, "-b",
                            cluster.bootstrap, "-X", "linger.ms=5"], cluster.pids(), timeout=180)
    finally:
        delete(cluster.bootstrap, topic, root)


def appended_per_cpu_second(run: loadgen.Run, rf: int) -> float:
    """MB appended on all replicas per second of the brokers' CPU (utime + stime) during the round."""
    return run.messages * SIZE * rf / 1e6 / run.broker_cpu_seconds if run.broker_cpu_seconds else 0.0


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
            "kafka cluster": lambda root: KafkaCluster(root, overrides=KAFKA_OVERRIDES).start()}


def measure(scale: float = 1.0, parent: str | None = None) -> list[tuple]:
    """``parent``: where the clusters' data goes (default: a tmpfs, as ``tmpfs``)."""
    parent = parent or tmpfs()
    print(f"  clusters' data under {parent or tempfile.gettempdir()}", flush=True)
    rows, ratios = [], {}
    for name, start in clusters().items():
        print(f"{name}:", flush=True)
        rows += _measure(name, start, scale, parent, ratios)
        if name == "kbroker cluster":   # (no cluster running: its idle rounds would be counted nowhere but slow it)
            rows += replication_floor.rows(parent, MODES, ratios)
    for mode in MODES:
        if ("kbroker cluster", mode) in ratios and ("floor", mode) in ratios:
            share = ratios["kbroker cluster", mode] / ratios["floor", mode]
            rows.append(("kbroker cluster", f"(floor) kbroker's median RF=3 / best RF=1 over the floor's, {mode}",
                         f"{share:.2f}"))
    return rows


MODES = {"quiet": contextlib.nullcontext, "one core busy": busy_core}


def _measure(name: str, start, scale: float, parent: str | None, ratios: dict) -> list[tuple]:
    rows = []
    count = int(RECORDS * scale)
    with tempfile.TemporaryDirectory(prefix="kbroker-bench-cluster-", dir=parent) as tmp:
        cluster = start(os.path.join(tmp, "cluster"))
        try:
            wait_until(lambda: cluster.bootstrap, 30, 0.2, "the cluster")
            by_mode = {}
            for m, (mode, condition) in enumerate(MODES.items()):
                rounds: dict[str, list[loadgen.Run]] = {label: [] for label, *_ in CASES}
                with condition():
                    for i in range(REPEATS):   # (the two cases' rounds alternate: a slow spell hits both)
                        for label, rf, acks, configs in CASES:
                            run = one_round(cluster, tmp, f"bench-{m}{i}-rf{rf}", rf, acks, configs, count)
                            rounds[label].append(run)
                            print(f"  {name:15} {mode:13} produce {SIZE} B {label:26}: {run.mb_per_s:8.1f} MB/s "
                                  f"{run.msgs_per_s:10.0f} rec/s  brokers {run.broker_cpu:4.0%}  "
                                  f"{appended_per_cpu_second(run, rf):6.0f} MB per broker CPU-s", flush=True)
                rows += _round_rows(name, mode, rounds, ratios)
                by_mode[mode] = rounds
            for label, rf, acks, configs in CASES:
                topic = f"bench-latency-rf{rf}"
                create(cluster.bootstrap, topic, rf, configs)
                p50, p99 = latency(cluster.bootstrap, topic, "all" if acks == "-1" else acks)
                print(f"  {name:15} latency at {RATE}/s {label}: p50 {p50:.1f} ms  p99 {p99:.1f} ms", flush=True)
                rows.append((name, f"latency at {RATE}/s {label}", f"p50 {p50:.1f} ms, p99 {p99:.1f} ms"))
            base, replicated = (_median(runs) for runs in by_mode["quiet"].values())
            ratio = replicated.mb_per_s / base.mb_per_s
            rows.append((name, "replicated / unreplicated throughput, quiet", f"{ratio:.0%}"))
            print(f"  {name:15} replicated / unreplicated: {ratio:.0%}", flush=True)
        finally:
            cluster.stop()
    return rows


def _round_rows(name: str, mode: str, rounds: dict[str, list[loadgen.Run]], ratios: dict) -> list[tuple]:
    """Each case's median round (by MB/s), every round's MB appended per broker CPU-second with its MB/s, and
    issue 30's figure: the median RF=3 round's MB per broker CPU-second over the best RF=1 round's (also kept
    in ``ratios`` under (name, mode))."""
    rows, per_cpu = [], {}
    for label, rf, _, _ in CASES:
        runs = rounds[label]
        median = _median(runs)
        rows.append((name, f"produce {SIZE} B {label}, {mode}",
                     f"{median.mb_per_s:.1f} MB/s, {median.msgs_per_s:,.0f} rec/s "
                     f"(gen {median.loadgen_cpu:.0%}, 3 brokers {median.broker_cpu:.0%})"))
        per_cpu[label] = [appended_per_cpu_second(run, rf) for run in runs]
        rows.append((name, f"MB appended per broker CPU-second, {label}, {mode}: each round (at MB/s)",
                     ", ".join(f"{mb:.0f} ({run.mb_per_s:.0f})" for mb, run in zip(per_cpu[label], runs))))
    (_, unreplicated), (_, replicated) = per_cpu.items()
    ratio = ratios[name, mode] = sorted(replicated)[len(replicated) // 2] / max(unreplicated)
    rows.append((name, f"median RF=3 round / best RF=1 round, MB per broker CPU-second, {mode}", f"{ratio:.2f}"))
    return rows


def _median(runs: list[loadgen.Run]) -> loadgen.Run:
    return sorted(runs, key=lambda r: r.mb_per_s)[len(runs) // 2]
