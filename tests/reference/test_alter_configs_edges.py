"""IncrementalAlterConfigs and AlterConfigs at their edges, side by side: a list config appended to and subtracted
from, APPEND or SUBTRACT on a config that is no list, a resource named twice, a topic that is not there, a config
named twice in one resource, an unknown resource type.

(Left out: an operation code Kafka does not know, which it answers UNKNOWN_SERVER_ERROR and kbroker
INVALID_CONFIG; a legacy AlterConfigs naming a resource twice, which Kafka 4.2 leaves unanswered.)"""

from __future__ import annotations

import pytest

from tests.reference.differential import call, same, settled
from tests.reference.test_configs import TOPIC, describe
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
                                 lambda got: code != 0 or got != before)
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
