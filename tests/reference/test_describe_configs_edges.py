"""DescribeConfigs at its edges, as raw frames side by side: a topic that is not there or has an invalid name,
another broker's id or one that is no number, the default broker resource, keys no config has, loggers
(BROKER_LOGGER), an unknown resource type, and the synonyms and documentation v3+ adds."""

from __future__ import annotations

import pytest

from tests.reference.differential import call, documented, same
from tests.waiting import settled
from tests.reference.test_configs import KBROKER_ONLY_TOPIC_CONFIGS, TOPIC_CONFIGS_NOT_IN_KBROKER
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference

DESCRIBE_CONFIGS = 32
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32


COMMON_CONFIGS = {"cleanup.policy", "retention.ms", "segment.bytes", "max.message.bytes"}
CASES = {   # case -> (resource type, resource name as a function of (topic, broker id), keys)
    "a topic not there": (TOPIC, lambda t, me: t + "-none", None),
    "a topic with an invalid name": (TOPIC, lambda t, me: "bad/name", None),
    "an empty topic name": (TOPIC, lambda t, me: "", None),
    "keys no config has": (TOPIC, lambda t, me: t, ["no.such.config", "retention.ms"]),
    "an empty list of keys": (TOPIC, lambda t, me: t, []),
    "another broker": (BROKER, lambda t, me: str(me + 7), ["log.retention.hours"]),
    "a broker id that is no number": (BROKER, lambda t, me: "one", ["log.retention.hours"]),
    "the default broker resource": (BROKER, lambda t, me: "", ["log.retention.hours"]),
    "an unknown logger": (BROKER_LOGGER, lambda t, me: str(me), ["no.such.logger"]),
    "another broker's loggers": (BROKER_LOGGER, lambda t, me: str(me + 7), None),
    "an unknown resource type": (99, lambda t, me: t, None),
    "a group": (GROUP, lambda t, me: f"g-{t}", ["consumer.session.timeout.ms"]),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_describe_configs_of_odd_resources(targets, topic, case):
    resource_type, name, keys = CASES[case]

    async def scenario(target):
        await create(target, topic)
        me = 1 if target.name == "kafka" else 0
        answer = await call(target, DESCRIBE_CONFIGS, 4, {"resources": [{
            "resource_type": resource_type, "resource_name": name(topic, me), "configuration_keys": keys}],
            "include_synonyms": False, "include_documentation": False})
        if case == "an empty list of keys":   # every config (the two sets differ: tests/reference/test_configs)
            (r,) = answer.results
            return r.error_code, len(r.configs) > 20, sorted({c.name for c in r.configs} & COMMON_CONFIGS)
        # (the message: "" where Kafka describes the resource, else whether there is one: free text)
        return [(r.error_code, r.error_message if r.error_code == 0 else r.error_message is not None,
                 r.resource_type, sorted((c.name, c.value, c.read_only, c.config_source, c.is_sensitive)
                                         for c in r.configs))
                for r in answer.results]
    await same(targets, scenario)


async def _described(target, topic, version: int, documentation: bool = False):
    await create(target, topic, retention_ms=5000)
    answer = await call(target, DESCRIBE_CONFIGS, version, {"resources": [{
        "resource_type": TOPIC, "resource_name": topic, "configuration_keys": ["retention.ms", "cleanup.policy"]}],
        "include_synonyms": True, "include_documentation": True})
    if documentation:
        return sorted((c.name, c.get("documentation") is not None) for r in answer.results for c in r.configs)
    return sorted((c.name, c.value, c.get("config_source"), c.get("config_type"),
                   [(s.name, s.value, s.source) for s in c.get("synonyms") or []])
                  for r in answer.results for c in r.configs)


@pytest.mark.parametrize("version", [1, 2, 3, 4])
async def test_synonyms_of_a_topic_config(targets, topic, version):
    """A topic's override, then the broker's layers that set a value (a default that is null is no synonym)."""
    await same(targets, _described, topic, version)


@documented("DescribeConfigs carries no documentation")
async def test_documentation_of_a_topic_config(targets, topic):
    await same(targets, _described, topic, 4, True)


async def test_a_topics_configs_with_their_synonyms_whole(targets, topic):
    """A topic with two overrides on a broker with two dynamic cluster-wide defaults: every config's value,
    source, type and synonyms (the topic's value, then the broker's layers of its synonyms; none for a config
    with no broker synonym), in Kafka's order. Left out: the configs only one of the two has
    (test_configs.py says which) and min.insync.replicas' source (Kafka 4 sets it cluster-wide at format)."""
    left_out = TOPIC_CONFIGS_NOT_IN_KBROKER | KBROKER_ONLY_TOPIC_CONFIGS | {"min.insync.replicas"}
    defaults = {"log.retention.bytes": "99999999", "log.cleaner.delete.retention.ms": "4444444"}

    async def alter_defaults(target, operation):
        await call(target, 44, 1, {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
            {"name": k, "config_operation": operation, "value": v if operation == 0 else None}
            for k, v in defaults.items()]}], "validate_only": False})

    async def scenario(target):
        await create(target, topic, 1, retention_ms=123456, cleanup_policy="compact")
        await alter_defaults(target, 0)
        try:
            async def described():
                answer = await call(target, 32, 4, {"resources": [{"resource_type": 2, "resource_name": topic,
                                                                    "configuration_keys": None}],
                                                    "include_synonyms": True, "include_documentation": False})
                return [(c.name, c.value, c.read_only, c.config_source, c.is_sensitive, c.config_type,
                         [(s.name, s.value, s.source) for s in c.synonyms])
                        for c in answer.results[0].configs if c.name not in left_out]
            # (Kafka's broker applies a dynamic default a moment after the controller took it)
            return await settled(described, lambda d: ("retention.bytes", "99999999") in [c[:2] for c in d])
        finally:
            await alter_defaults(target, 1)
    await same(targets, scenario)
