"""DeleteGroups side by side: a group that is not there, one with a member, one left empty with offsets, one
named twice or by an empty id, and what is left of each afterwards."""

from __future__ import annotations

import uuid

import pytest

from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_consumer_groups import beat, first_join
from tests.reference.test_groups import coordinator_found
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference

OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, DELETE_GROUPS, CONSUMER_HEARTBEAT = 8, 9, 15, 42, 68

CASES = ["not there", "a consumer group with a member", "a consumer group left empty", "offsets only",
         "named twice", "an empty id", "two of which one has a member"]


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("case", CASES)
async def test_delete_groups(targets, topic, case, version):
    async def scenario(target):
        await create(target, topic, 1)
        group, other = f"g-{topic}", f"h-{topic}"
        member = uuid.uuid4().hex
        if case in ("a consumer group with a member", "a consumer group left empty", "two of which one has a member"):
            await first_join(target, group, member, [topic])
            if case == "a consumer group left empty":
                await call(target, CONSUMER_HEARTBEAT, 1, beat(group, member, -1))
        if case in ("offsets only", "named twice", "two of which one has a member", "a consumer group left empty"):
            name = other if case == "two of which one has a member" else group
            await coordinator_found(target, name)
            await settled(lambda: call(target, OFFSET_COMMIT, 8, {
                "group_id": name, "generation_id_or_member_epoch": -1, "member_id": "",
                "group_instance_id": None, "retention_time_ms": -1, "topics": [{"name": topic, "partitions": [
                    {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1,
                     "committed_metadata": None}]}]}), lambda a: a.topics[0].partitions[0].error_code == 0)
        names = {"named twice": [group, group], "an empty id": [""],
                 "two of which one has a member": [group, other]}.get(case, [group])
        if case == "not there":
            await coordinator_found(target, group)
        # (Kafka answers NOT_COORDINATOR until the group's shard has loaded; a client retries)
        deleted = await settled(lambda: call(target, DELETE_GROUPS, version, {"groups_names": names}),
                                lambda a: all(r.error_code not in (14, 15, 16) for r in a.results))
        after = await call(target, DESCRIBE_GROUPS, 5, {"groups": sorted(set(n for n in names if n)),
                                                        "include_authorized_operations": False})
        return (sorted((r.group_id == group, r.group_id == other, r.error_code) for r in deleted.results),
                [(g.error_code, g.group_state) for g in after.groups])
    await same(targets, scenario)
