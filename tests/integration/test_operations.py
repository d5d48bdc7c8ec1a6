"""Operating a broker: docker-compose file, CLI tools, restarts, persisted configs, live config changes."""

import shutil
import subprocess
import sys
import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.structs import OffsetAndMetadata

from tests.brokerproc import ROOT
from tests.cluster import wait_until
from tests.integration.workload import make_topic


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose is installed by `make test` (apt)")
def test_docker_compose_file_is_valid():
    result = subprocess.run(["docker-compose", "config"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "9092" in result.stdout and "kbroker" in result.stdout
    for service in ("zookeeper", "kbroker-1", "kbroker-2", "kbroker-3"):
        assert f"  {service}:" in result.stdout, service
    assert result.stdout.count("zookeeper.connect=zookeeper:2181/kbroker") == 3
    # Start-up rides out a ZooKeeper that is not ready yet (tests/integration/test_zookeeper_startup.py for
    # the broker's side): brokers wait for its healthcheck and are restarted if they still exit.
    assert result.stdout.count("condition: service_healthy") == 3 and result.stdout.count("restart: on-failure") == 3
    assert "echo stat | nc" in result.stdout
    # What must outlive `docker-compose down`: ZooKeeper's snapshots (/data) and its transaction log (/datalog,
    # without which ZooKeeper came back empty, with a new cluster id the brokers' data dirs refuse), and the logs.
    for volume in ("zookeeper-data:/data", "zookeeper-datalog:/datalog", "kbroker-1-data:/var/lib/kbroker"):
        assert volume in result.stdout, volume


def cli(broker, *args, stdin=None):
    result = subprocess.run([sys.executable, "-m", "kbroker.broker.cli", *args, "--bootstrap-server", broker.bootstrap],
                            cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=60)
    return result


def test_cli_topics_produce_consume(broker, topic_name):
    assert cli(broker, "topics", "create", "--topic", topic_name, "--partitions", "2",
               "--config", "retention.ms=60000").returncode == 0
    described = cli(broker, "topics", "describe", "--topic", topic_name)
    assert "PartitionCount: 2" in described.stdout and "retention.ms=60000" in described.stdout
    assert topic_name in cli(broker, "topics", "list").stdout.split()
    assert cli(broker, "produce", "--topic", topic_name, stdin="one\ntwo\nthree\n").returncode == 0
    consumed = cli(broker, "consume", "--topic", topic_name, "--partition", "0", "--from-beginning",
                   "--max-messages", "3")
    assert consumed.stdout.split() == ["one", "two", "three"]
    bad = cli(broker, "topics", "create", "--topic", "bad/name")
    assert bad.returncode == 1 and "INVALID_TOPIC_EXCEPTION" in bad.stderr
    assert cli(broker, "topics", "delete", "--topic", topic_name).returncode == 0


def test_cli_configs_describe_and_alter_as_kafka_configs(broker, topic_name):
    assert cli(broker, "topics", "create", "--topic", topic_name, "--config", "retention.ms=60000").returncode == 0
    altered = cli(broker, "configs", "alter", "--entity-type", "topics", "--entity-name", topic_name,
                  "--add-config", "segment.bytes=1048576,cleanup.policy=[compact,delete]",
                  "--delete-config", "retention.ms")
    assert altered.returncode == 0, altered.stdout + altered.stderr
    described = cli(broker, "configs", "describe", "--entity-type", "topics", "--entity-name", topic_name).stdout
    assert "segment.bytes=1048576 (DYNAMIC_TOPIC_CONFIG)" in described
    assert "cleanup.policy=compact,delete (DYNAMIC_TOPIC_CONFIG)" in described
    assert "retention.ms" not in described   # deleted: back to the default, which describe leaves out
    assert "retention.ms=604800000 (DEFAULT_CONFIG)" in cli(
        broker, "configs", "describe", "--entity-type", "topics", "--entity-name", topic_name, "--all").stdout
    brokers = cli(broker, "configs", "describe", "--entity-type", "brokers", "--entity-name", "0", "--all")
    assert brokers.returncode == 0 and "read-only" in brokers.stdout
    refused = cli(broker, "configs", "alter", "--entity-type", "topics", "--entity-name", topic_name,
                  "--add-config", "no.such.config=1")
    assert refused.returncode == 1 and "INVALID_CONFIG" in refused.stdout


def test_cli_refuses_bad_security_settings_and_iterations_without_a_traceback(broker, tmp_path):
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=CARRIER_PIGEON\n")
    for config in (str(bad), str(tmp_path / "missing.properties")):
        result = cli(broker, "topics", "list", "--command-config", config)
        assert result.returncode == 1 and "--command-config" in result.stderr and "Traceback" not in result.stderr
    few = subprocess.run([sys.executable, "-m", "kbroker.broker.cli", "users", "add", "--user", "u", "--password", "p",
                          "--iterations", "100", "--zookeeper", "127.0.0.1:1"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert few.returncode == 1 and "--iterations must be 4096 to 16384" in few.stderr


def test_cli_groups_describe_shows_offsets_lag_and_owners(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, 2)
    group = f"cli-{topic_name}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(10):
        producer.send(topic_name, f"r{i}".encode(), partition=i % 2)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False, client_id="cli-test")
    got = 0
    while got < 4:
        got += sum(len(v) for v in consumer.poll(timeout_ms=1000, max_records=4).values())
    consumer.commit({TopicPartition(topic_name, 0): OffsetAndMetadata(2, "", -1)})
    described = cli(broker, "groups", "describe", "--group", group)
    assert described.returncode == 0, described.stderr
    rows = {tuple(line.split("\t")[1:3]): line.split("\t") for line in described.stdout.splitlines()[2:]}
    assert rows[(topic_name, "0")][3:6] == ["2", "5", "3"] and rows[(topic_name, "0")][8] == "cli-test"
    assert rows[(topic_name, "1")][3:6] == ["-", "5", "-"]
    assert "is Stable" in described.stdout
    assert group in cli(broker, "groups", "list").stdout
    assert cli(broker, "groups", "delete", "--group", group).returncode == 1   # NON_EMPTY_GROUP
    consumer.close()
    deleted = cli(broker, "groups", "delete", "--group", group)
    assert deleted.returncode == 0, deleted.stderr


def test_cli_groups_describe_shows_a_consumer_groups_epochs_and_assignments(broker, topic_name):
    from confluent_kafka import Consumer
    make_topic(broker.bootstrap, topic_name, 2)
    group = f"cli-848-{topic_name}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                         "client.id": "cli-848"})
    consumer.subscribe([topic_name])
    try:
        while len(consumer.assignment()) < 2:
            consumer.poll(0.1)
        described = cli(broker, "groups", "describe", "--group", group)
        assert described.returncode == 0, described.stderr
        lines = described.stdout.splitlines()
        assert lines[0].startswith(f"Group {group} is Stable (consumer protocol, assignor uniform, group epoch 1")
        owners = {tuple(line.split("\t")[1:3]): line.split("\t")[8] for line in lines[2:4]}
        assert owners == {(topic_name, "0"): "cli-848", (topic_name, "1"): "cli-848"}
        member = lines[5].split("\t")
        both = f"{topic_name}-0,{topic_name}-1"
        # protocol, epoch, assigned, target
        assert lines[4].startswith("MEMBER-ID\t") and member[2:] == ["consumer", "1", both, both]
        listed = [line.split("\t") for line in cli(broker, "groups", "list").stdout.splitlines()]
        assert [group, "Stable", "consumer", "consumer"] in listed
    finally:
        consumer.close()


def test_data_and_topic_configs_survive_a_clean_restart(fresh_broker):
    broker = fresh_broker.start()
    make_topic(broker.bootstrap, "kept", partitions=2, configs={"retention.ms": "123456"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(200):
        producer.send("kept", value=b"%d" % i, partition=i % 2)
    producer.flush()
    producer.close()
    assert broker.stop() == 0
    broker.start()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kept")])["topic"]["kept"]
        assert configs["retention.ms"]["value"] == "123456"
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    tps = [TopicPartition("kept", 0), TopicPartition("kept", 1)]
    assert consumer.end_offsets(tps) == {tps[0]: 100, tps[1]: 100}
    consumer.close()


def test_retention_override_takes_effect_without_restart(fresh_broker):
    fresh_broker.overrides.update({"log.retention.check.interval.ms": "200", "log.segment.delete.delay.ms": "0"})
    broker = fresh_broker.start()
    make_topic(broker.bootstrap, "shrinking", configs={"internal.segment.bytes": "2000"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0, batch_size=500)
    for i in range(100):
        producer.send("shrinking", value=b"x" * 100, partition=0).get(10)
    producer.close()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    tp = TopicPartition("shrinking", 0)
    try:
        assert consumer.beginning_offsets([tp])[tp] == 0
        # (confluent-kafka's IncrementalAlterConfigs: kafka-python's admin refuses a name DescribeConfigs does not
        # list, which Kafka's internal.segment.bytes never is)
        import confluent_kafka.admin as ck
        resource = ck.ConfigResource("topic", "shrinking", incremental_configs=[
            ck.ConfigEntry(name, value, incremental_operation=ck.AlterConfigOpType.SET)
            for name, value in (("internal.segment.bytes", "2000"), ("retention.bytes", "3000"))])
        altering = ck.AdminClient({"bootstrap.servers": broker.bootstrap})
        altering.incremental_alter_configs([resource])[resource].result(10)
        wait_until(lambda: consumer.beginning_offsets([tp])[tp] > 0, 10, 0.1, "size retention moving the log start")
        start = consumer.beginning_offsets([tp])[tp]
        assert 0 < start < 100, "size retention did not advance the log start offset"
        assert consumer.end_offsets([tp])[tp] == 100
    finally:
        admin.close()
        consumer.close()


def test_time_retention_empties_a_topic_whose_every_record_is_past_it(fresh_broker):
    """As Kafka: records all older than retention.ms go, the active segment too; the log start moves to the log
    end, a consumer reading from the beginning gets only what is written after, and offsets go on."""
    fresh_broker.overrides.update({"log.retention.check.interval.ms": "200", "log.segment.delete.delay.ms": "0"})
    broker = fresh_broker.start()
    make_topic(broker.bootstrap, "expired", configs={"retention.ms": "60000"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
    old = int(time.time() * 1000) - 3_600_000
    for i in range(3):
        producer.send("expired", value=b"old %d" % i, partition=0, timestamp_ms=old).get(10)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000)
    tp = TopicPartition("expired", 0)
    try:
        wait_until(lambda: consumer.beginning_offsets([tp])[tp] >= 3, 10, 0.1, "time retention moving the log start")
        assert (consumer.beginning_offsets([tp])[tp], consumer.end_offsets([tp])[tp]) == (3, 3)
        assert producer.send("expired", value=b"new", partition=0).get(10).offset == 3
        consumer.assign([tp])
        consumer.seek(tp, 0)   # (below the log start: OFFSET_OUT_OF_RANGE, reset to the earliest, 3)
        got = next(consumer)
        assert (got.offset, got.value) == (3, b"new")
    finally:
        producer.close()
        consumer.close()


async def test_list_offsets_max_timestamp_and_describe_cluster(broker, topic_name):
    from kbroker.client.connection import KafkaConnection
    from kbroker.protocol.errors import ErrorCode
    from kbroker.protocol.records import build_batch

    conn = await KafkaConnection.open("127.0.0.1", broker.port)
    try:
        created = await conn.request(19, 7, {"topics": [{"name": topic_name, "num_partitions": 1,
                                                         "replication_factor": 1}], "timeout_ms": 5000})
        assert created.topics[0].error_code == 0
        for ts in (5000, 9000, 7000):   # the largest timestamp is not the last record
            resp = await conn.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
                {"name": topic_name, "partition_data": [{"index": 0, "records": build_batch(
                    [(None, b"v", [])], timestamp_ms=ts)}]}]})
            assert resp.responses[0].partition_responses[0].error_code == 0

        async def list_offsets(timestamp, version=7):
            r = await conn.request(2, version, {"replica_id": -1, "topics": [{"name": topic_name, "partitions": [
                {"partition_index": 0, "timestamp": timestamp}]}]})
            return r.topics[0].partitions[0]

        newest = await list_offsets(-3)
        assert (newest.error_code, newest.offset, newest.timestamp) == (0, 1, 9000)
        assert (await list_offsets(-3, version=6)).error_code == ErrorCode.UNSUPPORTED_VERSION  # before v7
        assert (await list_offsets(-2)).offset == 0 and (await list_offsets(-1)).offset == 3
        assert (await list_offsets(6000)).offset == 1

        cluster = await conn.request(60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 1})
        assert cluster.error_code == 0 and cluster.cluster_id
        assert [(b.broker_id, b.port) for b in cluster.brokers] == [(0, broker.port)]
    finally:
        await conn.close()


@pytest.mark.parametrize("sendfile", ["true", "false"])
def test_large_fetch_regions_serve_the_same_bytes(fresh_broker, sendfile):
    """Regions of 64 KiB and more go out with os.sendfile (the default) or in chunks read one at a time
    (kbroker.fetch.sendfile=false, as under TLS)."""
    fresh_broker.overrides["kbroker.fetch.sendfile"] = sendfile
    broker = fresh_broker.start()
    make_topic(broker.bootstrap, "sent", partitions=1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, batch_size=256 * 1024, linger_ms=20)
    values = [(b"%06d-" % i) * 170 for i in range(3000)]         # ~3 MB in batches far above 64 KiB
    for v in values:
        producer.send("sent", value=v, partition=0)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    consumer.assign([TopicPartition("sent", 0)])
    got = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            got += [m.value for msgs in consumer.poll(timeout_ms=500).values() for m in msgs]
    finally:
        consumer.close()
    assert got == values
    assert broker.stop() == 0


def test_each_listener_answers_metadata_with_its_own_endpoints(tmp_path):
    """A client on the internal listener is told internal addresses, one on the external listener external
    ones, as Kafka answers per listener (docker-compose relies on it)."""
    import asyncio

    from kbroker.broker.cluster.zookeeper_server import free_port
    from kbroker.client.connection import KafkaConnection
    from tests.brokerproc import BrokerProcess

    internal = free_port()
    proc = BrokerProcess(str(tmp_path / "data"), {
        "listeners": f"PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:{internal}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"}).start()

    async def advertised(port: int) -> list[tuple[str, int]]:
        conn = await KafkaConnection.open("127.0.0.1", port, client_id="listener-test")
        try:
            meta = await conn.request(3, 9, {"topics": [], "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False})
            coordinator = await conn.request(10, 3, {"key": "g", "key_type": 0})
        finally:
            await conn.close()
        return [(b.host, b.port) for b in meta.brokers] + [(coordinator.host, coordinator.port)]

    try:
        assert asyncio.run(advertised(proc.port)) == [("127.0.0.1", proc.port)] * 2
        assert asyncio.run(advertised(internal)) == [("127.0.0.1", internal)] * 2
    finally:
        assert proc.stop() == 0
