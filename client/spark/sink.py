"""The kbroker sink: batch (``df.write``) and streaming (``df.writeStream``) writers, exactly-once by default.

Exactly-once (see docs/SPARK.md for the whole argument): each write task
is one kbroker transaction holding the task's records and a marker record
``<write id>/<task partition> -> batch id`` in the commit topic. The task's
transactional id is ``kbroker-spark-<write id>-<task partition>``, the same
for every attempt of that task in every batch, so a new attempt fences
(and aborts) whatever an older attempt left open before it looks at the
marker; a marker at or past this batch means the task's output is already
committed and the attempt writes nothing. The write id is the streaming
query's id (stable across restarts on one checkpoint) or, for a batch
write, an id drawn on the driver when the write is planned.

Invariant: for each (write id, task partition, batch id) at most one
transaction with records commits, and a committed one carries its marker.
"""

from __future__ import annotations

import json
import uuid
import zlib
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from kbroker.client.spark.options import SinkOptions

COMMIT_TOPIC_PARTITIONS = 8


@dataclass
class TaskCommit(WriterCommitMessage):
    partition: int
    records: int
    skipped: bool


def check_schema(schema: StructType, opts: SinkOptions) -> None:
    """Spark's Kafka sink columns: value (string or binary), key, topic, partition, headers; others are ignored."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise ValueError("the sink needs a 'value' column (string or binary)")
    for name in ("value", "key"):
        if name in fields and not isinstance(fields[name], (StringType, BinaryType)):
            raise ValueError(f"column '{name}' must be string or binary, not {fields[name].simpleString()}")
    if "topic" in fields:
        if not isinstance(fields["topic"], StringType):
            raise ValueError(f"column 'topic' must be string, not {fields['topic'].simpleString()}")
    elif not opts.topic:
        raise ValueError("no topic: set the option 'topic' or give the rows a 'topic' column")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise ValueError(f"column 'partition' must be int, not {fields['partition'].simpleString()}")
    if "headers" in fields:
        t = fields["headers"]
        ok = (isinstance(t, ArrayType) and isinstance(t.elementType, StructType)
              and [f.name for f in t.elementType.fields] == ["key", "value"])
        if not ok:
            raise ValueError(f"column 'headers' must be array<struct<key:string,value:binary>>, not {t.simpleString()}")


def ensure_commit_topic(opts: SinkOptions) -> None:
    """The compacted topic of task markers, made on the driver the first time a query writes."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    from kbroker.client.spark.kafka import unreachable

    admin = AdminClient(opts.client)
    try:
        topics = admin.list_topics(timeout=30).topics
    except KafkaException as exc:
        raise unreachable(opts.client, exc) from None
    if opts.commit_topic in topics:
        return
    future = admin.create_topics([NewTopic(opts.commit_topic, COMMIT_TOPIC_PARTITIONS,
                                           config={"cleanup.policy": "compact"})])[opts.commit_topic]
    try:
        future.result(30)
    except KafkaException as exc:
        if exc.args[0].code() != 36:   # TOPIC_ALREADY_EXISTS: another query made it meanwhile
            raise


