"""End-to-end latency (issue 12): produce-to-consume p50/p99/p99.9 of 1 KiB records at a fixed rate, 5,000
records/s and 50 MB/s, on each single broker (kbroker, Tansu, noida-db) and on a three-broker kbroker cluster
with acks=all.

Each record carries the wall-clock time it was handed to librdkafka; a consumer in its own process (so the two
never share a GIL) reads the topic from the start and records now minus that time. This is what
rdkafka_performance's latency mode (``-l``) measures, but its rate limiter busy-polls below a millisecond per
record, which on this two-core machine takes a core from the broker being measured; here the producer paces
itself in 1 ms ticks (a tick's records, then a sleep) and librdkafka sends with ``linger.ms=0``. The first
second of each run is left out (connections and metadata warming up).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

SIZE = 1024
SECONDS = 10
WARMUP_SECONDS = 1
RATES = [("5,000 rec/s", 5000), ("50 MB/s", 50 * 1024 * 1024 // SIZE)]


def produce_paced(bootstrap: str, topic: str, rate: int, seconds: float, acks: str) -> int:
    """Send ``rate`` records/s for ``seconds``, each starting with its send time (ns); returns how many."""
    from confluent_kafka import Producer

    # linger.ms=0 sends at once; at most 5 requests in flight (the Java producer's default, and librdkafka's
    # with idempotence) lets records that arrive meanwhile share the next request instead of each taking one.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                         "max.in.flight.requests.per.connection": 5, "enable.idempotence": acks == "all",
                         "queue.buffering.max.messages": 1_000_000})
    filler = b"x" * (SIZE - 8)
    # One record (send time 0, which the consumer skips) before the clock starts: librdkafka's idempotent
    # producer first asks for its producer id 500 ms after it is made (rd_kafka_idemp_init), so without this the
    # first half second of records queue in the client whatever the broker (noida-db's too), and on a busy
    # machine that wait runs past the warm-up second the percentiles leave out.
    producer.produce(topic, bytes(8) + filler)
    if producer.flush(30):
        raise RuntimeError("the producer did not get going")
    total = int(rate * seconds)
    sent, started = 0, time.perf_counter()
    while sent < total:
        due = min(total, int((time.perf_counter() - started) * rate) + 1)
        while sent < due:
            producer.produce(topic, time.time_ns().to_bytes(8, "big") + filler)
            sent += 1
        producer.poll(0)
        pause = started + sent / rate - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    if producer.flush(60):
        raise RuntimeError("records left unsent")
    return sent


def consume(bootstrap: str, topic: str, count: int, skip: int) -> dict[str, float]:
    """Read ``count`` records from the start of partition 0; percentiles of the latencies after ``skip``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-latency", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100, "fetch.min.bytes": 1})
    consumer.assign([TopicPartition(topic, 0, 0)])
    print("ready", flush=True)
    samples: list[int] = []
    deadline = time.monotonic() + SECONDS * 4 + 60
    while len(samples) < count and time.monotonic() < deadline:
        # What has arrived, at once (consume() with a timeout would hold records back until it has its count);
        # when nothing has, block for the next one.
        msgs = consumer.consume(1000, 0) or [consumer.poll(0.05)]
        now = time.time_ns()
        for msg in msgs:
            if msg is not None and msg.error() is None:
                sent = int.from_bytes(msg.value()[:8], "big")
                if sent:   # (0: the producer's warm-up record)
                    samples.append(now - sent)
    consumer.close()
    got = sorted(samples[skip:])
    if not got:
        return {"count": 0}

    def at(q: float) -> float:
        return got[min(len(got) - 1, int(len(got) * q))] / 1e6

    return {"count": len(samples), "p50": at(0.5), "p99": at(0.99), "p999": at(0.999)}


def run_one(bootstrap: str, topic: str, rate: int, acks: str) -> dict[str, float]:
    """One measurement: a consumer process on ``topic`` (already created, empty), then the paced producer."""
    total = rate * SECONDS
    reader = subprocess.Popen([sys.executable, "-m", "bench.latency", "consume", bootstrap, topic, str(total),
                               str(rate * WARMUP_SECONDS)], stdout=subprocess.PIPE, text=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        if reader.stdout.readline().strip() != "ready":
            raise RuntimeError("the latency consumer did not start")
        produce_paced(bootstrap, topic, rate, SECONDS, acks)
        out, _ = reader.communicate(timeout=SECONDS * 4 + 90)
    finally:
        if reader.poll() is None:
            reader.kill()
    return json.loads(out.strip().splitlines()[-1])


def measure(name: str, bootstrap: str, create, acks: str = "1", label: str = "") -> list[tuple]:
    """Rows (broker, scenario, cell) for both rates; ``create(bootstrap, topic)`` makes an empty topic."""
    rows = []
    for rate_label, rate in RATES:
        topic = f"latency-{acks}-{rate}-{int(time.time())}"
        create(bootstrap, topic)
        time.sleep(1)   # leaders known everywhere before the clock starts
        result = run_one(bootstrap, topic, rate, acks)
        scenario = f"end-to-end latency at {rate_label}{label}"
        if result.get("count", 0) < rate * SECONDS:
            cell = f"only {result.get('count', 0):,} of {rate * SECONDS:,} records arrived"
        else:
            cell = f"p50 {result['p50']:.1f} ms, p99 {result['p99']:.1f} ms, p99.9 {result['p999']:.1f} ms"
        print(f"  {name:9} {scenario:42}: {cell}", flush=True)
        rows.append((name, scenario, cell))
    return rows


def measure_cluster(parent: str | None = None) -> list[tuple]:
    """The same at RF=3, acks=all, min.insync.replicas=2 on a kbroker cluster (ZooKeeper + 3 brokers), then on
    three Apache Kafka KRaft nodes."""
    import tempfile

    from bench.replication import clusters
    from tests.cluster import wait_until

    def create(bootstrap: str, topic: str) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(60)

    rows = []
    for name, start in clusters().items():
        print(f"{name}:", flush=True)
        with tempfile.TemporaryDirectory(prefix="kbroker-bench-latency-", dir=parent) as tmp:
            cluster = start(os.path.join(tmp, "cluster"))
            try:
                wait_until(lambda: cluster.bootstrap, 30, 0.2, "the cluster")
                rows += measure(name, cluster.bootstrap, create, "all", ", RF=3 acks=all")
            finally:
                cluster.stop()
    return rows


if __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "consume":
    print(json.dumps(consume(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))), flush=True)
