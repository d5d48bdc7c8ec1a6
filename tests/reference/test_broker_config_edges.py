"""Dynamic broker configs at their edges, side by side and validate-only (the reference node is shared): values
refused by type, floor, Kafka's requirements and its reconfiguration rules, in Kafka's words; APPEND and SUBTRACT
on configs that are no lists; Kafka's thread pools; and the quota configs DescribeConfigs shows only when set.

(Kept differences, docs/COMPATIBILITY.md: APPEND or SUBTRACT on a name outside Kafka's KafkaConfig, which Kafka
answers UNKNOWN_SERVER_ERROR; min.insync.replicas and legacy AlterConfigs, which KRaft's eligible leader
replicas refuse; advertised.listeners, which ZooKeeper-mode Kafka changed at runtime.)"""

from __future__ import annotations

import pytest

from tests.reference.differential import call, same

pytestmark = pytest.mark.reference

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
BROKER = 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

CASES = {   # case -> [(name, operation, value)]
    "not a number": [("message.max.bytes", SET, "zstd")],
    "below a floor": [("log.cleaner.backoff.ms", SET, "-1")],
    "a ratio above 1": [("log.cleaner.min.cleanable.ratio", SET, "2")],
    "not a boolean": [("unclean.leader.election.enable", SET, "2")],
    "a timestamp type": [("log.message.timestamp.type", SET, " 1 ")],
    "a retention of 0": [("log.retention.ms", SET, "0")],
    "a retention below -1": [("log.retention.ms", SET, "-5")],
    "a roll of 0": [("log.roll.ms", SET, "0")],
    "a negative roll jitter": [("log.roll.jitter.ms", SET, "-1")],
    "APPEND to no list": [("log.retention.bytes", APPEND, "5")],
    "SUBTRACT from no list": [("num.replica.fetchers", SUBTRACT, "1")],
    "APPEND to a list": [("log.cleanup.policy", APPEND, "compact")],
    "fetchers more than doubled": [("num.replica.fetchers", SET, "+3")],
    "I/O threads more than doubled": [("num.io.threads", SET, " 17")],
    "I/O threads halved": [("num.io.threads", SET, "4")],
    "network threads more than doubled": [("num.network.threads", SET, "7")],
    "background threads at 0": [("background.threads", SET, "0")],
    "no cleaner threads": [("log.cleaner.threads", SET, "0")],
    "cleaner threads past the dedupe buffer": [("log.cleaner.threads", SET, "128")],
    "cleaner threads more than doubled": [("log.cleaner.threads", SET, "3")],
    "cleaner threads doubled": [("log.cleaner.threads", SET, "2")],
    "negative cleaner threads": [("log.cleaner.threads", SET, "-1")],
    "no connections": [("max.connections", SET, "0")],
    "no connections per IP and no overrides": [("max.connections.per.ip", SET, "0")],
    "an override with no count": [("max.connections.per.ip.overrides", SET, " 5000")],
    "an override whose count is no number": [("max.connections.per.ip.overrides", SET, "host:many")],
    "overrides of empty parts": [("max.connections.per.ip.overrides", SET, " , ")],
    "a config Kafka keeps static": [("log.dirs", SET, "/tmp/x")],
}


@pytest.mark.parametrize("case", list(CASES))
async def test_dynamic_broker_config_changes_are_refused_as_kafka_refuses_them(targets, kafka, kbroker, case):
    async def scenario(target):
        me = "1" if target.name == "kafka" else "0"
        answer = await call(target, INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": BROKER, "resource_name": me, "configs": [
                {"name": n, "config_operation": op, "value": v} for n, op, v in CASES[case]]}], "validate_only": True})
        (r,) = answer.responses
        return r.error_code, r.error_message
    await same(targets, scenario)


async def test_quota_configs_are_described_only_when_set(targets, kafka, kbroker):
    names = ["leader.replication.throttled.rate", "follower.replication.throttled.rate",
             "replica.alter.log.dirs.io.max.bytes.per.second", "num.io.threads", "background.threads"]

    async def scenario(target):
        me = "1" if target.name == "kafka" else "0"
        answer = await call(target, DESCRIBE_CONFIGS, 4, {"resources": [{
            "resource_type": BROKER, "resource_name": me, "configuration_keys": names}],
            "include_synonyms": True, "include_documentation": False})
        (r,) = answer.results
        return sorted((c.name, c.value, c.read_only, c.config_source, c.config_type) for c in r.configs)
    await same(targets, scenario)
