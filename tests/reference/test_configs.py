"""DescribeConfigs and IncrementalAlterConfigs: the defaults kbroker shows for every config it supports,
and the errors it gives for values Kafka refuses."""

import pytest

from tests.reference.differential import call, configs, same
from tests.waiting import settled
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference

CREATE_TOPICS, DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 19, 32, 33, 44
TOPIC, BROKER = 2, 4

# Topic configs kbroker does not have, for the reason docs/COMPATIBILITY.md gives: tiered storage.
TOPIC_CONFIGS_NOT_IN_KBROKER = {
    "remote.storage.enable", "local.retention.ms", "local.retention.bytes", "remote.log.copy.disable",
    "remote.log.delete.on.disable",
}
# What Kafka 4 removed and kbroker still accepts and describes, without effect (3.x clients set them).
KBROKER_ONLY_TOPIC_CONFIGS = {"message.format.version", "message.downconversion.enable"}


async def describe(target, resource_type, name, keys=None):
    answer = await call(target, DESCRIBE_CONFIGS, 4, {"resources": [{
        "resource_type": resource_type, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": False, "include_documentation": False})
    (result,) = answer.results
    return result.error_code, configs(result.configs)


async def test_a_new_topics_configs_are_kafkas_defaults(targets, topic):
    async def scenario(target):
        await create(target, topic)
        return await describe(target, TOPIC, topic)
    async def shared(target):
        error_code, found = await scenario(target)
        found["min.insync.replicas"].pop("config_source")   # (see BROKER_FIELDS_NOT_COMPARED)
        return error_code, {k: v for k, v in found.items()
                            if k not in TOPIC_CONFIGS_NOT_IN_KBROKER | KBROKER_ONLY_TOPIC_CONFIGS}
    await same(targets, shared)


# Broker configs described otherwise, for reasons docs/COMPATIBILITY.md gives: listeners, ports and
# paths differ between any two brokers; TLS and SASL settings are read at startup by kbroker (Kafka
# reconfigures them per listener at runtime); kbroker bounds queued request bytes by default and reads
# PEM key stores only; KRaft's controller sets min.insync.replicas as a cluster default (for KIP-966).
BROKER_FIELDS_NOT_COMPARED = {
    "advertised.listeners": {"value", "read_only", "config_source"}, "listeners": {"value", "read_only"},
    "listener.security.protocol.map": {"value", "read_only", "config_source"},
    "inter.broker.listener.name": {"value", "config_source"}, "log.dirs": {"value"},
    "broker.id": {"value", "config_source"}, "node.id": {"value", "config_source"},
    "queued.max.request.bytes": {"value"}, "ssl.keystore.type": {"value", "read_only"},
    "ssl.truststore.type": {"value", "read_only"}, "min.insync.replicas": {"config_source"},
    **{name: {"read_only"} for name in (
        "sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.mechanism.inter.broker.protocol", "ssl.cipher.suites",
        "ssl.client.auth", "ssl.enabled.protocols", "ssl.endpoint.identification.algorithm", "ssl.key.password",
        "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.location",
        "ssl.truststore.certificates", "ssl.truststore.location")},
}


async def test_broker_configs_kbroker_has_are_described_as_kafka_describes_them(targets, kafka, kbroker):
    async def scenario(target):
        error_code, found = await describe(target, BROKER, "1" if target.name == "kafka" else "0")
        return error_code, found
    (k_code, k_found), (b_code, b_found) = [await scenario(t) for t in targets]
    assert k_code == b_code == 0
    shared = set(k_found) & set(b_found)
    assert len(shared) > 100

    def kept(found):
        return {n: {f: v for f, v in found[n].items() if f not in BROKER_FIELDS_NOT_COMPARED.get(n, ())}
                for n in sorted(shared)}
    from tests.reference.differential import Divergence, diff
    if kept(k_found) != kept(b_found):
        raise Divergence(diff("kafka", kept(k_found), "kbroker", kept(b_found)))


@pytest.mark.parametrize("name, value, operation", [
    ("retention.ms", "abc", 0), ("retention.ms", "-5", 0), ("segment.bytes", "12", 0), ("no.such.config", "1", 0),
    ("cleanup.policy", "compact,delete", 0), ("cleanup.policy", "compact", 2), ("cleanup.policy", "sometimes", 0),
    ("min.insync.replicas", "0", 0), ("retention.ms", None, 1), ("compression.type", "brotli", 0),
    ("max.message.bytes", "-1", 0), ("message.timestamp.type", "LogAppendTime", 0),
])
async def test_incremental_alter_topic_configs(targets, topic, name, value, operation):
    async def scenario(target):
        await create(target, topic, retention_ms=1000)
        before = await describe(target, TOPIC, topic, [name])
        answer = await call(target, INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": TOPIC, "resource_name": topic, "configs": [
                {"name": name, "config_operation": operation, "value": value}]}], "validate_only": False})
        # (each change that succeeds here changes the value; Kafka's broker describes it once its metadata
        # image has the controller's record, a moment after the answer)
        error_code, found = await settled(lambda: describe(target, TOPIC, topic, [name]),
                                          lambda got: answer.responses[0].error_code != 0 or got != before)
        return answer.responses[0].error_code, {k: (v["value"], v["config_source"]) for k, v in found.items()
                                                if k != "min.insync.replicas"}   # (BROKER_FIELDS_NOT_COMPARED)
    await same(targets, scenario)


