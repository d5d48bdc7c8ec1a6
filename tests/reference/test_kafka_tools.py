"""Apache Kafka's own command-line tools (kafka-tools 4.2.1, run from the jars Maven fetched) against kbroker,
each checked by what it prints: what an operator types works as it does against Kafka (issue 33)."""

import json
import re
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, ShareConsumer

from tests.reference.apache_kafka import tool
from tests.reference.test_groups import set_group_config

pytestmark = pytest.mark.reference


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture
def server(kbroker) -> str:
    return kbroker.bootstrap


def test_kafka_topics_creates_describes_alters_and_deletes(server):
    topic = f"tools-{uuid.uuid4().hex[:8]}"
    topics = "org.apache.kafka.tools.TopicCommand"
    ok(tool(topics, "--bootstrap-server", server, "--create", "--topic", topic, "--partitions", "3",
            "--config", "retention.ms=600000"))
    described = ok(tool(topics, "--bootstrap-server", server, "--describe", "--topic", topic))
    assert f"Topic: {topic}" in described and "PartitionCount: 3" in described and "retention.ms=600000" in described
    ok(tool(topics, "--bootstrap-server", server, "--alter", "--topic", topic, "--partitions", "4"))
    assert "PartitionCount: 4" in ok(tool(topics, "--bootstrap-server", server, "--describe", "--topic", topic))
    assert topic in ok(tool(topics, "--bootstrap-server", server, "--list")).split()
    ok(tool(topics, "--bootstrap-server", server, "--delete", "--topic", topic))
    deadline = time.monotonic() + 30
    while topic in ok(tool(topics, "--bootstrap-server", server, "--list")).split():
        assert time.monotonic() < deadline, "the topic stayed"


def test_console_producer_and_consumer_then_consumer_groups_describe_and_reset(server):
    topic, group = f"tools-{uuid.uuid4().hex[:8]}", f"tools-g-{uuid.uuid4().hex[:8]}"
    ok(tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", server, "--create", "--topic", topic,
            "--partitions", "1"))
    ok(tool("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", server, "--topic", topic,
            stdin="one\ntwo\nthree\n"))
    consumed = ok(tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", server, "--topic",
                       topic, "--group", group, "--from-beginning", "--max-messages", "3"))
    assert consumed.split() == ["one", "two", "three"]
    groups = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
    described = ok(tool(groups, "--bootstrap-server", server, "--describe", "--group", group))
    row = next(line.split() for line in described.splitlines() if line.startswith(group))
    assert row[1:6] == [topic, "0", "3", "3", "0"], described            # current offset 3, end 3, lag 0
    reset = ok(tool(groups, "--bootstrap-server", server, "--reset-offsets", "--group", group, "--topic", topic,
                    "--to-earliest", "--execute"))
    assert any(line.split()[1:4] == [topic, "0", "0"] for line in reset.splitlines() if line.startswith(group))
    assert group in ok(tool(groups, "--bootstrap-server", server, "--list")).split()


def test_kafka_consumer_groups_shows_a_group_of_the_new_protocol(server):
    topic, group = f"tools-{uuid.uuid4().hex[:8]}", f"tools-g-{uuid.uuid4().hex[:8]}"
    ok(tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", server, "--create", "--topic", topic,
            "--partitions", "2"))
    consumer = Consumer({"bootstrap.servers": server, "group.id": group, "group.protocol": "consumer"})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 2:
            assert time.monotonic() < deadline
            consumer.poll(0.1)
        groups = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
        members = ok(tool(groups, "--bootstrap-server", server, "--describe", "--group", group, "--members",
                          "--verbose"))
        row = next(line.split() for line in members.splitlines() if line.startswith(group))
        # #PARTITIONS, CURRENT-EPOCH, CURRENT-ASSIGNMENT, TARGET-EPOCH, TARGET-ASSIGNMENT
        assert row[4:] == ["2", "1", f"{topic}:0,1", "1", f"{topic}:0,1"], members
        state = ok(tool(groups, "--bootstrap-server", server, "--describe", "--group", group, "--state",
                        "--verbose"))
        row = next(line.split() for line in state.splitlines() if line.startswith(group))
        assert row[-5:] == ["uniform", "Stable", "1", "1", "1"], state
    finally:
        consumer.close()


