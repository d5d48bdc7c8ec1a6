"""IncrementalAlterConfigs and AlterConfigs at their edges, side by side: a list config appended to and subtracted
from, APPEND or SUBTRACT on a config that is no list, a resource named twice, a topic that is not there, a config
named twice in one resource, an unknown resource type; values read as Kafka's Java reads them, and the order in
which Kafka checks a resource's name and configs.

(Left out: an operation code Kafka does not know, which it answers UNKNOWN_SERVER_ERROR and kbroker
INVALID_CONFIG; a legacy AlterConfigs naming a resource twice, which Kafka 4.2 leaves unanswered.)"""

from __future__ import annotations

import pytest

from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_configs import CREATE_TOPICS, TOPIC, describe
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference

ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 33, 44
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

CASES = {   # case -> [(name, operation, value)] on the test's topic
    "append to a list": [("cleanup.policy", APPEND, "compact")],
    "subtract from a list": [("cleanup.policy", SUBTRACT, "delete")],
    "subtract what is not there": [("cleanup.policy", SUBTRACT, "compact")],
    "append to no list": [("retention.ms", APPEND, "5")],
    "subtract from no list": [("retention.ms", SUBTRACT, "5")],
    "one config twice": [("retention.ms", SET, "5000"), ("retention.ms", SET, "6000")],
    "delete what is not set": [("segment.ms", DELETE, None)],
    "append to a throttled replicas list": [("leader.replication.throttled.replicas", APPEND, "0:1")],
}


@pytest.mark.parametrize("case", list(CASES))
async def test_incremental_alter_topic_config_edges(targets, topic, case):
    async def scenario(target):
        await create(target, topic)
        names = sorted({n for n, _, _ in CASES[case]})
        before = await describe(target, TOPIC, topic, names)
        answer = await call(target, INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": TOPIC, "resource_name": topic, "configs": [
                {"name": n, "config_operation": op, "value": v} for n, op, v in CASES[case]]}],
            "validate_only": False})
        code = answer.responses[0].error_code
        _, found = await settled(lambda: describe(target, TOPIC, topic, names),
                                 lambda got: code != 0 or case == "delete what is not set" or got != before)
        return code, answer.responses[0].error_message is not None, {k: v["value"] for k, v in found.items()}
    await same(targets, scenario)


@pytest.mark.parametrize("case", ["a resource twice", "a topic not there", "an unknown resource type",
                                  "legacy: a topic not there"])
async def test_resources_refused(targets, topic, case):
    async def scenario(target):
        await create(target, topic)
        name = f"{topic}-none" if "not there" in case else topic
        kind = 99 if "unknown resource" in case else TOPIC
        resource = {"resource_type": kind, "resource_name": name}
        count = 2 if "twice" in case else 1
        if case.startswith("legacy"):
            answer = await call(target, ALTER_CONFIGS, 2, {"resources": [
                {**resource, "configs": [{"name": "retention.ms", "value": "5000"}]}] * count,
                "validate_only": False})
        else:
            answer = await call(target, INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
                {**resource, "configs": [{"name": "retention.ms", "config_operation": SET, "value": "5000"}]}] * count,
                "validate_only": False})
        return [(r.error_code, r.error_message is not None, r.resource_type) for r in answer.responses]
    await same(targets, scenario)


