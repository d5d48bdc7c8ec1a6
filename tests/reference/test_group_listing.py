"""ListGroups' state and type filters (KIP-518, KIP-848), and what the describe APIs answer for a group that
does not exist or is of another type, side by side, next to a simple group with a committed offset."""

from __future__ import annotations

import pytest

from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_groups import COORDINATOR_LOADING, NOT_COORDINATOR, coordinator_found
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference

OFFSET_COMMIT, DESCRIBE_GROUPS, LIST_GROUPS, CONSUMER_GROUP_DESCRIBE, SHARE_GROUP_DESCRIBE = 8, 15, 16, 69, 77


async def simple_group(target, topic: str) -> str:
    """A simple group (commits only, no members) with an offset for partition 0 of ``topic``."""
    await create(target, topic)
    group = f"g-{topic}"
    await coordinator_found(target, group)
    await settled(lambda: call(target, OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                   "committed_leader_epoch": -1, "committed_metadata": None}]}]}),
        lambda a: a.topics[0].partitions[0].error_code not in (COORDINATOR_LOADING, NOT_COORDINATOR))
    return group


@pytest.mark.parametrize("version, states, types", [
    (5, ["NoSuch"], []), (5, [], ["NoSuch"]), (5, [], ["consumer"]), (5, [], ["classic"]), (5, [], ["share"]),
    (5, ["Empty"], []), (5, ["empty"], []), (4, [], None)])
async def test_list_groups_filters(targets, topic, version, states, types):
    async def scenario(target):
        group = await simple_group(target, topic)
        request = {"states_filter": states, **({} if types is None else {"types_filter": types})}
        answer = await call(target, LIST_GROUPS, version, request)
        return answer.error_code, [(g.group_state, g.get("group_type")) for g in answer.groups if g.group_id == group]
    await same(targets, scenario)


@pytest.mark.parametrize("api, which", [(DESCRIBE_GROUPS, "unknown"), (CONSUMER_GROUP_DESCRIBE, "unknown"),
                                        (SHARE_GROUP_DESCRIBE, "unknown"), (CONSUMER_GROUP_DESCRIBE, "simple")])
async def test_describing_a_group_that_is_not_there(targets, topic, api, which):
    async def scenario(target):
        group = await simple_group(target, topic)
        asked = group if which == "simple" else f"{group}-none"
        if api == DESCRIBE_GROUPS:
            answer = await call(target, api, 5, {"groups": [asked], "include_authorized_operations": False})
            return [(g.error_code, g.group_state, g.protocol_type, len(g.members)) for g in answer.groups]
        answer = await call(target, api, 1, {"group_ids": [asked], "include_authorized_operations": False})
        return [(g.error_code, g.error_message is not None, g.group_state) for g in answer.groups]
    await same(targets, scenario)
