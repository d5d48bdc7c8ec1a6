"""Dynamic broker configs through confluent-kafka's and kafka-python's admin clients and ``kbroker configs``:
each key's source and read-only flag described truthfully; a change applies at once, without a restart, and
survives one; this broker's value beats the cluster-wide default, which beats the static one; refusals come
with Kafka's errors; and in a cluster the default reaches every broker through ZooKeeper."""

from __future__ import annotations


import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewTopic, ResourceType)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType

from tests.cluster import batches, wait_until
from tests.integration.test_connection_limits import api_versions, connect
from tests.integration.test_operations import cli

pytestmark = pytest.mark.timeout(180)

ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 33, 44
SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE


def describe(bootstrap: str, broker_id: str) -> dict[str, ConfigEntry]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER, broker_id)
    return admin.describe_configs([resource])[resource].result(30)


def alter(bootstrap: str, broker_id: str, **ops: tuple) -> None:
    """IncrementalAlterConfigs on one broker: key=(op, value), with ``_`` for ``.`` in the key."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=op) for k, (op, v) in ops.items()]
    resource = ConfigResource(ResourceType.BROKER, broker_id, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(30)


def alter_default(broker, *args: str) -> None:
    """The cluster-wide default (a resource with an empty name, which neither confluent-kafka nor kafka-python
    can name) through ``kbroker configs --entity-default``, as kafka-configs does it."""
    result = cli(broker, "configs", "alter", "--entity-type", "brokers", "--entity-default", *args)
    assert result.returncode == 0, result.stdout + result.stderr


def default_configs(broker) -> dict[str, str]:
    """The cluster-wide default's configs as ``kbroker configs describe --entity-default`` prints them."""
    out = cli(broker, "configs", "describe", "--entity-type", "brokers", "--entity-default").stdout
    lines = [line.strip() for line in out.splitlines()[1:] if line.strip()]
    assert all(line.endswith("(DYNAMIC_DEFAULT_BROKER_CONFIG)") for line in lines), out
    return dict(line.split(" ", 1)[0].split("=", 1) for line in lines)