def test_kafka_share_groups_describes_a_share_group(kbroker, server):
    topic, group = f"tools-{uuid.uuid4().hex[:8]}", f"tools-s-{uuid.uuid4().hex[:8]}"
    ok(tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", server, "--create", "--topic", topic,
            "--partitions", "1"))
    from tests.reference.differential import Target
    assert set_group_config(Target("kbroker", kbroker.port), group, share_auto_offset_reset="earliest") == 0
    ok(tool("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", server, "--topic", topic,
            stdin="a\nb\nc\n"))
    consumer = ShareConsumer({"bootstrap.servers": server, "group.id": group})
    consumer.subscribe([topic])
    try:
        got, deadline = 0, time.monotonic() + 30
        while got < 3:
            assert time.monotonic() < deadline
            got += sum(1 for m in consumer.poll(0.2) if m.error() is None)
        consumer.commit_sync(10)
        shares = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
        described = ok(tool(shares, "--bootstrap-server", server, "--describe", "--group", group))
        row = next(line.split() for line in described.splitlines() if line.startswith(group))
        assert row[1:4] == [topic, "0", "3"], described                   # start offset 3: all three done
        members = ok(tool(shares, "--bootstrap-server", server, "--describe", "--group", group, "--members"))
        assert group in members and topic in members, members
    finally:
        consumer.close()
    # Once the group is empty, its offsets go back to the start: the records are delivered again.
    deadline = time.monotonic() + 60
    while True:
        reset = tool("org.apache.kafka.tools.consumer.group.ShareGroupCommand", "--bootstrap-server", server,
                     "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
        if reset.returncode == 0 or time.monotonic() > deadline:   # (until the member's leave is through)
            break
        time.sleep(0.5)
    ok(reset)
    again = ShareConsumer({"bootstrap.servers": server, "group.id": group})
    again.subscribe([topic])
    try:
        got, deadline = [], time.monotonic() + 30
        while len(got) < 3:
            assert time.monotonic() < deadline, got
            got += [m.value() for m in again.poll(0.2) if m.error() is None]
        assert sorted(got) == [b"a", b"b", b"c"]
    finally:
        again.close()


def test_kafka_configs_transactions_and_delete_records(server, tmp_path):
    topic = f"tools-{uuid.uuid4().hex[:8]}"
    ok(tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", server, "--create", "--topic", topic,
            "--partitions", "1"))
    ok(tool("kafka.admin.ConfigCommand", "--bootstrap-server", server, "--alter", "--entity-type", "topics",
            "--entity-name", topic, "--add-config", "retention.ms=123456"))
    described = ok(tool("kafka.admin.ConfigCommand", "--bootstrap-server", server, "--describe", "--entity-type",
                        "topics", "--entity-name", topic))
    assert "retention.ms=123456" in described, described
    ok(tool("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", server, "--topic", topic,
            stdin="".join(f"r{i}\n" for i in range(10))))
    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 4}]}))
    deleted = ok(tool("org.apache.kafka.tools.DeleteRecordsCommand", "--bootstrap-server", server,
                      "--offset-json-file", str(spec)))
    assert "low_watermark: 4" in deleted, deleted
    listed = ok(tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", server, "list"))
    assert listed.splitlines()[0].split()[:2] == ["TransactionalId", "Coordinator"], listed


def test_the_performance_and_verification_tools_run_to_the_end(server):
    """kafka-producer-perf-test (plain and transactional), kafka-consumer-perf-test,
    kafka-share-consumer-perf-test, kafka-e2e-latency and the verifiable producer and consumer (of both group
    protocols), as operators and Kafka's system tests run them: each sends or reads all it was asked to."""
    topic = f"tools-{uuid.uuid4().hex[:8]}"
    group = f"tools-share-{uuid.uuid4().hex[:8]}"
    ok(tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", server, "--create", "--topic", topic,
            "--partitions", "3"))
    produce = ["org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--record-size", "100",
               "--throughput", "-1", "--command-property", f"bootstrap.servers={server}", "acks=all"]
    assert "5000 records sent" in ok(tool(*produce, "--num-records", "5000"))
    assert "2000 records sent" in ok(tool(*produce, "--num-records", "2000", "--transaction-duration-ms", "100"))
    consumed = ok(tool("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", server, "--topic", topic,
                       "--num-records", "7000", "--timeout", "30000")).splitlines()
    assert consumed[1].split(", ")[4] == "7000", consumed   # (data.consumed.in.nMsg)
    ok(tool("kafka.admin.ConfigCommand", "--bootstrap-server", server, "--alter", "--entity-type", "groups",
            "--entity-name", group, "--add-config", "share.auto.offset.reset=earliest"))
    shared = ok(tool("org.apache.kafka.tools.ShareConsumerPerformance", "--bootstrap-server", server, "--topic",
                     topic, "--group", group, "--num-records", "7000", "--timeout", "30000")).splitlines()
    assert shared[1].split(", ")[5] == "7000", shared   # (data.consumed.in.nMsg)
    latency = ok(tool("org.apache.kafka.tools.EndToEndLatency", "--bootstrap-server", server, "--topic", topic,
                      "--num-records", "200", "--producer-acks", "all", "--record-size", "100"))
    assert "Avg latency" in latency, latency
    events = [json.loads(line) for line in ok(tool(
        "org.apache.kafka.tools.VerifiableProducer", "--bootstrap-server", server, "--topic", topic,
        "--max-messages", "20")).splitlines()]
    assert events[-1]["name"] == "tool_data" and events[-1]["acked"] == 20, events[-1]
    for protocol in ("classic", "consumer"):
        events = [json.loads(line) for line in ok(tool(
            "org.apache.kafka.tools.VerifiableConsumer", "--bootstrap-server", server, "--topic", topic,
            "--group-id", f"tools-{protocol}-{uuid.uuid4().hex[:8]}", "--group-protocol", protocol,
            "--max-messages", "50", "--reset-policy", "earliest")).splitlines()]
        commits = [e for e in events if e["name"] == "offsets_committed"]
        assert commits and all(c["success"] for c in commits), events
        assert sum(p["count"] for e in events if e["name"] == "records_consumed" for p in e["partitions"]) == 50


