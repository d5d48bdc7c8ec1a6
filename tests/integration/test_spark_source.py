"""The kbroker Spark source, with real Spark (local[2]) against a real broker process."""

from __future__ import annotations

import pytest

from tests.integration.workload import make_topic


def produce(bootstrap: str, topic: str, rows: list[tuple], **config) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", **config})
    for key, value, headers in rows:
        producer.produce(topic, key=key, value=value, headers=headers)
    assert producer.flush(30) == 0


def source(spark, broker, fmt: str = "kbroker", **options):
    reader = spark.read.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def kafka_python_read(bootstrap: str, topic: str) -> set:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(parts)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(parts)
        out = set()
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            for tp, messages in consumer.poll(timeout_ms=1000).items():
                for m in messages:
                    out.add((m.partition, m.offset, m.key, m.value, tuple((k, v) for k, v in m.headers)))
        return out
    finally:
        consumer.close()


# The same scenarios through kbroker's source and Spark's own Kafka connector (format "kafka", jars from Maven):
# both read kbroker alike, and kafka-python says what there is to read.
FORMATS = pytest.mark.parametrize("fmt", ["kbroker", "kafka"])


@FORMATS
def test_batch_read_equals_what_kafka_python_reads(spark, broker, topic_name, fmt):
    make_topic(broker.bootstrap, topic_name, partitions=3)
    rows = [(f"k{i}".encode() if i % 5 else None, f"v{i}".encode() if i % 7 else None,
             [("n", str(i).encode()), ("e", b"")] if i % 3 else None) for i in range(900)]
    produce(broker.bootstrap, topic_name, rows)
    df = source(spark, broker, fmt, subscribe=topic_name, includeHeaders="true")
    read = df.collect()
    got = {(r.partition, r.offset, r.key, r.value, tuple((h.key, h.value) for h in r.headers or ()))
           for r in read}
    expected = kafka_python_read(broker.bootstrap, topic_name)
    assert len(got) == 900 and got == expected
    # A record without headers has null headers (Spark's own source), not an empty list.
    assert {(r.partition, r.offset) for r in read if r.headers is None} == {(p, o) for p, o, *_, h in expected
                                                                           if not h}
    assert {r.topic for r in df.select("topic").distinct().collect()} == {topic_name}
    # Offsets named per partition, an end bound, and minPartitions splitting ranges: the same records.
    part = source(spark, broker, fmt, assign=f'{{"{topic_name}":[0,1]}}', minPartitions="7",
                  startingOffsets=f'{{"{topic_name}":{{"0":10,"1":-2}}}}',
                  endingOffsets=f'{{"{topic_name}":{{"0":50,"1":-1}}}}')
    assert part.rdd.getNumPartitions() >= 7
    offsets = sorted((r.partition, r.offset) for r in part.select("partition", "offset").collect())
    ends = {p: max(o for q, o, *_ in expected if q == p) + 1 for p in (0, 1)}
    assert offsets == [(0, o) for o in range(10, 50)] + [(1, o) for o in range(ends[1])]


@FORMATS
def test_streaming_reads_every_record_once_within_max_offsets_per_trigger_and_across_a_restart(
        spark, broker, topic_name, tmp_path, fmt):
    make_topic(broker.bootstrap, topic_name, partitions=3)
    produce(broker.bootstrap, topic_name, [(f"k{i}".encode(), f"v{i}".encode(), None) for i in range(500)])
    seen: list[tuple[int, list]] = []

    def run() -> None:
        query = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap)
                 .option("subscribe", topic_name).option("startingOffsets", "earliest")
                 .option("maxOffsetsPerTrigger", "120").load()
                 .writeStream.option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .foreachBatch(lambda df, batch_id: seen.append((batch_id, [r.value for r in df.collect()])))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None, query.exception()

    run()
    first = len(seen)
    assert first >= 5 and all(len(values) <= 120 for _, values in seen)
    produce(broker.bootstrap, topic_name, [(f"k{i}".encode(), f"v{i}".encode(), None) for i in range(500, 800)])
    run()   # the same checkpoint: only what came since
    values = [v for _, batch in seen for v in batch]
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(800)), "a record missing or read twice"
    assert [b for b, _ in seen[first:]][0] > seen[first - 1][0]