VALUES = {   # case -> [(name, operation, value)] on the test's topic, as Java reads each value
    "a list named twice in one value": [("cleanup.policy", SET, "compact,compact")],
    "a list with an empty part": [("cleanup.policy", SET, ",compact")],
    "a list spaced": [("cleanup.policy", SET, " compact , delete ")],
    "a double in hex": [("min.cleanable.dirty.ratio", SET, "0x1p-1")],
    "a small double": [("min.cleanable.dirty.ratio", SET, "1e-4")],
    "NaN": [("min.cleanable.dirty.ratio", SET, "NaN")],
    "a double spaced, with a trailing zero": [("min.cleanable.dirty.ratio", SET, " 0.10 ")],
    "a long with a sign and leading zeros": [("retention.ms", SET, "+0050000")],
    "a boolean in capitals": [("preallocate", SET, " TRUE ")],
    "throttled replicas that join to *": [("leader.replication.throttled.replicas", SET, "*,")],
    "throttled replicas spaced inside": [("leader.replication.throttled.replicas", SET, "0 : 1")],
    "two values refused, Kafka's order": [("retention.ms", SET, "y"), ("segment.bytes", SET, "x")],
    "compaction lags in conflict": [("min.compaction.lag.ms", SET, "100"), ("max.compaction.lag.ms", SET, "50")],
    "DELETE of a name no config has": [("no.such.config", DELETE, None)],
    "APPEND with an empty part": [("cleanup.policy", APPEND, ",compact")],
    "APPEND spaced": [("cleanup.policy", APPEND, " compact")],
    "APPEND of commas alone": [("cleanup.policy", APPEND, ",,")],
    "a gzip level of 0": [("compression.gzip.level", SET, "0")],
}


@pytest.mark.parametrize("case", list(VALUES))
async def test_topic_config_values_are_read_as_kafka_reads_them(targets, topic, case):
    """The answer (code and message) and what DescribeConfigs then shows."""
    async def scenario(target):
        await create(target, topic)
        names = sorted({n for n, _, _ in VALUES[case]} - {"no.such.config"}) or ["retention.ms"]
        before = await describe(target, TOPIC, topic, names)
        answer = await call(target, INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": TOPIC, "resource_name": topic, "configs": [
                {"name": n, "config_operation": op, "value": v} for n, op, v in VALUES[case]]}],
            "validate_only": False})
        (r,) = answer.responses
        unchanging = r.error_code != 0 or case == "DELETE of a name no config has"
        _, found = await settled(lambda: describe(target, TOPIC, topic, names),
                                 lambda got: unchanging or got != before)
        return r.error_code, r.error_message, {k: (v["value"], v["config_source"]) for k, v in found.items()}
    await same(targets, scenario)


@pytest.mark.parametrize("case", ["a topic not there, a value refused", "a name no topic can have",
                                  "an empty name, APPEND to no list"])
async def test_the_name_and_the_configs_are_checked_in_kafkas_order(targets, topic, case):
    """Kafka's controller checks APPEND and SUBTRACT first, then the topic's name, then the values, and whether
    the topic is there last."""
    async def scenario(target):
        name = {"a topic not there, a value refused": f"{topic}-none", "a name no topic can have": "bad/name",
                "an empty name, APPEND to no list": ""}[case]
        op = (APPEND, "5") if case.startswith("an empty name") else (SET, "soon")
        answer = await call(target, INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": TOPIC, "resource_name": name, "configs": [
                {"name": "retention.ms", "config_operation": op[0], "value": op[1]}]}], "validate_only": False})
        legacy = await call(target, ALTER_CONFIGS, 2, {"resources": [{
            "resource_type": TOPIC, "resource_name": name, "configs": [{"name": "retention.ms", "value": "soon"}]}],
            "validate_only": False})
        return [(r.error_code, r.error_message) for r in (*answer.responses, *legacy.responses)]
    await same(targets, scenario)


async def test_create_topics_answers_the_values_as_sent(targets, topic):
    """CreateTopics' answer shows a topic's own configs as sent; DescribeConfigs shows them parsed."""
    async def scenario(target):
        configs = [{"name": "cleanup.policy", "value": " compact , delete "},
                   {"name": "retention.ms", "value": "+5000"}, {"name": "min.cleanable.dirty.ratio", "value": "1e-4"}]
        answer = await call(target, CREATE_TOPICS, 7, {"topics": [{
            "name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": configs}],
            "timeout_ms": 10000, "validate_only": False})
        (t,) = answer.topics
        names = [c["name"] for c in configs]
        _, found = await settled(lambda: describe(target, TOPIC, topic, names), lambda got: got[0] == 0)
        return (t.error_code, sorted((c.name, c.value, c.config_source) for c in t.configs if c.name in names),
                {k: v["value"] for k, v in found.items()})
    await same(targets, scenario)