def produce_one(bootstrap: str, topic: str, size: int) -> KafkaError | None:
    """One record of ``size`` bytes with retries off: the broker's answer (None when written)."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 10_000_000, "retries": 0,
                         "enable.idempotence": False})
    result = []
    producer.produce(topic, b"x" * size, on_delivery=lambda err, msg: result.append(err))
    producer.flush(30)
    return result[0]


def test_broker_configs_report_their_source_and_whether_they_change_at_runtime(broker):
    configs = describe(broker.bootstrap, "0")
    assert configs["log.cleaner.backoff.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value   # an --override
    assert configs["message.max.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["message.max.bytes"].value == "1048588"
    dynamic = {"message.max.bytes", "log.retention.ms", "num.replica.fetchers", "max.connections.per.ip",
               "advertised.listeners", "log.cleaner.backoff.ms", "min.insync.replicas"}
    assert all(not configs[k].is_read_only for k in dynamic)
    # The three copy throttles are Kafka's quota configs, outside its KafkaConfig: described only once a dynamic
    # layer sets them (then read-only, as Kafka shows them), unlimited until then.
    assert not {"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                "replica.alter.log.dirs.io.max.bytes.per.second"} & set(configs)
    assert all(configs[k].is_read_only for k in ("broker.id", "log.dirs", "listeners", "zookeeper.connect"))
    assert configs["ssl.key.password"].is_sensitive and configs["ssl.key.password"].value is None
    # kafka-python describes it the way its own suite checks it (a 3.x broker: advertised.listeners dynamic)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        entry = admin.describe_configs([KConfigResource(ConfigResourceType.BROKER, 0)],
                                       config_filter="all")["broker"]["0"]["advertised.listeners"]
    finally:
        admin.close()
    assert entry["read_only"] is False and entry["config_source"] == "DEFAULT_CONFIG"


def test_a_change_applies_at_once_beats_the_layers_below_and_survives_a_restart(fresh_broker, topic_name):
    bootstrap = fresh_broker.start().bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    assert produce_one(bootstrap, topic_name, 200_000) is None

    alter_default(fresh_broker, "--add-config", "message.max.bytes=100000")
    assert produce_one(bootstrap, topic_name, 200_000).code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert default_configs(fresh_broker) == {"message.max.bytes": "100000"}
    topic = ConfigResource(ResourceType.TOPIC, topic_name)
    entry = admin.describe_configs([topic])[topic].result(30)["max.message.bytes"]
    assert (entry.value, entry.source) == ("100000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)

    alter(bootstrap, "0", message_max_bytes=(SET, "300000"))
    assert produce_one(bootstrap, topic_name, 200_000) is None
    entry = describe(bootstrap, "0")["message.max.bytes"]
    assert (entry.value, entry.source) == ("300000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap)   # (confluent-kafka keys synonyms by name: one left)
    try:
        entry = kadmin.describe_configs([KConfigResource(ConfigResourceType.BROKER, 0)], include_synonyms=True,
                                        config_filter="all")["broker"]["0"]["message.max.bytes"]
    finally:
        kadmin.close()
    assert [(s["value"], s["source"]) for s in entry["synonyms"]] == [
        ("300000", "DYNAMIC_BROKER_CONFIG"), ("100000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("1048588", "DEFAULT_CONFIG")]

    assert fresh_broker.stop() == 0
    fresh_broker.port = 0
    fresh_broker.start()
    bootstrap = fresh_broker.bootstrap
    entry = describe(bootstrap, "0")["message.max.bytes"]
    assert (entry.value, entry.source) == ("300000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert produce_one(bootstrap, topic_name, 200_000) is None

    alter(bootstrap, "0", message_max_bytes=(DELETE, None))
    assert describe(bootstrap, "0")["message.max.bytes"].value == "100000"
    assert produce_one(bootstrap, topic_name, 200_000).code() == KafkaError.MSG_SIZE_TOO_LARGE
    alter_default(fresh_broker, "--delete-config", "message.max.bytes")
    entry = describe(bootstrap, "0")["message.max.bytes"]
    assert (entry.value, entry.source) == ("1048588", ConfigSource.DEFAULT_CONFIG.value)
    assert default_configs(fresh_broker) == {}


def test_a_lower_connection_limit_refuses_new_connections_and_keeps_the_open_ones(fresh_broker):
    fresh_broker.start()
    held = [connect(fresh_broker) for _ in range(3)]
    assert all(api_versions(s) for s in held)
    alter_default(fresh_broker, "--add-config", "max.connections.per.ip=3")
    wait_until(lambda: fresh_broker.connections() == 3, 10, 0.02, "the admin client's connections closed")
    refused = connect(fresh_broker)
    assert not api_versions(refused)
    assert all(api_versions(s, 2) for s in held)
    for s in held + [refused]:
        s.close()
    alter_default(fresh_broker, "--delete-config", "max.connections.per.ip")
    assert default_configs(fresh_broker) == {}
    again = connect(fresh_broker)
    assert api_versions(again)
    again.close()


def test_advertised_listeners_changed_at_runtime_are_what_metadata_tells_clients(fresh_broker):
    fresh_broker.start()
    port = fresh_broker.port
    alter(fresh_broker.bootstrap, "0", advertised_listeners=(SET, f"PLAINTEXT://localhost:{port}"))
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    assert [(b.host, b.port) for b in admin.list_topics(timeout=10).brokers.values()] == [("localhost", port)]


async def test_refusals_name_the_problem_and_change_nothing(broker, conn):
    async def alter_raw(name: str, key: str, value: str | None, validate_only: bool = False):
        response = await conn.request(INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
            {"resource_type": 4, "resource_name": name, "configs": [
                {"name": key, "config_operation": 0, "value": value}]}], "validate_only": validate_only})
        r = response.responses[0]
        return r.error_code, r.error_message

    # (INVALID_REQUEST, as Kafka 4.2 answers a broker config it will not take: tests/reference)
    code, message = await alter_raw("0", "broker.id", "5")
    assert code == 42 and "Cannot update these configs dynamically" in message
    code, message = await alter_raw("0", "message.max.bytes", "lots")
    assert code == 42 and "message.max.bytes" in message
    code, message = await alter_raw("0", "num.replica.fetchers", "10")
    assert code == 42 and "num.replica.fetchers" in message
    code, message = await alter_raw("", "advertised.listeners", "PLAINTEXT://elsewhere:1")
    assert code == 42 and "broker id must be specified" in message
    code, message = await alter_raw("7", "message.max.bytes", "1000")
    assert code == 42 and "Unexpected broker id" in message                              # INVALID_REQUEST
    code, message = await alter_raw("0", "message.max.bytes", "1000", validate_only=True)
    assert (code, message) == (0, None)
    assert describe(broker.bootstrap, "0")["message.max.bytes"].value == "1048588"


def test_the_cluster_wide_default_reaches_every_broker_fetchers_resize_and_endpoints_move(cluster, topic_name):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic_name, 3, 3)])[topic_name].result(30)
    alter_default(cluster.brokers[1], "--add-config", "log.retention.bytes=7777777")
    try:
        for b in cluster.brokers:
            wait_until(lambda b=b: describe(cluster.bootstrap, str(b))["log.retention.bytes"].value == "7777777",
                       20, 0.2, f"broker {b} has the default")
        topic = ConfigResource(ResourceType.TOPIC, topic_name)
        assert admin.describe_configs([topic])[topic].result(30)["retention.bytes"].value == "7777777"
        alter(cluster.brokers[2].bootstrap, "2", num_replica_fetchers=(SET, "2"))
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(300):
            producer.produce(topic_name, b"v%d" % i, partition=i % 3)
        assert producer.flush(30) == 0
        for p in range(3):
            wait_until(lambda p=p: len({tuple(batches(b.data_dir, topic_name, p))
                                        for b in cluster.brokers.values()}) == 1, 30, 0.2,
                       f"replicas of partition {p} identical")
        # broker 3 advertises itself anew: its registration changes and the controller tells every broker
        port = cluster.brokers[3].port
        alter(cluster.brokers[3].bootstrap, "3", advertised_listeners=(SET, f"PLAINTEXT://localhost:{port}"))
        wait_until(lambda: AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap}).list_topics(
            timeout=10).brokers[3].host == "localhost", 20, 0.2, "broker 1 tells clients broker 3's new address")
    finally:
        alter_default(cluster.brokers[1], "--delete-config", "log.retention.bytes")
        alter(cluster.brokers[2].bootstrap, "2", num_replica_fetchers=(DELETE, None))
        alter(cluster.brokers[3].bootstrap, "3", advertised_listeners=(DELETE, None))


def test_kafka_configs_style_cli_describes_and_alters_a_broker(fresh_broker):
    fresh_broker.start()
    altered = cli(fresh_broker, "configs", "alter", "--entity-type", "brokers", "--entity-name", "0",
                  "--add-config", "log.cleanup.policy=[compact,delete],log.retention.ms=86400000")
    assert altered.returncode == 0, altered.stdout + altered.stderr
    described = cli(fresh_broker, "configs", "describe", "--entity-type", "brokers", "--entity-name", "0").stdout
    assert "log.cleanup.policy=compact,delete (DYNAMIC_BROKER_CONFIG)" in described
    assert "log.retention.ms=86400000 (DYNAMIC_BROKER_CONFIG)" in described
    refused = cli(fresh_broker, "configs", "alter", "--entity-type", "brokers", "--entity-name", "0",
                  "--add-config", "log.dirs=/elsewhere")
    assert refused.returncode == 1 and "Cannot update these configs dynamically" in refused.stdout


def test_a_loggers_level_changes_at_once_and_goes_back_to_the_level_above(fresh_broker):
    """BROKER_LOGGER, as ``kafka-configs --entity-type broker-loggers``: the connection logger at DEBUG logs each
    request, deleting its level returns it to root's (INFO) and the debug lines stop; bad levels and names are
    refused with Kafka's messages."""
    fresh_broker.start()

    def loggers() -> dict[str, str]:
        out = cli(fresh_broker, "configs", "describe", "--entity-type", "broker-loggers", "--entity-name", "0")
        lines = [line.strip() for line in out.stdout.splitlines()[1:] if line.strip()]
        assert all(line.endswith("(DYNAMIC_BROKER_LOGGER_CONFIG)") for line in lines), out.stdout
        return dict(line.split(" ", 1)[0].split("=", 1) for line in lines)

    def requests_logged() -> int:
        with open(fresh_broker.log_path, encoding="utf-8") as f:
            return f.read().count("request_received")

    def alter_loggers(*args: str):
        return cli(fresh_broker, "configs", "alter", "--entity-type", "broker-loggers", "--entity-name", "0", *args)

    before = loggers()
    assert before["root"] == "INFO" and before["broker.connection"] == "INFO"
    assert requests_logged() == 0
    assert alter_loggers("--add-config", "broker.connection=DEBUG").returncode == 0
    assert loggers()["broker.connection"] == "DEBUG"
    describe(fresh_broker.bootstrap, "0")
    assert requests_logged() > 0
    assert alter_loggers("--delete-config", "broker.connection").returncode == 0
    assert loggers()["broker.connection"] == "INFO"
    seen = requests_logged()
    describe(fresh_broker.bootstrap, "0")
    assert requests_logged() == seen
    refused = alter_loggers("--add-config", "broker.connection=LOUD")
    assert refused.returncode == 1 and "INVALID_CONFIG" in refused.stdout and "LOUD" in refused.stdout
    refused = alter_loggers("--delete-config", "root")
    assert refused.returncode == 1 and "root logger" in refused.stdout
    refused = alter_loggers("--add-config", "org.apache.kafka=DEBUG")
    assert refused.returncode == 1 and "does not exist" in refused.stdout