@FORMATS
def test_read_committed_never_sees_aborted_records(spark, broker, topic_name, fmt):
    from confluent_kafka import Producer

    make_topic(broker.bootstrap, topic_name, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic_name}"})
    producer.init_transactions(30)
    for n, commit in enumerate([True, False, True, False, True]):
        producer.begin_transaction()
        for i in range(50):
            producer.produce(topic_name, key=f"{n}-{i}".encode(), value=f"{'ok' if commit else 'aborted'}-{n}-{i}".encode())
        producer.flush(30)   # in the log before the end: librdkafka's abort drops what it has not sent
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)
    committed = source(spark, broker, fmt, subscribe=topic_name, **{"kafka.isolation.level": "read_committed"})
    values = [r.value.decode() for r in committed.collect()]
    assert len(values) == 150 and all(v.startswith("ok-") for v in values)
    everything = source(spark, broker, fmt, subscribe=topic_name).count()
    assert everything == 250


@pytest.mark.parametrize("options,message", [
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "exactly one of the options 'subscribe', 'subscribePattern', 'assign'"),
    ({"subscribe": "TOPIC", "startingOffsets": '{"TOPIC":{"0":'}, "option 'startingOffsets' is not valid JSON"),
    ({"subscribe": "no-such-topic-anywhere"}, "option 'subscribe': topic(s) no-such-topic-anywhere do not exist"),
    ({"subscribe": "TOPIC", "maxOffsetsPerTrigger": "many"}, "option 'maxOffsetsPerTrigger' must be an integer"),
])
def test_bad_options_fail_the_query_naming_the_option(spark, broker, topic_name, options, message):
    make_topic(broker.bootstrap, topic_name, partitions=1)
    options = {k: v.replace("TOPIC", topic_name) for k, v in options.items()}
    with pytest.raises(Exception) as failure:
        source(spark, broker, **options).collect()
    assert message.replace("TOPIC", topic_name) in str(failure.value)


def test_a_broker_that_is_down_fails_the_query_clearly(spark, broker, topic_name):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # nothing listens here once the socket closes
    reader = (spark.read.format("kbroker").option("kafka.bootstrap.servers", f"127.0.0.1:{port}")
              .option("subscribe", topic_name).option("kafka.default.api.timeout.ms", "3000"))
    with pytest.raises(Exception) as failure:
        reader.load().collect()
    assert f"cannot reach kbroker at kafka.bootstrap.servers=127.0.0.1:{port}" in str(failure.value)


def test_subscribe_pattern_with_starting_timestamps(spark, broker, topic_name):
    """Every topic the pattern matches, from the first record at or after a timestamp (Spark's rules: per
    partition by ListOffsets; ``startingOffsetsByTimestamp`` names each partition's own)."""
    from confluent_kafka import Producer

    names = [f"{topic_name}-a", f"{topic_name}-b"]
    for name in names:
        make_topic(broker.bootstrap, name, partitions=2)
    make_topic(broker.bootstrap, f"{topic_name}x-other", partitions=1)   # does not match the pattern
    base = 1_790_000_000_000
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for name in names + [f"{topic_name}x-other"]:
        for i in range(40):
            producer.produce(name, value=f"{name}:{i}".encode(), partition=i % 2 if "other" not in name else 0,
                             timestamp=base + i * 1000)
    assert producer.flush(30) == 0

    def values(**options):
        rows = source(spark, broker, subscribePattern=f"{topic_name}-.*", **options).select("value").collect()
        return sorted(bytes(r.value).decode() for r in rows)

    assert values(startingTimestamp=str(base + 30_000)) == sorted(f"{n}:{i}" for n in names for i in range(30, 40))
    by_partition = '{"%s": {"0": %d, "1": %d}, "%s": {"0": %d, "1": %d}}' % (
        names[0], base + 38_000, base + 1_000, names[1], base, base + 100_000)   # past the end: nothing
    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy"):   # Spark's default: a miss fails
        values(startingOffsetsByTimestamp=by_partition)
    assert values(startingOffsetsByTimestamp=by_partition, startingOffsetsByTimestampStrategy="latest") == sorted(
        [f"{names[0]}:{i}" for i in range(38, 40, 2)] + [f"{names[0]}:{i}" for i in range(1, 40, 2)]
        + [f"{names[1]}:{i}" for i in range(0, 40, 2)])


