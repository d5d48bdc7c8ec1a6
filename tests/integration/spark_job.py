"""A streaming Spark job for the sink tests, run as its own process so a test can kill -9 its driver (and the
Spark helpers the tests share: a local session, reading a topic back).

    python -m tests.integration.spark_job BOOTSTRAP IN OUT CHECKPOINT DELIVERY MODE

reads IN through the kbroker source (300 offsets per trigger), upper-cases
the values in Python on the executors (the task of the first partition
fails on its first attempt, so Spark retries it) and writes OUT through the
kbroker sink. MODE ``run`` keeps going until killed; ``drain`` stops once
everything in IN when it started is written (Trigger.AvailableNow).
"""

from __future__ import annotations

import os
import sys


def upper(batches):
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
        raise RuntimeError("injected: the first attempt of this task fails")
    import pyarrow.compute as pc

    for rb in batches:
        value = pc.utf8_upper(rb.column(1).cast("string")).cast("binary")
        yield rb.set_column(1, "value", value)


def spark_session(app: str, master: str = "local[2,4]", **config):
    """A local Spark session with the kbroker source registered and Spark's own Kafka connector on its
    classpath (``format("kafka")``: the jars must be there when the process's first session starts its JVM);
    its executors run this venv's Python, where client.spark lives. ``local[2,4]``: two cores, each task tried
    up to four times."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from kbroker.client.spark import KBrokerDataSource
    from kbroker.client.spark.connector import connector_jars

    builder = (SparkSession.builder.master(master).appName(app).config("spark.ui.enabled", "false")
               .config("spark.jars", ",".join(connector_jars())))
    for key, value in config.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(KBrokerDataSource)
    return session


def read_all(bootstrap: str, topic: str, read_committed: bool = True) -> list:
    """Every record of every partition of ``topic`` (librdkafka, to each partition's end)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-test-reader", "enable.auto.commit": False,
                  "enable.partition.eof": True,
                  "isolation.level": "read_committed" if read_committed else "read_uncommitted"})
    try:
        parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        done, out = set(), []
        while len(done) < len(parts):
            m = c.poll(10)
            assert m is not None, f"reading {topic}: nothing for 10 s"
            if m.error() is not None:
                done.add(m.partition())
                continue
            out.append(m)
        return out
    finally:
        c.close()


def main() -> None:
    bootstrap, source, sink, checkpoint, delivery, mode = sys.argv[1:7]
    spark = spark_session("kbroker-eos-job")
    records = (spark.readStream.format("kbroker").option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", source).option("startingOffsets", "earliest")
               .option("maxOffsetsPerTrigger", "300").load())
    out = records.selectExpr("key", "value").mapInArrow(upper, "key binary, value binary")
    writer = (out.writeStream.format("kbroker").option("kafka.bootstrap.servers", bootstrap)
              .option("topic", sink).option("kafka.delivery", delivery).option("checkpointLocation", checkpoint))
    query = writer.trigger(availableNow=True).start() if mode == "drain" else writer.start()
    print("started", flush=True)
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