async def test_legacy_alter_configs_replaces_the_set_and_append_extends_a_list(fresh_broker):
    """AlterConfigs (legacy) replaces a broker's whole dynamic set, through kafka-python and then a raw request
    naming one key (the others leave the set); APPEND and SUBTRACT (confluent-kafka) start from the stored list
    or else the default, as Kafka's prepareIncrementalConfigs does."""
    from kbroker.client.connection import KafkaConnection

    fresh_broker.start()
    admin = KafkaAdminClient(bootstrap_servers=fresh_broker.bootstrap)
    try:
        admin.alter_configs([KConfigResource(ConfigResourceType.BROKER, "0", configs={
            "log.retention.ms": "1234", "log.segment.bytes": "2000000"})], incremental=False)
    finally:
        admin.close()

    def dynamic() -> dict[str, str]:
        return {k: e.value for k, e in describe(fresh_broker.bootstrap, "0").items()
                if e.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value}
    assert dynamic() == {"log.retention.ms": "1234", "log.segment.bytes": "2000000"}
    conn = await KafkaConnection.open("127.0.0.1", fresh_broker.port, client_id="legacy")
    try:
        response = await conn.request(33, 1, {"resources": [{"resource_type": 4, "resource_name": "0", "configs": [
            {"name": "log.retention.ms", "value": "99"}]}], "validate_only": False})
        assert response.responses[0].error_code == 0
    finally:
        await conn.close()
    assert dynamic() == {"log.retention.ms": "99"}
    alter(fresh_broker.bootstrap, "0", log_cleanup_policy=(AlterConfigOpType.APPEND, "compact"))
    assert describe(fresh_broker.bootstrap, "0")["log.cleanup.policy"].value == "delete,compact"
    alter(fresh_broker.bootstrap, "0", log_cleanup_policy=(AlterConfigOpType.SUBTRACT, "delete"))
    assert describe(fresh_broker.bootstrap, "0")["log.cleanup.policy"].value == "compact"