@pytest.mark.parametrize("name, value", [
    ("log.cleaner.threads", "2"), ("log.retention.ms", "abc"), ("broker.id", "7"), ("no.such.config", "1"),
    ("message.max.bytes", "2000000"), ("log.segment.bytes", "1000"), ("log.retention.bytes", "-7"),
])
async def test_incremental_alter_broker_configs(targets, kafka, kbroker, name, value):
    async def scenario(target):
        resource = "1" if target.name == "kafka" else "0"
        answer = await call(target, INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": BROKER, "resource_name": resource, "configs": [
                {"name": name, "config_operation": 0, "value": value}]}], "validate_only": True})
        return answer.responses[0].error_code
    await same(targets, scenario)


def _kbroker_topic_configs() -> list[str]:
    from kbroker.storage.log_config import TOPIC_CONFIGS
    return sorted(set(TOPIC_CONFIGS) - KBROKER_ONLY_TOPIC_CONFIGS)


@pytest.mark.parametrize("name", _kbroker_topic_configs())
async def test_topic_config_values_kafka_refuses_kbroker_refuses(targets, topic, name):
    """Every topic config kbroker has, at the edges of Kafka's validators, by CreateTopics validate_only."""
    values = ["-2", "-1", "0", "1", "1023", "1048576", "abc", "1.5", "", "true", "compact", "delete,compact",
              "producer", "LogAppendTime", "0:1,1:1", "*", "9", "10", "17", "18", "22", "23", "-131072", "-131073"]

    async def scenario(target):
        answers = {}
        for value in values:
            answer = await call(target, CREATE_TOPICS, 7, {"topics": [{
                "name": topic, "num_partitions": 1, "replication_factor": 1,
                "configs": [{"name": name, "value": value}]}], "timeout_ms": 10000, "validate_only": True})
            answers[value] = answer.topics[0].error_code
        return answers
    await same(targets, scenario)


@pytest.mark.parametrize("legacy", [False, True])
async def test_a_custom_broker_config_is_stored_and_described(targets, kafka, kbroker, legacy):
    """A broker config name the broker does not define is a custom config (plugins read their own keys):
    stored in the broker's dynamic layer and described from it, by both AlterConfigs APIs."""
    async def scenario(target):
        resource, key = "1" if target.name == "kafka" else "0", f"custom.plugin.setting.{int(legacy)}"
        if legacy:
            answer = await call(target, ALTER_CONFIGS, 2, {"resources": [{
                "resource_type": BROKER, "resource_name": resource, "configs": [{"name": key, "value": "x"}]}],
                "validate_only": False})
        else:
            answer = await call(target, INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
                "resource_type": BROKER, "resource_name": resource, "configs": [
                    {"name": key, "config_operation": 0, "value": "x"}]}], "validate_only": False})
        _, found = await settled(lambda: describe(target, BROKER, resource, [key]),
                                 lambda got: key in got[1])
        return answer.responses[0].error_code, {k: (v["value"], v["config_source"], v["config_type"])
                                                for k, v in found.items()}
    await same(targets, scenario)


