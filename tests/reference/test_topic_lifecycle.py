"""A topic deleted and made again under the same name, side by side: the second creation, the new topic's log
(empty, a new id), and what the old id and the old name's committed offsets come to."""

from __future__ import annotations

import pytest

from kbroker.protocol.records import build_batch
from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_groups import COORDINATOR_LOADING, NOT_COORDINATOR, coordinator_found
from tests.reference.test_produce_fetch import CREATE_TOPICS, create, list_offset, produce, records

pytestmark = pytest.mark.reference

METADATA, OFFSET_COMMIT, OFFSET_FETCH, DELETE_TOPICS = 3, 8, 9, 20


async def _topic_id(target, topic) -> bytes:
    answer = await call(target, METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False})
    return bytes(answer.topics[0].topic_id)


async def test_a_topic_deleted_and_made_again(targets, topic):
    async def scenario(target):
        await create(target, topic)
        await produce(target, topic, build_batch(records(3)))
        old_id = await _topic_id(target, topic)
        group = f"g-{topic}"
        await coordinator_found(target, group)

        async def commit():
            answer = await call(target, OFFSET_COMMIT, 8, {
                "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 2,
                                                           "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
            return answer.topics[0].partitions[0].error_code
        await settled(commit, lambda e: e not in (COORDINATOR_LOADING, NOT_COORDINATOR))
        deleted = await call(target, DELETE_TOPICS, 6, {"topics": [{"name": topic, "topic_id": bytes(16)}],
                                                        "timeout_ms": 10000})
        again = await settled(lambda: call(target, CREATE_TOPICS, 7, {"topics": [{
            "name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 10000}), lambda a: a.topics[0].error_code != 36)   # (deletion may take a moment)
        await settled(lambda: list_offset(target, topic, -1), lambda found: found[0] == 0)
        new_id = await _topic_id(target, topic)

        async def offsets():
            answer = await call(target, OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": [
                {"name": topic, "partition_indexes": [0]}]}], "require_stable": False})
            return [(p.committed_offset, p.error_code) for t in answer.groups[0].topics for p in t.partitions]
        old_by_id = await call(target, METADATA, 12, {"topics": [{"topic_id": old_id, "name": None}],
                                                      "allow_auto_topic_creation": False,
                                                      "include_topic_authorized_operations": False})
        return {"deleted": deleted.responses[0].error_code, "made again": again.topics[0].error_code,
                "a new id": new_id != old_id, "log end": await list_offset(target, topic, -1),
                # (Kafka drops a deleted topic's committed offsets a moment after the deletion)
                "committed offsets": await settled(offsets, lambda o: o == [(-1, 0)]),
                "the old id": [t.error_code for t in old_by_id.topics]}
    await same(targets, scenario)
