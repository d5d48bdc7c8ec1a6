"""The kbroker Spark sink, with real Spark against a real broker: output equals input, and exactly once across kills."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.integration.spark_job import read_all
from tests.integration.test_spark_source import produce
from tests.integration.workload import make_topic

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# kbroker's sink, and Spark's own Kafka sink (format "kafka", at-least-once) writing to kbroker.
SINKS = pytest.mark.parametrize("fmt", ["kbroker", "kafka"])


@SINKS
def test_batch_write_equals_its_input(spark, broker, topic_name, fmt):
    make_topic(broker.bootstrap, topic_name, partitions=3)
    rows = [(f"k{i}" if i % 4 else None, f"v{i}".encode() if i % 9 else None,
             [(f"h{i}", b"x")] if i % 2 else [], (i % 3) if i % 5 == 0 else None) for i in range(600)]
    df = spark.createDataFrame(rows, "key string, value binary, headers array<struct<key:string,value:binary>>, "
                                     "partition int")
    (df.write.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic_name)
     .mode("append").save())
    got = read_all(broker.bootstrap, topic_name)
    assert collections.Counter((m.key(), m.value(), tuple(m.headers() or ())) for m in got) == collections.Counter(
        ((k.encode() if k else None), v, tuple(h)) for k, v, h, _ in rows)
    for m in got:   # an explicit partition is kept; keyed records go where Java's partitioner puts them
        i = int(m.value()[1:]) if m.value() else None
        if i is not None and i % 5 == 0:
            assert m.partition() == i % 3


@SINKS
def test_streaming_write_equals_its_input(spark, broker, topic_name, tmp_path, fmt):
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    make_topic(broker.bootstrap, source, partitions=2)
    make_topic(broker.bootstrap, sink, partitions=2)
    produce(broker.bootstrap, source, [(f"k{i}".encode(), f"v{i}".encode(), [("i", str(i).encode())])
                                       for i in range(400)])
    query = (spark.readStream.format("kbroker").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest").option("includeHeaders", "true")
             .option("maxOffsetsPerTrigger", "150").load().select("key", "value", "headers")
             .writeStream.format(fmt).option("kafka.bootstrap.servers", broker.bootstrap)
             .option("topic", sink).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    got = sorted((m.key(), m.value(), tuple(m.headers())) for m in read_all(broker.bootstrap, sink))
    assert got == sorted((f"k{i}".encode(), f"v{i}".encode(), (("i", str(i).encode()),)) for i in range(400))


def test_a_value_column_of_the_wrong_type_fails_naming_it(spark, broker, topic_name):
    make_topic(broker.bootstrap, topic_name, partitions=1)
    df = spark.createDataFrame([(1,)], "value int")
    with pytest.raises(Exception) as failure:
        df.write.format("kbroker").option("kafka.bootstrap.servers", broker.bootstrap).option(
            "topic", topic_name).mode("append").save()
    assert "column 'value' must be string or binary, not int" in str(failure.value)


def _job(broker, source: str, sink: str, checkpoint: str, delivery: str, mode: str) -> subprocess.Popen:
    # Spark's scratch space beside the checkpoint: a driver killed with kill -9 runs no shutdown hook to remove it,
    # and in the system's /tmp it would stay after the test (about 10 MB a driver).
    local = os.path.join(os.path.dirname(checkpoint), "spark-local")
    env = {**os.environ, "PYTHONPATH": ROOT, "SPARK_LOCAL_DIRS": local}
    return subprocess.Popen([sys.executable, "-m", "tests.integration.spark_job", broker.bootstrap, source, sink,
                             checkpoint, delivery, mode], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _kill_when_output_grows(job: subprocess.Popen, broker, sink: str, above: int, timeout: float = 120) -> int:
    """kill -9 the whole driver (JVM and Python workers with it) once the sink holds more than ``above`` records."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert job.poll() is None, f"the job exited {job.returncode}:\n{job.stderr.read()[-3000:]}"
        written = len(read_all(broker.bootstrap, sink, read_committed=False))
        if written > above:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)
            return written
        time.sleep(0.5)
    os.killpg(job.pid, signal.SIGKILL)
    raise AssertionError(f"the sink stayed at {above} records for {timeout}s")


def _run_with_kills(broker, topic_name, tmp_path, delivery: str, kills: int = 3,
                    first: int = 1500) -> collections.Counter:
    """``first`` records in, then ``kills`` times: a driver killed once the sink has grown, 100 more records in."""
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    make_topic(broker.bootstrap, source, partitions=3)
    make_topic(broker.bootstrap, sink, partitions=3)
    produce(broker.bootstrap, source, [(f"k{i}".encode(), f"v{i}".encode(), None) for i in range(first)])
    checkpoint = str(tmp_path / "checkpoint")
    written = 0
    for cycle in range(kills):
        job = _job(broker, source, sink, checkpoint, delivery, "run")
        written = _kill_when_output_grows(job, broker, sink, written)
        # More input arrives while the driver is down, as it would in production.
        produce(broker.bootstrap, source, [(f"k{i}".encode(), f"v{i}".encode(), None)
                                           for i in range(first + cycle * 100, first + 100 + cycle * 100)])
    drain = _job(broker, source, sink, checkpoint, delivery, "drain")
    _, err = drain.communicate(timeout=300)
    assert drain.returncode == 0, err[-3000:]
    return collections.Counter(m.value() for m in read_all(broker.bootstrap, sink, read_committed=True))


def test_exactly_once_across_a_driver_kill_and_a_failed_task_attempt(broker, topic_name, tmp_path):
    """kill -9 of the driver mid-stream, a restart on the checkpoint, then drained: each input once. (600
    records: two batches of 300 after the kill, as each batch of the job costs Spark seconds.)"""
    _assert_each_once(_run_with_kills(broker, topic_name, tmp_path, "exactly-once", kills=1, first=600), 700)


@pytest.mark.slow
def test_exactly_once_across_driver_kills_and_a_failed_task_attempt(broker, topic_name, tmp_path):
    """The same with three kills (make test-slow; a driver's start takes Spark about 15 s)."""
    _assert_each_once(_run_with_kills(broker, topic_name, tmp_path, "exactly-once"), 1800)


def _assert_each_once(counts: collections.Counter, records: int) -> None:
    expected = {f"V{i}".encode() for i in range(records)}
    assert set(counts) == expected, f"missing {sorted(expected - set(counts))[:10]}"
    duplicated = {v: n for v, n in counts.items() if n > 1}
    assert not duplicated, f"{len(duplicated)} records written more than once, e.g. {list(duplicated.items())[:5]}"


@pytest.mark.slow
def test_at_least_once_mode_under_the_same_kills_writes_duplicates(broker, topic_name, tmp_path):
    """What exactly-once buys: the same run without transactions loses nothing but repeats what was replayed."""
    counts = _run_with_kills(broker, topic_name, tmp_path, "at-least-once")
    assert set(counts) == {f"V{i}".encode() for i in range(1800)}
    duplicates = sum(n - 1 for n in counts.values())
    print(f"at-least-once: {duplicates} duplicate records of 1800 after three driver kills")