CLIENT_METRICS = 16


@pytest.mark.parametrize("name, ops", [
    ("subscription", [("metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.", 0),
                      ("interval.ms", "1000", 0), ("match", "client_id=app-.*,client_software_name=librdkafka", 0)]),
    ("appended", [("metrics", "org.apache.kafka.producer.", 2)]),
    ("subtracted", [("match", "client_id=a", 3)]),
    ("too-often", [("interval.ms", "99", 0)]),
    ("too-rarely", [("interval.ms", "3600001", 0)]),
    ("not-a-number", [("interval.ms", "soon", 0)]),
    ("bad-pattern", [("match", "client_id", 0)]),
    ("bad-attribute", [("match", "client_colour=red", 0)]),
    ("bad-regex", [("match", "client_id=(", 0)]),
    ("empty-regex", [("match", "client_id=", 0)]),        # (Java's split drops the empty part: one part)
    ("trailing-equals", [("match", "client_id=a==", 0)]),  # (and the empty parts after the last "=")
    ("no-attribute", [("match", "=a", 0)]),
    ("unknown", [("colour", "red", 0)]),
    ("", [("metrics", "*", 0)]),
])
async def test_client_metrics_subscriptions(targets, topic, name, ops):
    """KIP-714's CLIENT_METRICS resources: IncrementalAlterConfigs checks them as Kafka does, DescribeConfigs
    shows them, ListConfigResources lists them, and deleting every config removes the subscription."""
    async def scenario(target):
        resource = f"{name}-{topic}" if name else ""
        answer = await call(target, INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": CLIENT_METRICS, "resource_name": resource, "configs": [
                {"name": k, "value": v, "config_operation": op} for k, v, op in ops]}], "validate_only": False})
        error = answer.responses[0].error_code

        async def listed():
            found = await call(target, 74, 1, {"resource_types": [CLIENT_METRICS]})
            return sorted(r.resource_name for r in found.config_resources if r.resource_name == resource)
        seen = await settled(listed, lambda names: bool(names) == (error == 0))
        described = await describe(target, CLIENT_METRICS, resource) if resource else None
        if error == 0:
            await call(target, INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
                "resource_type": CLIENT_METRICS, "resource_name": resource, "configs": [
                    {"name": k, "value": None, "config_operation": 1} for k, _, _ in ops]}], "validate_only": False})
            await settled(listed, lambda names: not names)
        return error, seen, described
    await same(targets, scenario)


@pytest.mark.parametrize("resource_type, name, key", [
    (TOPIC, None, "retention.ms"), (TOPIC, None, "cleanup.policy"), (BROKER, "", "log.retention.ms"),
    (32, "null-group", "consumer.session.timeout.ms"), (CLIENT_METRICS, "null-metrics", "interval.ms"),
    (CLIENT_METRICS, "null-metrics", "metrics")])
@pytest.mark.parametrize("operation", [0, 2, 3])
async def test_a_null_value_is_refused_and_changes_nothing(targets, topic, resource_type, name, key, operation):
    """SET, APPEND or SUBTRACT of a null value: Kafka's INVALID_REQUEST, for every resource type; the resource's
    configs are as before."""
    async def scenario(target):
        await create(target, topic)
        resource = topic if name is None else name
        before = await describe(target, resource_type, resource)
        answer = await call(target, INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": resource_type, "resource_name": resource, "configs": [
                {"name": key, "value": None, "config_operation": operation}]}], "validate_only": False})
        return answer.responses[0].error_code, await describe(target, resource_type, resource) == before
    await same(targets, scenario)


async def test_a_null_value_in_legacy_alter_configs(targets, topic):
    async def scenario(target):
        await create(target, topic)
        before = await describe(target, TOPIC, topic)
        answer = await call(target, ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": TOPIC, "resource_name": topic, "configs": [{"name": "retention.ms", "value": None}]}],
            "validate_only": False})
        return answer.responses[0].error_code, await describe(target, TOPIC, topic) == before
    await same(targets, scenario)
