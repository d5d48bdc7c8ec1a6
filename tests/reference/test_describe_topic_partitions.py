"""DescribeTopicPartitions (KIP-966), which Kafka's Java admin client uses for describeTopics: pages by
``response_partition_limit`` and a cursor, and its refusals, side by side."""

from __future__ import annotations

import pytest

from tests.reference.differential import call, same
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference

DESCRIBE_TOPIC_PARTITIONS = 75


@pytest.mark.parametrize("case", [
    "one topic", "a limit of 2", "from a cursor", "an unknown topic", "two topics, a limit of 3",
    "a cursor naming a topic not asked for", "the same with two topics", "a limit of 0", "a limit of -1",
    "a cursor past the last partition"])
async def test_describe_topic_partitions(targets, topic, case):
    other = f"{topic}-b"
    request = {"topics": [{"name": topic}], "response_partition_limit": 2000, "cursor": None}
    request.update({
        "a limit of 2": {"response_partition_limit": 2},
        "from a cursor": {"cursor": {"topic_name": topic, "partition_index": 3}},
        "an unknown topic": {"topics": [{"name": f"{topic}-none"}]},
        "two topics, a limit of 3": {"topics": [{"name": other}, {"name": topic}], "response_partition_limit": 3},
        "a cursor naming a topic not asked for": {"cursor": {"topic_name": f"{topic}-none", "partition_index": 0}},
        "the same with two topics": {"topics": [{"name": other}, {"name": topic}],
                                     "cursor": {"topic_name": f"{topic}-none", "partition_index": 0}},
        "a limit of 0": {"response_partition_limit": 0},
        "a limit of -1": {"response_partition_limit": -1},
        "a cursor past the last partition": {"cursor": {"topic_name": topic, "partition_index": 9}},
    }.get(case, {}))

    async def scenario(target):
        await create(target, topic, 5)
        await create(target, other, 2)
        answer = await call(target, DESCRIBE_TOPIC_PARTITIONS, 0, request)
        cursor = answer.next_cursor
        return ([(t.error_code, t.name, t.is_internal, [
            (p.error_code, p.partition_index, p.leader_epoch >= 0, len(p.replica_nodes), len(p.isr_nodes),
             list(p.eligible_leader_replicas or []), list(p.last_known_elr or []), list(p.offline_replicas))
            for p in t.partitions]) for t in answer.topics],
            None if cursor is None else (cursor.topic_name, cursor.partition_index))
    await same(targets, scenario)
