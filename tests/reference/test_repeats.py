"""A request that names the same thing twice, API by API, as raw frames side by side: what Kafka answers (one
entry, both, or INVALID_REQUEST) is what kbroker must answer, and what the request did."""

from __future__ import annotations

import pytest

from kbroker.protocol.records import build_batch
from tests.reference.differential import call, plain, same
from tests.waiting import settled
from tests.reference.test_groups import coordinator_found
from tests.reference.test_produce_fetch import create, produce, records

pytestmark = pytest.mark.reference

FETCH, METADATA, OFFSET_FETCH, DESCRIBE_GROUPS, DELETE_RECORDS = 1, 3, 9, 15, 21
OFFSET_FOR_LEADER_EPOCH, DESCRIBE_CONFIGS, DESCRIBE_LOG_DIRS, DESCRIBE_TRANSACTIONS = 23, 32, 35, 65
DESCRIBE_TOPIC_PARTITIONS = 75
TOPIC = 2


def _sorted(entries, key="partition_index"):
    """Entries compared as a set: the order of an answer built from a map is the map's."""
    return sorted((plain(e) for e in entries), key=lambda e: repr(e.get(key)) + repr(e))


async def fetch(target, topic):
    def at(offset):
        return {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}
    answer = await call(target, FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [at(0), at(2)]}]})
    return answer.error_code, [(t.topic, sorted((p.partition_index, p.error_code, len(p.records or b""))
                                                for p in t.partitions)) for t in answer.responses]


async def metadata(target, topic):
    answer = await call(target, METADATA, 12, {"topics": [{"name": topic}, {"name": topic}],
                                               "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False})
    return [(t.name, t.error_code, len(t.partitions)) for t in answer.topics]


async def offset_fetch(target, topic):
    group = f"g-{topic}"
    await coordinator_found(target, group)
    # (until Kafka's coordinator has loaded the group's offsets partition: NOT_COORDINATOR before)
    answer = await settled(lambda: call(target, OFFSET_FETCH, 8, {"groups": [
        {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 0]}]},
        {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}], "require_stable": False}),
        lambda a: all(g.error_code not in (14, 16) for g in a.groups))
    return [(g.group_id == group, g.error_code, [(t.name, [(p.partition_index, p.committed_offset, p.error_code)
                                                           for p in t.partitions]) for t in g.topics])
            for g in answer.groups]


async def describe_groups(target, topic):
    group = f"g-{topic}"
    await coordinator_found(target, group)
    answer = await call(target, DESCRIBE_GROUPS, 5, {"groups": [group, group],
                                                     "include_authorized_operations": False})
    return [(g.group_id == group, g.error_code, g.group_state) for g in answer.groups]


async def delete_records(target, topic):
    answer = await call(target, DELETE_RECORDS, 2, {"timeout_ms": 5000, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "offset": 1}, {"partition_index": 0, "offset": 2}]}]})
    return [(t.name, _sorted(t.partitions)) for t in answer.topics]


async def offset_for_leader_epoch(target, topic):
    answer = await call(target, OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
        {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}] * 2}]})
    return [(t.topic, sorted((p.partition, p.error_code, p.end_offset) for p in t.partitions))
            for t in answer.topics]


async def describe_configs(target, topic):
    resource = {"resource_type": TOPIC, "resource_name": topic, "configuration_keys": ["retention.ms"]}
    answer = await call(target, DESCRIBE_CONFIGS, 4, {"resources": [resource, resource], "include_synonyms": False,
                                                      "include_documentation": False})
    return [(r.error_code, r.resource_name == topic, [(c.name, c.value) for c in r.configs]) for r in answer.results]


async def describe_log_dirs(target, topic):
    answer = await call(target, DESCRIBE_LOG_DIRS, 4, {"topics": [{"topic": topic, "partitions": [0, 0]},
                                                                  {"topic": topic, "partitions": [0]}]})
    return [(r.error_code, [(t.name, sorted(p.partition_index for p in t.partitions)) for t in r.topics])
            for r in answer.results]


async def describe_transactions(target, topic):
    answer = await call(target, DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [topic, topic]})
    return [(s.error_code, s.transactional_id == topic) for s in answer.transaction_states]


async def describe_topic_partitions(target, topic):
    answer = await call(target, DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": topic}, {"name": topic}],
                                                               "response_partition_limit": 100, "cursor": None})
    return [(t.name, t.error_code, len(t.partitions)) for t in answer.topics], answer.next_cursor


SCENARIOS = [fetch, metadata, offset_fetch, describe_groups, delete_records, offset_for_leader_epoch,
             describe_configs, describe_log_dirs, describe_transactions, describe_topic_partitions]


@pytest.mark.parametrize("ask", SCENARIOS, ids=lambda f: f.__name__)
async def test_a_request_naming_one_thing_twice(targets, topic, ask):
    async def scenario(target):
        await create(target, topic)
        await produce(target, topic, build_batch(records(3)))
        return await ask(target, topic)
    await same(targets, scenario)