def test_kafka_client_metrics_alters_lists_describes_and_deletes_a_subscription(server):
    name = f"tools-metrics-{uuid.uuid4().hex[:8]}"
    command = "org.apache.kafka.tools.ClientMetricsCommand"
    ok(tool(command, "--bootstrap-server", server, "--alter", "--name", name, "--metrics",
            "org.apache.kafka.producer.,org.apache.kafka.consumer.", "--interval", "10000",
            "--match", "client_id=app-.*"))
    assert name in ok(tool(command, "--bootstrap-server", server, "--list")).split()
    described = ok(tool(command, "--bootstrap-server", server, "--describe", "--name", name))
    assert "interval.ms=10000" in described and "client_id=app-.*" in described and \
        "org.apache.kafka.producer." in described
    ok(tool(command, "--bootstrap-server", server, "--delete", "--name", name))
    assert name not in ok(tool(command, "--bootstrap-server", server, "--list")).split()


def test_kafka_features_describes_downgrades_and_upgrades(server):
    command = "org.apache.kafka.tools.FeatureCommand"
    described = ok(tool(command, "--bootstrap-server", server, "describe"))
    assert "Feature: transaction.version" in described and "FinalizedVersionLevel: 2" in described
    ok(tool(command, "--bootstrap-server", server, "downgrade", "--feature", "transaction.version=1"))
    try:
        lines = ok(tool(command, "--bootstrap-server", server, "describe")).splitlines()
        assert any("Feature: transaction.version" in line and "FinalizedVersionLevel: 1" in line for line in lines)
    finally:
        ok(tool(command, "--bootstrap-server", server, "upgrade", "--feature", "transaction.version=2"))


def test_kafka_acls_adds_lists_and_removes_acls(tmp_path):
    from tests.brokerproc import BrokerProcess

    broker = BrokerProcess(str(tmp_path / "data"), {"authorizer.class.name": "kbroker",
                                                    "super.users": "User:ANONYMOUS"})
    broker.start()
    try:
        server, topic = broker.bootstrap, f"tools-acl-{uuid.uuid4().hex[:8]}"
        acls = "org.apache.kafka.tools.AclCommand"
        ok(tool(acls, "--bootstrap-server", server, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                "--operation", "Describe", "--topic", topic))
        ok(tool(acls, "--bootstrap-server", server, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                "--group", "app-", "--resource-pattern-type", "prefixed"))
        listed = ok(tool(acls, "--bootstrap-server", server, "--list", "--topic", topic))
        assert f"name={topic}" in listed and "principal=User:alice" in listed and "operation=READ" in listed and \
            "operation=DESCRIBE" in listed, listed
        grouped = ok(tool(acls, "--bootstrap-server", server, "--list", "--principal", "User:alice"))
        assert "patternType=PREFIXED" in grouped and "name=app-" in grouped, grouped
        ok(tool(acls, "--bootstrap-server", server, "--remove", "--allow-principal", "User:alice", "--operation",
                "Read", "--topic", topic, "--force"))
        after = ok(tool(acls, "--bootstrap-server", server, "--list", "--topic", topic))
        assert "operation=READ" not in after and "operation=DESCRIBE" in after, after
    finally:
        broker.stop()


