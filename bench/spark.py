"""The Spark rows of `make bench`: records/s through the kbroker data source and sink, against kbroker's own
librdkafka producer and consumer on the same topic, in one run.

- A single kbroker; a topic of RECORDS records of 100 B in PARTITIONS partitions, filled by
  rdkafka_performance (the librdkafka producer row) and read back by it (the librdkafka consumer row).
- Source: ``spark.read.format("kbroker")...load()`` counted, on ``local[2]``; once with the reader's Arrow
  batches (what the source does) and once with a reader that yields a tuple per row (what it would do
  without Arrow), to show which is faster; and Spark's own Kafka source (``format("kafka")``, the JVM's
  kafka-clients) on the same topic.
- Sink: the same records, cached in Spark first so only the write is timed, written to a new topic
  exactly-once (a transaction per task with its marker) and at-least-once, and by Spark's own Kafka sink
  (at-least-once).
"""

from __future__ import annotations

import json
import os
import time

from bench import loadgen

RECORDS = 1_000_000
SIZE = 100
PARTITIONS = 4


def _tuple_source():
    """The kbroker source with a reader that yields one Python tuple per row (Spark converts each)."""
    import datetime

    from kbroker.client.spark import KBrokerDataSource
    from kbroker.client.spark.records import range_messages
    from kbroker.client.spark.source import BatchReader

    epoch = datetime.datetime.fromtimestamp(0, datetime.timezone.utc)

    class TupleReader(BatchReader):
        def read(self, r):
            for polled in range_messages(self.opts, r):
                for m in polled:
                    kind, ts = m.timestamp()
                    yield (m.key(), m.value(), r.topic, r.partition, m.offset(),
                           epoch + datetime.timedelta(milliseconds=ts), 1 if kind == 2 else 0)

    class TupleSource(KBrokerDataSource):
        @classmethod
        def name(cls) -> str:
            return "kbroker_tuples"

        def reader(self, schema):
            from kbroker.client.spark.options import SourceOptions

            return TupleReader(SourceOptions.parse(self.options, streaming=False))

    return TupleSource


def _session():
    from tests.integration.spark_job import spark_session

    # The executors' Python must import this module for the tuple reader.
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    spark = spark_session("kbroker-bench", master="local[2]", **{"spark.driver.memory": "2g"})
    spark.dataSource.register(_tuple_source())
    return spark


def _timed(action):
    """(what ``action()`` returned, seconds it took)."""
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started


def measure(broker, create_topic, scale: float = 1.0) -> list[tuple[str, str]]:
    """(scenario, result) rows."""
    count = int(RECORDS * scale)
    topic = "bench-spark"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    rows = []
    fill = loadgen.run(["-P", "-t", topic, "-s", str(SIZE), "-c", str(count), "-a", "1", "-b", broker.bootstrap,
                        "-X", "linger.ms=5"], broker.pid)
    rows.append((f"librdkafka producer, {SIZE} B, acks=1", f"{fill.msgs_per_s:,.0f} rec/s"))
    partitions = [a for p in range(PARTITIONS) for a in ("-p", str(p))]
    read = loadgen.run(["-C", "-t", topic, *partitions, "-o", "beginning", "-c", str(count), "-b",
                        broker.bootstrap], broker.pid)
    rows.append((f"librdkafka consumer, {SIZE} B", f"{read.msgs_per_s:,.0f} rec/s"))
    for row in rows:
        print(f"  spark     {row[0]:44}: {row[1]}", flush=True)

    spark = _session()
    try:
        def source(fmt: str, **options):
            return spark.read.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap).option(
                "subscribe", topic).option("minPartitions", "2").options(**options).load()

        warm = json.dumps({topic: {str(p): 100 for p in range(PARTITIONS)}})
        for fmt in ("kbroker", "kafka"):   # the JVM, its connector classes and the Python workers warm up
            source(fmt, endingOffsets=warm).count()
        for label, fmt in (("Spark source, Arrow batches", "kbroker"), ("Spark source, a tuple per row",
                                                                         "kbroker_tuples"),
                           ("Spark's own Kafka source (format kafka)", "kafka")):
            counted, seconds = _timed(source(fmt).count)
            assert counted == count, f"{label}: counted {counted} of {count}"
            rows.append((label, f"{count / seconds:,.0f} rec/s"))
            print(f"  spark     {label:44}: {rows[-1][1]}", flush=True)
        data = source("kbroker").select("key", "value").cache()
        assert data.count() == count
        # A fresh broker's first transaction creates __transaction_state (50 partitions) and the commit topic,
        # once per cluster (about 3 s here): a small exactly-once write does that before the timed ones.
        create_topic(broker.bootstrap, "bench-spark-warm", PARTITIONS)
        data.limit(1000).write.format("kbroker").option("kafka.bootstrap.servers", broker.bootstrap).option(
            "topic", "bench-spark-warm").mode("append").save()
        for label, fmt, delivery in (("Spark sink, exactly-once", "kbroker", "exactly-once"),
                                     ("Spark sink, at-least-once", "kbroker", "at-least-once"),
                                     ("Spark's own Kafka sink (format kafka)", "kafka", None)):
            out = f"bench-spark-out-{fmt}-{delivery}"
            create_topic(broker.bootstrap, out, PARTITIONS)
            writer = data.write.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap).option("topic", out)
            _, seconds = _timed((writer.option("kafka.delivery", delivery) if delivery else writer).mode("append").save)
            rows.append((label, f"{count / seconds:,.0f} rec/s"))
            print(f"  spark     {label:44}: {rows[-1][1]}", flush=True)
        data.unpersist()
    finally:
        spark.stop()
    return rows


def table(rows: list[tuple[str, str]], scale: float) -> str:
    lines = ["| scenario | kbroker |", "|---|---|"] + [f"| {s} | {r} |" for s, r in rows]
    lines.append("")
    lines.append(f"One kbroker; a topic of {int(RECORDS * scale):,} records of {SIZE} B in {PARTITIONS} partitions; "
                 "Spark `local[2]` on the same two cores. Source rows count the topic (`minPartitions` 2); sink rows "
                 "write the same records, cached in Spark first, to a new topic. See `bench/spark.py`.")
    return "\n".join(lines)