async def test_a_custom_broker_config_is_kept_and_described_without_its_value(broker, conn):
    """A name kbroker does not define is a custom config, as Kafka allows on brokers: stored by either
    AlterConfigs API, described (sensitive, so without its value), deleted again; nothing else changes."""
    before = describe(broker.bootstrap, "0")["message.max.bytes"].value
    legacy = await conn.request(ALTER_CONFIGS, 2, {"resources": [{"resource_type": 4, "resource_name": "0",
                                                                  "configs": [{"name": "plugin.a", "value": "1"}]}],
                                                   "validate_only": False})
    assert legacy.responses[0].error_code == 0
    incremental = await conn.request(INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": 4, "resource_name": "0", "configs": [
            {"name": "plugin.b", "config_operation": 0, "value": "2"}]}], "validate_only": False})
    assert incremental.responses[0].error_code == 0
    described = describe(broker.bootstrap, "0")
    for key in ("plugin.a", "plugin.b"):
        assert described[key].is_sensitive and described[key].value is None
    assert described["message.max.bytes"].value == before
    await conn.request(INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": 4, "resource_name": "0", "configs": [
            {"name": key, "config_operation": 1, "value": None} for key in ("plugin.a", "plugin.b")]}],
        "validate_only": False})
    assert not {"plugin.a", "plugin.b"} & describe(broker.bootstrap, "0").keys()
