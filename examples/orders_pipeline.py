"""A consume-transform-produce pipeline on Spark through kbroker: orders in, enriched orders out, and
per-minute totals by customer.

    python examples/orders_pipeline.py --bootstrap 127.0.0.1:9092 --checkpoint /tmp/orders-pipeline

Two streaming queries share one read of ``orders`` (JSON values, see ``produce_orders.py``):

- ``orders-enriched``: each order joined with its customer's region and tier, its amount computed,
  keyed by customer, written exactly once (the kbroker sink's default);
- ``orders-per-minute``: orders and amount per customer per event-time minute, with a two-minute
  watermark: a minute is written once, when the watermark passes its end (append mode), and orders later
  than the watermark are dropped, as Spark's watermark defines.

Both checkpoint under ``--checkpoint``: a restarted job resumes where it stopped and, because the sink is
transactional, writes nothing twice. Read the outputs with ``isolation.level=read_committed``.

``--reader kafka`` reads ``orders`` with Spark's own Kafka source (``format("kafka")``, its jars gathered
through Maven by ``kbroker.client.spark.connector``) instead of kbroker's; the outputs are the same.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ORDER_SCHEMA = "order_id STRING, customer STRING, item STRING, quantity INT, unit_price DOUBLE, ts LONG"
CUSTOMERS = [("alice", "eu-west", "gold"), ("bob", "us-east", "silver"), ("carol", "ap-south", "gold"),
             ("dave", "eu-west", "bronze"), ("erin", "us-west", "silver")]


def orders(spark, bootstrap: str, topic: str = "orders", starting: str = "earliest", reader: str = "kbroker"):
    """The ``orders`` topic as parsed rows (records that are not an order's JSON left out), read by the
    ``reader`` format: ``kbroker`` or Spark's own ``kafka``, which take the same options."""
    from pyspark.sql import functions as F

    raw = (spark.readStream.format(reader).option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topic).option("startingOffsets", starting).load())
    return (raw.select(F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("o"))
            .select("o.*").where(F.col("order_id").isNotNull())
            .withColumn("event_time", F.timestamp_millis("ts")))


def enrich(spark, parsed):
    """Each order with its customer's region and tier (unknown customers too) and its amount."""
    from pyspark.sql import functions as F

    customers = spark.createDataFrame(CUSTOMERS, "customer STRING, region STRING, tier STRING")
    return (parsed.join(F.broadcast(customers), "customer", "left")
            .withColumn("region", F.coalesce("region", F.lit("unknown")))
            .withColumn("tier", F.coalesce("tier", F.lit("none")))
            .withColumn("amount", F.round(F.col("quantity") * F.col("unit_price"), 2)))


def per_minute(enriched, watermark: str = "2 minutes"):
    """Orders and amount per customer per event-time minute, final once the watermark passes the minute."""
    from pyspark.sql import functions as F

    return (enriched.withWatermark("event_time", watermark)
            .groupBy(F.window("event_time", "1 minute"), "customer")
            .agg(F.count("*").alias("orders"), F.round(F.sum("amount"), 2).alias("amount")))


def as_records(df, key: str):
    """Key and JSON value columns for the kbroker sink."""
    from pyspark.sql import functions as F

    return df.select(F.col(key).alias("key"), F.to_json(F.struct(*[c for c in df.columns])).alias("value"))


def start(spark, bootstrap: str, checkpoint: str, *, available_now: bool = False, source: str = "orders",
          enriched_topic: str = "orders-enriched", totals_topic: str = "orders-per-minute", reader: str = "kbroker"):
    """Start both queries; returns them (``awaitTermination`` or ``stop`` each)."""
    from pyspark.sql import functions as F

    enriched = enrich(spark, orders(spark, bootstrap, source, reader=reader))
    totals = per_minute(enriched).select(F.col("window.start").alias("minute"), "customer", "orders", "amount")
    queries = []
    for name, df, topic, mode in (("enriched", as_records(enriched.drop("event_time"), "customer"),
                                   enriched_topic, "append"),
                                  ("per-minute", as_records(totals, "customer"), totals_topic, "append")):
        writer = (df.writeStream.format("kbroker").queryName(f"{source}-{name}").outputMode(mode)
                  .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
                  .option("checkpointLocation", os.path.join(checkpoint, name)))
        writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="2 seconds")
        queries.append(writer.start())
        await_sources(queries[-1])
    return queries


def await_sources(query, timeout: float = 120.0) -> None:
    """Return once ``query`` has opened its sources (or stopped), so that the next query starts after it.

    Spark hands every query of a session one environment map for a registered Python data source, and a
    streaming source adds its entries to it on its query's thread when it opens. If another query's task is
    being serialized at that moment, the task carries a torn copy of the map and fails on the executor with
    ``java.io.OptionalDataException``, on every retry (Spark serializes a stage's tasks once). Once one
    source is open the map holds every entry and later sources only overwrite values, which is safe: so
    queries are started one after another, each once the previous one is past initializing its sources.
    """
    deadline = time.monotonic() + timeout
    while (query.isActive and query.status["message"].startswith("Initializing")
           and time.monotonic() < deadline):
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--checkpoint", default="/tmp/kbroker-orders-pipeline")
    parser.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    parser.add_argument("--reader", choices=["kbroker", "kafka"], default="kbroker",
                        help="kbroker's source, or Spark's own Kafka source")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from pyspark.sql import SparkSession

    from kbroker.client.spark import KBrokerDataSource

    builder = (SparkSession.builder.master("local[2]").appName("kbroker-orders-pipeline")
               .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false"))
    if args.reader == "kafka":
        from kbroker.client.spark.connector import connector_jars
        builder = builder.config("spark.jars", ",".join(connector_jars()))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(KBrokerDataSource)
    for query in start(spark, args.bootstrap, args.checkpoint, available_now=args.available_now,
                       reader=args.reader):
        query.awaitTermination()


if __name__ == "__main__":
    main()
