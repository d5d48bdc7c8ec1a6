"""Reading one topic-partition offset range on an executor, into Arrow record batches with Spark's Kafka row schema.

Invariants: every record with ``start <= offset < end`` that the isolation
level lets through is returned once, in offset order; gaps (transaction
markers, aborted records under read_committed, compacted-away offsets) are
skipped; a range whose start the log no longer holds is an error when
``failOnDataLoss`` (else it reads from the log start, with a warning).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from kbroker.client.spark.kafka import consumer

log = logging.getLogger("client.spark")
BATCH_ROWS = 10_000

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
          "timestampType int")
HEADERS = ", headers array<struct<key:string,value:binary>>"


@dataclass
class OffsetRange(InputPartition):
    topic: str
    partition: int
    start: int
    end: int

    def __post_init__(self) -> None:
        InputPartition.__init__(self, (self.topic, self.partition, self.start, self.end))


def split(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Spark's ``minPartitions``: cut the largest ranges until there are that many (deterministic)."""
    out = list(ranges)
    while min_partitions and len(out) < min_partitions:
        largest = max(range(len(out)), key=lambda i: out[i].end - out[i].start, default=None)
        if largest is None or out[largest].end - out[largest].start < 2:
            break
        r = out[largest]
        middle = r.start + (r.end - r.start) // 2
        out[largest:largest + 1] = [OffsetRange(r.topic, r.partition, r.start, middle),
                                    OffsetRange(r.topic, r.partition, middle, r.end)]
    return out


def arrow_schema(include_headers: bool):
    import pyarrow as pa

    fields = [("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
              ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32())]
    if include_headers:
        fields.append(("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))))
    return pa.schema(fields)


def messages(c, topic: str, partition: int, start: int, end: int, poll_timeout_s: float):
    """Yield lists of librdkafka messages with ``start <= offset < end``, in order, then stop.

    ``c`` has ``enable.partition.eof``; the range ends at the first record at
    or past ``end``, at the record ``end - 1``, or at an end-of-partition
    event past it (the range closes on a marker or an aborted record).
    """
    from confluent_kafka import KafkaError, TopicPartition

    c.assign([TopicPartition(topic, partition, start)])
    deadline = time.monotonic() + poll_timeout_s
    position = start
    while True:
        # No more than the range has left: librdkafka's consume waits out its timeout for a batch it cannot
        # fill, which cost every range shorter than BATCH_ROWS a second. (An event or record past the range,
        # where markers or aborted records leave it fewer records than offsets, fills the count too.)
        polled = c.consume(num_messages=max(1, min(BATCH_ROWS, end - position)), timeout=1.0)
        if not polled and time.monotonic() > deadline:
            raise TimeoutError(f"no records from {topic}-{partition} at offset >= {start} for "
                               f"{poll_timeout_s:.0f}s (kafkaConsumer.pollTimeoutMs); range ends at {end}")
        if polled:
            deadline = time.monotonic() + poll_timeout_s
        out, done = [], False
        for m in polled:
            error = m.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"reading {topic}-{partition}: {error}")
                done = m.offset() >= end
                continue
            if m.offset() >= end:
                done = True
                break
            out.append(m)
            position = m.offset() + 1
            done = position == end
        if out:
            yield out
        if done:
            return


def range_messages(opts, r: OffsetRange):
    """Lists of ``r``'s librdkafka messages (see the module invariants), read by a consumer of its own."""
    if r.start >= r.end:
        return
    c = consumer(opts.client, opts.read_committed, **{"enable.partition.eof": True, "auto.offset.reset": "error"})
    try:
        start = _checked_start(opts, c, r)
        if start < r.end:
            yield from messages(c, r.topic, r.partition, start, r.end, opts.poll_timeout_s)
    finally:
        c.close()


def read_range(opts, r: OffsetRange):
    """Yield pyarrow RecordBatches of ``r``'s records, up to BATCH_ROWS each."""
    import pyarrow as pa

    schema = arrow_schema(opts.include_headers)
    cols = _Columns(opts.include_headers)
    for polled in range_messages(opts, r):
        for m in polled:
            cols.add(m)
        if len(cols) >= BATCH_ROWS:
            yield pa.RecordBatch.from_arrays(cols.arrays(r.topic, r.partition, schema), schema=schema)
            cols = _Columns(opts.include_headers)
    if len(cols):
        yield pa.RecordBatch.from_arrays(cols.arrays(r.topic, r.partition, schema), schema=schema)


def _checked_start(opts, c, r: OffsetRange) -> int:
    from confluent_kafka import TopicPartition

    low, high = c.get_watermark_offsets(TopicPartition(r.topic, r.partition), timeout=opts.api_timeout_s,
                                        cached=False)
    if r.start >= low:
        return r.start
    message = (f"{r.topic}-{r.partition}: offsets {r.start}..{low - 1} are no longer in the log (its start is "
               f"{low}); records were lost, e.g. to retention")
    if opts.fail_on_data_loss:
        raise RuntimeError(message + ". Set option 'failOnDataLoss' to false to skip them.")
    log.warning("%s; skipped because failOnDataLoss is false", message)
    return low


class _Columns:
    """Column lists of one Arrow batch, filled a record at a time."""

    def __init__(self, include_headers: bool) -> None:
        self.keys, self.values, self.offsets, self.timestamps, self.types = [], [], [], [], []
        self.headers = [] if include_headers else None

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, m) -> None:
        self.keys.append(m.key())
        self.values.append(m.value())
        self.offsets.append(m.offset())
        kind, ts = m.timestamp()
        self.timestamps.append(ts * 1000 if ts >= 0 else None)
        self.types.append(1 if kind == 2 else 0)   # Spark: 0 CreateTime, 1 LogAppendTime
        if self.headers is not None:
            # A record without headers has null headers, as in Spark's own Kafka source.
            headers = m.headers()
            self.headers.append([{"key": k, "value": v} for k, v in headers] if headers else None)

    def arrays(self, topic: str, partition: int, schema) -> list:
        import pyarrow as pa

        n = len(self.offsets)
        arrays = [pa.array(self.keys, pa.binary()), pa.array(self.values, pa.binary()),
                  pa.array([topic] * n, pa.string()), pa.array([partition] * n, pa.int32()),
                  pa.array(self.offsets, pa.int64()), pa.array(self.timestamps, pa.int64()).cast(schema[5].type),
                  pa.array(self.types, pa.int32())]
        if self.headers is not None:
            arrays.append(pa.array(self.headers, schema[7].type))
        return arrays
