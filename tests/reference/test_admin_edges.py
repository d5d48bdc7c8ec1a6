"""Admin APIs at their edges, side by side: CreatePartitions, DeleteTopics v6 (by name or id), OffsetDelete,
ElectLeaders (one broker) and DescribeProducers: duplicates, unknown names and ids, what is refused and how."""

from __future__ import annotations

import uuid

import pytest

from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_groups import COORDINATOR_LOADING, NOT_COORDINATOR, coordinator_found
from tests.reference.test_produce_fetch import create, create_written

pytestmark = pytest.mark.reference

DELETE_TOPICS, CREATE_PARTITIONS, ELECT_LEADERS, OFFSET_DELETE, DESCRIBE_PRODUCERS, OFFSET_COMMIT = 20, 37, 43, 47, 61, 8
NO_ID = bytes(16)


GROWTH = {   # case -> the topics of a CreatePartitions of a 2-partition topic, a function of (topic, broker id)
    "to the same count": lambda t, me: [_grow(t, 2)], "to fewer": lambda t, me: [_grow(t, 1)],
    "to more": lambda t, me: [_grow(t, 3)], "an unknown topic": lambda t, me: [_grow(f"{t}-none", 3)],
    "a topic twice": lambda t, me: [_grow(t, 3), _grow(t, 4)], "validate only": lambda t, me: [_grow(t, 3)],
    "assignments of the wrong length": lambda t, me: [_grow(t, 4, [[1]])],
    "assigned": lambda t, me: [_grow(t, 4, [[me], [me]])],
    "assigned a broker not there": lambda t, me: [_grow(t, 3, [[50]])],
    "assigned a broker twice": lambda t, me: [_grow(t, 3, [[me, me]])],
    "assigned no broker": lambda t, me: [_grow(t, 3, [[]])],
    "assigned more replicas than the topic has": lambda t, me: [_grow(t, 3, [[me, 50]])],
    "several topics, some twice, some unknown": lambda t, me: [
        _grow(t, 3), _grow(f"{t}-a", 2), _grow(f"{t}-b", 2), _grow(f"{t}-a", 3), _grow(f"{t}-c", 1), _grow(t, 1),
        _grow(f"{t}-d", 5), _grow(f"{t}-e", 5), _grow(f"{t}-f", 5)],
}
# (Not here: a CreatePartitions of more than 10,000 new partitions, which kbroker refuses POLICY_VIOLATION as
# it refuses such a CreateTopics (tests/integration/test_bad_input.py) and which Kafka 4.2 attempts, failing
# with UNKNOWN_SERVER_ERROR and leaving the reference node unable to serve: docs/COMPATIBILITY.md.)


def _grow(name, count, assignments=None):
    return {"name": name, "count": count,
            "assignments": None if assignments is None else [{"broker_ids": b} for b in assignments]}


@pytest.mark.parametrize("case", list(GROWTH))
async def test_create_partitions(targets, topic, case):
    async def scenario(target):
        await create(target, topic, 2)
        me = 1 if target.name == "kafka" else 0
        answer = await call(target, CREATE_PARTITIONS, 3, {"topics": GROWTH[case](topic, me), "timeout_ms": 10000,
                                                           "validate_only": case == "validate only"})
        return [(r.name.replace(topic, "<topic>"), r.error_code,
                 r.error_message and r.error_message.replace(topic, "<topic>").replace(f"broker {me} ", "broker <me> "))
                for r in answer.results]
    await same(targets, scenario)


@pytest.mark.parametrize("case", ["an unknown name", "an unknown id", "a name twice", "a name and an id",
                                  "an internal topic"])
async def test_delete_topics_v6(targets, topic, case):
    topics = {"an unknown name": [{"name": f"{topic}-none", "topic_id": NO_ID}],
              "an unknown id": [{"name": None, "topic_id": uuid.uuid4().bytes}],
              "a name twice": [{"name": topic, "topic_id": NO_ID}, {"name": topic, "topic_id": NO_ID}],
              "a name and an id": [{"name": topic, "topic_id": uuid.uuid4().bytes}],
              "an internal topic": [{"name": "__consumer_offsets", "topic_id": NO_ID}]}

    async def scenario(target):
        await create(target, topic, 2)
        if case == "an internal topic":
            await coordinator_found(target, f"g-{topic}")   # (the offsets topic exists from here)
        answer = await call(target, DELETE_TOPICS, 6, {"topics": topics[case], "timeout_ms": 10000})
        return sorted((r.name == topic, r.error_code) for r in answer.responses)
    await same(targets, scenario)


@pytest.mark.parametrize("case", ["an unknown group", "a partition without offsets", "an unknown topic"])
async def test_offset_delete(targets, topic, case):
    async def scenario(target):
        await create(target, topic, 2)
        group = f"g-{topic}" + ("-none" if case == "an unknown group" else "")
        await coordinator_found(target, group)
        if case != "an unknown group":
            await settled(lambda: call(target, OFFSET_COMMIT, 8, {
                "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                           "committed_leader_epoch": -1, "committed_metadata": None}]}]}),
                lambda a: a.topics[0].partitions[0].error_code not in (COORDINATOR_LOADING, NOT_COORDINATOR))
        name = f"{topic}-none" if case == "an unknown topic" else topic
        index = 1 if case == "a partition without offsets" else 0
        answer = await settled(lambda: call(target, OFFSET_DELETE, 0, {"group_id": group, "topics": [
            {"name": name, "partitions": [{"partition_index": index}]}]}),
            lambda a: a.error_code not in (COORDINATOR_LOADING, NOT_COORDINATOR))
        return answer.error_code, [(t.name == topic, [(p.partition_index, p.error_code) for p in t.partitions])
                                   for t in answer.topics]
    await same(targets, scenario)


@pytest.mark.parametrize("election_type", [0, 1])
@pytest.mark.parametrize("case", ["every partition", "named ones"])
async def test_elect_leaders_on_one_broker(targets, topic, election_type, case):
    async def scenario(target):
        await create(target, topic, 2)
        wanted = None if case == "every partition" else [{"topic": topic, "partitions": [0, 5]},
                                                          {"topic": f"{topic}-none", "partitions": [0]}]
        answer = await call(target, ELECT_LEADERS, 2, {"election_type": election_type, "topic_partitions": wanted,
                                                       "timeout_ms": 10000})
        return answer.error_code, sorted((r.topic == topic, [(p.partition_id, p.error_code, p.error_message)
                                                             for p in r.partition_result])
                                         for r in answer.replica_election_results if r.topic.startswith(topic))
    await same(targets, scenario)


@pytest.mark.parametrize("case", ["an unknown topic", "a partition the topic lacks", "both partitions"])
async def test_describe_producers(targets, topic, case):
    async def scenario(target):
        await create_written(target, topic, [1, 1])
        topics = {"an unknown topic": [{"name": f"{topic}-none", "partition_indexes": [0]}],
                  "a partition the topic lacks": [{"name": topic, "partition_indexes": [7]}],
                  "both partitions": [{"name": topic, "partition_indexes": [0, 1]}]}[case]
        answer = await call(target, DESCRIBE_PRODUCERS, 0, {"topics": topics})
        return [(t.name == topic, [(p.partition_index, p.error_code, len(p.active_producers)) for p in t.partitions])
                for t in answer.topics]
    await same(targets, scenario)
