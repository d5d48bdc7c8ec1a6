"""kafkajs, the Node.js client, runs the same scenario against Kafka and kbroker (tests/kafkajs_scenario.js):
admin requests, idempotent and gzip produce, a classic group of two members sharing a topic, transactions
with a group's offsets read back read_committed."""

import asyncio

import pytest

from tests.kafkajs import run_scenario
from tests.reference.differential import same

pytestmark = pytest.mark.reference


async def test_kafkajs_sees_the_same_of_both(targets):
    async def scenario(target):
        seen = await asyncio.to_thread(run_scenario, target.bootstrap)
        # (which member gets which partitions is the client's assignor's pick among equal members)
        seen["assigned"] = sorted(len(member) for member in seen["assigned"])
        return seen
    seen = await same(targets, scenario)
    assert seen["assigned"] == [1, 2] and seen["transactional"] == ["committed-1", "committed-2", "committed-3"]
