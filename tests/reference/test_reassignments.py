"""AlterPartitionReassignments and ListPartitionReassignments side by side on one broker: what a reassignment
to the replicas a partition has, to a broker that is not there, or of what does not exist is answered, and
what cancelling one that is not in progress is."""

from __future__ import annotations

import pytest

from tests.reference.differential import call, same
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference

ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 45, 46

CASES = {   # case -> (partition, replicas as a function of the broker's own id, version, allow RF change)
    "to the replicas it has": (0, lambda me: [me], 0, True),
    "to a broker not there": (0, lambda me: [me + 100], 0, True),
    "to itself and a broker not there": (0, lambda me: [me, me + 100], 1, True),
    "to itself and a broker not there, RF fixed": (0, lambda me: [me, me + 100], 1, False),
    "to no replica": (0, lambda me: [], 0, True),
    "to one broker twice": (0, lambda me: [me, me], 0, True),
    "to a negative broker id": (0, lambda me: [-1], 0, True),
    "cancelling none in progress": (0, lambda me: None, 0, True),
    "a partition the topic lacks": (5, lambda me: [me], 0, True),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_a_reassignment(targets, topic, case):
    partition, replicas, version, allow = CASES[case]

    async def scenario(target):
        me = 1 if target.name == "kafka" else 0
        await create(target, topic)
        answer = await call(target, ALTER_PARTITION_REASSIGNMENTS, version, {
            "timeout_ms": 10000, "allow_replication_factor_change": allow, "topics": [{
                "name": topic, "partitions": [{"partition_index": partition, "replicas": replicas(me)}]}]})
        listed = await call(target, LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 10000, "topics": None})
        return (answer.error_code, [(t.name == topic, [(p.partition_index, p.error_code, p.error_message is not None)
                                                        for p in t.partitions]) for t in answer.responses],
                listed.error_code, [t.name for t in listed.topics or [] if t.name == topic])
    await same(targets, scenario)


async def test_an_unknown_topic(targets, topic):
    async def scenario(target):
        answer = await call(target, ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 10000, "topics": [{
            "name": topic, "partitions": [{"partition_index": 0, "replicas": [1]}]}]})
        listed = await call(target, LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 10000, "topics": [{
            "name": topic, "partition_indexes": [0]}]})
        return (answer.error_code, [[(p.partition_index, p.error_code, p.error_message is not None)
                                     for p in t.partitions] for t in answer.responses],
                listed.error_code, listed.topics)
    await same(targets, scenario)