def test_streaming_reads_partitions_added_meanwhile_from_earliest(spark, broker, topic_name, tmp_path):
    from kafka import KafkaAdminClient
    from kafka.admin import NewPartitions

    make_topic(broker.bootstrap, topic_name, partitions=1)
    produce(broker.bootstrap, topic_name, [(None, f"first-{i}".encode(), []) for i in range(10)])
    seen: list[tuple[int, str]] = []

    def run():
        query = (spark.readStream.format("kbroker").option("kafka.bootstrap.servers", broker.bootstrap)
                 .option("subscribe", topic_name).option("startingOffsets", "earliest").load()
                 .writeStream.foreachBatch(lambda df, _id: seen.extend(
                     (r.partition, bytes(r.value).decode()) for r in df.select("partition", "value").collect()))
                 .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None, query.exception()

    run()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_partitions({topic_name: NewPartitions(total_count=3)})
    finally:
        admin.close()
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for p in (0, 1, 2):
        for i in range(5):
            producer.produce(topic_name, value=f"later-{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    run()
    assert sorted(seen) == sorted([(0, f"first-{i}") for i in range(10)]
                                  + [(p, f"later-{p}-{i}") for p in (0, 1, 2) for i in range(5)])


def test_a_short_range_is_read_without_waiting_for_a_full_batch(broker, topic_name):
    """What each task of a micro-batch does (client.spark.records), without Spark: a range of 40 records,
    below the read's batch of 10,000 and the partition's end below it, ends at its last record, and no
    ``consume`` call of the range's waits out its timeout for a batch it cannot fill (librdkafka's one-second
    wait cost 2.4 s of each three-task micro-batch before; Spark's own connector took 0.3). Each call's time
    is checked against its own timeout, not the range's against a wall-clock budget: on a loaded machine
    connecting alone can take a second."""
    import time

    from kbroker.client.spark.kafka import consumer
    from kbroker.client.spark.options import SourceOptions
    from kbroker.client.spark.records import OffsetRange, messages, read_range

    make_topic(broker.bootstrap, topic_name, partitions=1)
    produce(broker.bootstrap, topic_name, [(None, b"v%d" % i, None) for i in range(100)])
    opts = SourceOptions.parse({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic_name},
                               streaming=False)
    values = [v.as_py() for batch in read_range(opts, OffsetRange(topic_name, 0, 30, 70))
              for v in batch.column("value")]
    assert values == [b"v%d" % i for i in range(30, 70)]

    class Timed:
        """The range's consumer, each ``consume`` call's time and timeout noted."""

        def __init__(self, real) -> None:
            self.real, self.calls = real, []

        def consume(self, num_messages: int, timeout: float):
            began = time.monotonic()
            got = self.real.consume(num_messages=num_messages, timeout=timeout)
            self.calls.append((time.monotonic() - began, timeout))
            return got

        def __getattr__(self, name):
            return getattr(self.real, name)

    # (made as range_messages makes it)
    timed = Timed(consumer(opts.client, opts.read_committed, **{"enable.partition.eof": True,
                                                               "auto.offset.reset": "error"}))
    try:
        read = [m.value() for polled in messages(timed, topic_name, 0, 30, 70, opts.poll_timeout_s)
                for m in polled]
    finally:
        timed.real.close()
    assert read == values
    assert timed.calls and all(took < timeout for took, timeout in timed.calls), timed.calls
