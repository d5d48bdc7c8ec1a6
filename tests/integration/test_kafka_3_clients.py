"""Java clients of Kafka releases before 3.9, as applications still bundle them (Spark 3.5's Kafka connector
carries kafka-clients 3.4.1): Kafka 3.3's own command-line tools, built on its AdminClient, producer and
consumer, against a kbroker broker. Those clients send ApiVersions v3 and refuse an answer that lists a supported
feature whose range starts at 0 (every feature kbroker has): an AdminClient's thread exited at its first answer
("The AdminClient thread has exited"), and a Kafka 3.3 broker in a kbroker cluster shut down. Kafka answers v3
without such features (KAFKA-17492), and so does kbroker. Kafka 3.3's jars come from Maven Central on first use
(tests/reference/kafka/zookeeper/pom.xml)."""

from __future__ import annotations

import os
import subprocess

from tests.brokerproc import BrokerProcess
from tests.reference.apache_kafka import ROOT, zookeeper_jars

VERSION = "3.3.2"
LOG_CONFIG = os.path.join(ROOT, "tests", "reference", "kafka", "zookeeper", "tools-log4j.properties")
RECORDS = [f"record-{i}" for i in range(100)]


def tool(main: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """One of Kafka 3.3's tools, as its kafka-*.sh script runs it."""
    command = ["java", "-Xms64m", "-Xmx256m", f"-Dlog4j.configuration=file:{LOG_CONFIG}", "-cp",
               os.path.join(zookeeper_jars(VERSION), "*"), main, *args]
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{main} {args}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done


def test_kafka_3_3_tools_create_produce_consume_and_describe_a_group(tmp_path):
    broker = BrokerProcess(str(tmp_path / "data")).start()
    try:
        server = ("--bootstrap-server", broker.bootstrap)
        tool("kafka.admin.TopicCommand", *server, "--create", "--topic", "older", "--partitions", "2")
        described = tool("kafka.admin.TopicCommand", *server, "--describe", "--topic", "older").stdout
        assert "PartitionCount: 2" in described and described.count("Leader: 0") == 2, described
        # (Kafka 3's producer is idempotent by default: InitProducerId, then sequenced batches)
        tool("kafka.tools.ConsoleProducer", *server, "--topic", "older", stdin="\n".join(RECORDS) + "\n")
        consumed = tool("kafka.tools.ConsoleConsumer", *server, "--topic", "older", "--group", "older-group",
                        "--from-beginning", "--max-messages", str(len(RECORDS)), "--timeout-ms", "30000")
        assert sorted(consumed.stdout.split()) == sorted(RECORDS)
        # the group's commits (made as the consumer closed), read back by the group command's AdminClient
        rows = [line.split() for line in tool("kafka.admin.ConsumerGroupCommand", *server, "--describe", "--group",
                                              "older-group").stdout.splitlines() if line.startswith("older-group")]
        committed = {int(row[2]): (int(row[3]), int(row[4]), int(row[5])) for row in rows}   # offset, end, lag
        assert sorted(committed) == [0, 1] and sum(c for c, _, _ in committed.values()) == len(RECORDS)
        assert all(offset == end and lag == 0 for offset, end, lag in committed.values()), committed
    finally:
        assert broker.stop() == 0, broker.tail_log()