def test_kafka_transactions_describes_and_aborts_a_hanging_transaction(server):
    """A producer dies inside a transaction: kafka-transactions finds its open transaction on the partition
    (describe-producers) and aborts it by its start offset (WriteTxnMarkers from the admin, KIP-664); the
    partition's last stable offset moves on and a read_committed consumer reads the records after it."""
    import signal

    from confluent_kafka import Producer, TopicPartition
    topic = f"tools-{uuid.uuid4().hex[:8]}"
    ok(tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", server, "--create", "--topic", topic,
            "--partitions", "1"))
    # The hanging producer lives in a child process killed with SIGKILL: nothing ends its transaction.
    script = (f"from confluent_kafka import Producer\n"
              f"p = Producer({{'bootstrap.servers': '{server}', 'transactional.id': 'hanging-{topic}',"
              f" 'transaction.timeout.ms': 900000}})\n"
              f"p.init_transactions(30); p.begin_transaction(); p.produce('{topic}', b'open'); p.flush(30)\n"
              f"print('written', flush=True)\nimport time; time.sleep(600)\n")
    import sys
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "written"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    producer = Producer({"bootstrap.servers": server})
    producer.produce(topic, b"after")
    assert producer.flush(10) == 0
    described = ok(tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", server,
                        "describe-producers", "--topic", topic, "--partition", "0"))
    header, *rows = [line.split() for line in described.splitlines() if line.strip()]
    producers = [dict(zip(header, row)) for row in rows]
    # The dead transactional producer, its transaction open from offset 0; the plain producer's has none.
    assert [p["CurrentTransactionStartOffset"] for p in producers if p["CurrentTransactionStartOffset"] != "None"] \
        == ["0"], described
    consumer = Consumer({"bootstrap.servers": server, "group.id": f"g-{topic}", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1] == 0   # the LSO
        ok(tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", server, "abort", "--topic", topic,
                "--partition", "0", "--start-offset", "0"))
        deadline = time.monotonic() + 30
        while consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1] < 3:
            assert time.monotonic() < deadline, "the aborted transaction still holds the last stable offset"
            time.sleep(0.1)
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = []
        while len(got) < 1 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        assert got == [b"after"]
    finally:
        consumer.close()


MISTAKES = {   # case -> a tool's arguments, given the test's topic (made with two partitions)
    "a replication factor past the brokers": lambda t: (
        "org.apache.kafka.tools.TopicCommand", "--create", "--topic", f"{t}-x", "--replication-factor", "3"),
    "fewer partitions": lambda t: ("org.apache.kafka.tools.TopicCommand", "--alter", "--topic", t, "--partitions", "1"),
    "a config value of the wrong type": lambda t: (
        "org.apache.kafka.tools.TopicCommand", "--create", "--topic", f"{t}-y", "--config", "retention.ms=abc"),
    "compaction lags that contradict": lambda t: (
        "kafka.admin.ConfigCommand", "--alter", "--entity-type", "topics", "--entity-name", t, "--add-config",
        "min.compaction.lag.ms=5,max.compaction.lag.ms=1"),
    "a topic that is not there": lambda t: (
        "org.apache.kafka.tools.TopicCommand", "--delete", "--topic", f"{t}-none"),
}


def _told(result: subprocess.CompletedProcess, server: str) -> tuple[int, list[str]]:
    """The exit code and the error lines a tool printed, without their times and the broker's address."""
    lines = [re.sub(r"^\[[^]]*\] ", "", line).replace(server, "<server>")
             for line in (result.stdout + result.stderr).splitlines() if "rror" in line or "xception" in line]
    return result.returncode, lines[:3]


@pytest.mark.parametrize("case", list(MISTAKES))
def test_an_operators_mistake_is_told_as_kafka_tells_it(targets, case):
    """The same mistake through Kafka's own tools, against Kafka and kbroker: the same exit and the same
    error lines (the broker's words reach the operator through the Java admin client)."""
    topic = f"tools-{uuid.uuid4().hex[:8]}"
    told = {}
    for target in targets:
        server = f"127.0.0.1:{target.port}"
        ok(tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", server, "--create", "--topic", topic,
                "--partitions", "2"))
        main, *args = MISTAKES[case](topic)
        told[target.name] = _told(tool(main, "--bootstrap-server", server, *args), server)
    assert told["kbroker"] == told["kafka"]
