"""Kafka's own load tools as an operator runs them (issue 33): kafka-producer-perf-test,
kafka-consumer-perf-test and kafka-share-consumer-perf-test (``ProducerPerformance``, ``ConsumerPerformance``,
``ShareConsumerPerformance`` from kafka-tools 4.2.1, run from the jars Maven fetched, the Java clients'
defaults), against each broker of the main table.

The producer sends ``RECORDS`` records of ``SIZE`` bytes as fast as it can (``--throughput -1``) to a topic of
one partition; the consumer then reads them back in a group of its own, and the share consumer (KIP-932) in a
share group of its own reading from the earliest offset, with one share consumer and with ``SHARE_THREADS``.
Each row is what the tool prints: records/s and MB/s."""

from __future__ import annotations

import os
import re
import subprocess
import uuid

from tests.reference.apache_kafka import jars

RECORDS = 1_000_000
SIZE = 100
SHARE_THREADS = 4
_PRODUCED = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)")


def _tool(main: str, *args: str) -> str:
    command = ["java", "-Xms256m", "-Xmx512m", "-cp", os.path.join(jars(), "*"), main, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{main} failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout


def measure(broker, create_topic, scale: float = 1.0) -> list[tuple]:
    count = int(RECORDS * scale)
    topic = f"bench-tools-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1)
    produced = _tool("org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", str(count),
                     "--record-size", str(SIZE), "--throughput", "-1", "--producer-props",
                     f"bootstrap.servers={broker.bootstrap}")
    sent, rate, mb = _PRODUCED.findall(produced)[-1]
    consumed = _tool("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", broker.bootstrap,
                     "--topic", topic, "--messages", str(count), "--timeout", "60000", "--group",
                     f"bench-tools-{uuid.uuid4().hex[:6]}")
    # (its answer: a header line, then start, end, MB, MB/s, records, records/s, ... comma-separated)
    fields = [f.strip() for f in consumed.strip().splitlines()[-1].split(",")]
    read_mb_s, read, read_rate = float(fields[3]), int(fields[4]), float(fields[5])
    print(f"  {broker.name}: kafka-producer-perf-test {float(rate):,.0f} rec/s ({mb} MB/s), "
          f"kafka-consumer-perf-test {read_rate:,.0f} rec/s ({read_mb_s:.1f} MB/s, {read:,} records)", flush=True)
    rows = [(broker.name, f"kafka-producer-perf-test, {SIZE} B, Java producer defaults",
             f"{float(rate):,.0f} rec/s, {float(mb):.1f} MB/s"),
            (broker.name, f"kafka-consumer-perf-test, {SIZE} B", f"{read_rate:,.0f} rec/s, {read_mb_s:.1f} MB/s")]
    for threads in (1, SHARE_THREADS):
        cell = _share_consumption(broker.bootstrap, topic, count, threads)
        print(f"  {broker.name}: kafka-share-consumer-perf-test, {threads} consumer(s): {cell}", flush=True)
        rows.append((broker.name, f"kafka-share-consumer-perf-test, {SIZE} B, {threads} share consumer"
                     + ("s" if threads > 1 else ""), cell))
    return rows


def _share_consumption(bootstrap: str, topic: str, count: int, threads: int) -> str:
    """kafka-share-consumer-perf-test's records/s and MB/s for a new share group set to read from the earliest
    offset (with kafka-configs, as an operator does)."""
    group = f"bench-tools-share-{uuid.uuid4().hex[:6]}"
    _tool("kafka.admin.ConfigCommand", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "groups",
          "--entity-name", group, "--add-config", "share.auto.offset.reset=earliest")
    shared = _tool("org.apache.kafka.tools.ShareConsumerPerformance", "--bootstrap-server", bootstrap,
                   "--topic", topic, "--num-records", str(count), "--timeout", "60000", "--group", group,
                   "--threads", str(threads))
    # (the same columns as kafka-consumer-perf-test's; fewer records than asked means the timeout ran out)
    fields = [f.strip() for f in shared.strip().splitlines()[-1].split(",")]
    mb_s, read, rate = float(fields[3]), int(fields[5]), float(fields[4])
    if read < count:
        return f"failed: {read:,} of {count:,} records within 60 s"
    return f"{rate:,.0f} rec/s, {mb_s:.1f} MB/s"