def _task() -> tuple[int, int | None, str | None]:
    """(task partition id, streaming batch id or None, streaming query id or None) from Spark's task context."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    return ctx.partitionId(), (int(batch) if batch is not None else None), ctx.getLocalProperty("sql.streaming.queryId")


class _Writer:
    def __init__(self, opts: SinkOptions, write_id: str) -> None:
        self.opts = opts
        self.write_id = write_id

    def _write(self, batches) -> TaskCommit:
        partition, batch_id, query_id = _task()
        write_id = query_id or self.write_id
        if not self.opts.exactly_once:
            failed: list = []
            producer = self._producer({"enable.idempotence": True, "delivery.report.only.error": True,
                                       "on_delivery": lambda err, _msg: failed.append(err)})
            count = _produce_all(producer, batches, self.opts.topic)
            _flush(producer)
            if failed:
                raise RuntimeError(f"{len(failed)} records not written, e.g.: {failed[0]}")
            return TaskCommit(partition, count, False)
        # Only failures come back as delivery reports (a failed record also fails the commit): a report per
        # record would cost the task a Python callback each.
        producer = self._producer({"transactional.id": f"kbroker-spark-{write_id}-{partition}",
                                   "transaction.timeout.ms": self.opts.transaction_timeout_ms,
                                   "delivery.report.only.error": True})
        producer.init_transactions(60)   # fences every older attempt of this task, aborting what it left open
        key = f"{write_id}/{partition}".encode()
        done = _last_marker(self.opts, key)
        batch = batch_id if batch_id is not None else 0
        if done is not None and done >= batch:
            return TaskCommit(partition, 0, True)
        producer.begin_transaction()
        count = _produce_all(producer, batches, self.opts.topic)
        producer.produce(self.opts.commit_topic, key=key, value=json.dumps({"batch": batch}).encode(),
                         partition=_marker_partition(key))
        producer.commit_transaction(self.opts.transaction_timeout_ms / 1000)
        return TaskCommit(partition, count, False)

    def _producer(self, extra: dict):
        from confluent_kafka import Producer

        # Java's default partitioner (murmur2 of the key), so keyed records land where a Kafka client puts them.
        return Producer({"partitioner": "murmur2_random", "linger.ms": 5, **self.opts.client, **extra})


def _marker_partition(key: bytes) -> int:
    return zlib.crc32(key) % COMMIT_TOPIC_PARTITIONS


def _last_marker(opts: SinkOptions, key: bytes) -> int | None:
    """The batch id of the last committed marker for ``key`` (read_committed, to the last stable offset)."""
    from confluent_kafka import TopicPartition

    from kbroker.client.spark.kafka import consumer
    from kbroker.client.spark.records import messages

    c = consumer(opts.client, True, **{"enable.partition.eof": True})
    try:
        partition = _marker_partition(key)
        low, high = c.get_watermark_offsets(TopicPartition(opts.commit_topic, partition), timeout=30, cached=False)
        last = None
        for polled in messages(c, opts.commit_topic, partition, low, high, 30.0) if high > low else ():
            for m in polled:
                if m.key() == key:
                    last = json.loads(m.value())["batch"] if m.value() is not None else None
        return last
    finally:
        c.close()


def _produce_all(producer, batches, default_topic: str | None) -> int:
    """Produce every row of the Arrow batches; null keys and values stay null."""
    count = 0
    for rb in batches:
        columns = {name.lower(): rb.column(i).to_pylist() for i, name in enumerate(rb.schema.names)}
        values = columns["value"]
        keys = columns.get("key") or [None] * len(values)
        topics = columns.get("topic") or [default_topic] * len(values)
        partitions = columns.get("partition") or [None] * len(values)
        headers = columns.get("headers") or [None] * len(values)
        for key, value, topic, partition, hdrs in zip(keys, values, topics, partitions, headers):
            if topic is None:
                topic = default_topic
            if topic is None:
                raise ValueError("a row has a null 'topic' and the option 'topic' is not set")
            args = {"key": key.encode() if isinstance(key, str) else key,
                    "value": value.encode() if isinstance(value, str) else value}
            if partition is not None:
                args["partition"] = partition
            if hdrs:
                args["headers"] = [(h["key"], h["value"]) for h in hdrs]
            while True:
                try:
                    producer.produce(topic, **args)
                    break
                except BufferError:   # the local queue is full: let librdkafka send some
                    producer.poll(0.05)
            count += 1
        producer.poll(0)
    return count


def _flush(producer) -> None:
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} records not acknowledged by kbroker within 120 s")


class BatchWriter(_Writer, DataSourceArrowWriter):
    def write(self, iterator) -> TaskCommit:
        return self._write(iterator)


class StreamWriter(_Writer, DataSourceStreamArrowWriter):
    def write(self, iterator) -> TaskCommit:
        return self._write(iterator)

    def commit(self, messages, batchId: int) -> None:
        """Every task committed its own transaction; Spark records the batch in its commit log next."""

    def abort(self, messages, batchId: int) -> None:
        """A failed attempt's open transaction is aborted when the retry (or the replayed batch) fences it."""


def new_write_id() -> str:
    return str(uuid.uuid4())
