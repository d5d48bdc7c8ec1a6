"""OffsetCommit and OffsetFetch at their edges, as raw frames side by side: metadata at and past
``offset.metadata.max.bytes``, odd offsets, a partition named twice, empty group ids, a classic group's
members out of step (another generation, a simple commit into a group with members, a commit while it
rebalances), and OffsetFetch of several groups at once."""

from __future__ import annotations

import asyncio

import pytest

from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_classic_group_edges import member_of
from tests.reference.test_groups import coordinator_found, join_request
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference

OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, DESCRIBE_GROUPS = 8, 9, 11, 15
COORDINATOR_LOADING, NOT_COORDINATOR = 14, 16


def _partition(index: int, offset: int = 5, metadata: str | None = "m") -> dict:
    return {"partition_index": index, "committed_offset": offset, "committed_leader_epoch": -1,
            "committed_metadata": metadata}


async def _commit(target, group, topics, generation=-1, member="", version=8):
    answer = await call(target, OFFSET_COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "group_instance_id": None, "topics": topics})
    return [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.topics]


async def _fetched(target, groups, version=8, require_stable=False):
    answer = await call(target, OFFSET_FETCH, version, {"groups": groups, "require_stable": require_stable})
    return [(g.group_id, g.error_code, sorted((t.name, [(p.partition_index, p.committed_offset, p.metadata,
                                                         p.error_code) for p in t.partitions])
                                              for t in g.topics)) for g in answer.groups]


async def _ready(target, topic) -> str:
    """A topic of two partitions and its group, once the group's coordinator takes commits (Kafka's loads
    its offsets partition a moment after FindCoordinator first names it): the group id."""
    await create(target, topic, partitions=2)
    group = f"g-{topic}"
    await coordinator_found(target, group)
    await settled(lambda: _commit(target, group, [{"name": topic, "partitions": [_partition(1, 0)]}]),
                  lambda a: a[0][1][0][1] not in (COORDINATOR_LOADING, NOT_COORDINATOR))
    return group


COMMIT_CASES = {
    "metadata at the limit": lambda topic: [{"name": topic, "partitions": [_partition(0, metadata="x" * 4096)]}],
    "metadata past the limit": lambda topic: [{"name": topic, "partitions": [_partition(0, metadata="x" * 4097)]}],
    "null metadata": lambda topic: [{"name": topic, "partitions": [_partition(0, metadata=None)]}],
    "offset -1": lambda topic: [{"name": topic, "partitions": [_partition(0, offset=-1)]}],
    "offset past the log end": lambda topic: [{"name": topic, "partitions": [_partition(0, offset=10 ** 12)]}],
    "a partition named twice": lambda topic: [{"name": topic, "partitions": [_partition(0, 3), _partition(0, 4)]}],
    "a topic named twice": lambda topic: [{"name": topic, "partitions": [_partition(0, 3)]},
                                          {"name": topic, "partitions": [_partition(0, 4)]}],
    "no topics": lambda topic: [],
    "a negative partition": lambda topic: [{"name": topic, "partitions": [_partition(-1)]}],
}


@pytest.mark.parametrize("case", list(COMMIT_CASES))
async def test_a_simple_commit_and_what_is_fetched_after(targets, topic, case):
    async def scenario(target):
        group = await _ready(target, topic)
        committed = await _commit(target, group, COMMIT_CASES[case](topic))
        fetched = await _fetched(target, [{"group_id": group, "topics": [
            {"name": topic, "partition_indexes": [0]}]}])
        return {"committed": committed, "fetched": fetched}
    await same(targets, scenario)


FETCH_CASES = ["several groups", "an empty group id", "every topic of a group", "a group with no commits",
               "a topic of no commits", "v7, every topic", "v7, an unknown group"]


@pytest.mark.parametrize("case", FETCH_CASES)
async def test_offset_fetch(targets, topic, case):
    async def scenario(target):
        group = await _ready(target, topic)
        await _commit(target, group, [{"name": topic, "partitions": [_partition(0, 7)]}])
        mine = {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 1]}]}
        if case == "several groups":
            return await _fetched(target, [mine, {"group_id": group + "-none", "topics": None},
                                           {"group_id": group + "-other", "topics": [
                                               {"name": topic, "partition_indexes": [0]}]}])
        if case == "an empty group id":
            return await _fetched(target, [{"group_id": "", "topics": None}]), \
                await _commit(target, "", [{"name": topic, "partitions": [_partition(0)]}])
        if case == "every topic of a group":
            return await _fetched(target, [{"group_id": group, "topics": None}])
        if case == "a group with no commits":
            return await _fetched(target, [{"group_id": group + "-none", "topics": [
                {"name": topic, "partition_indexes": [0]}]}])
        if case == "a topic of no commits":
            return await _fetched(target, [{"group_id": group, "topics": [
                {"name": topic + "-none", "partition_indexes": [0]}]}])
        old_group = group if case == "v7, every topic" else group + "-none"
        answer = await call(target, OFFSET_FETCH, 7, {"group_id": old_group, "topics": None,
                                                      "require_stable": True})
        return answer.error_code, sorted((t.name, [(p.partition_index, p.committed_offset, p.error_code)
                                                   for p in t.partitions]) for t in answer.topics)
    await same(targets, scenario)


async def _commits_through_a_rebalance(target, group, topics, member, generation) -> dict:
    """A second member's join moves the group to PreparingRebalance, where the member's commit at its
    generation is taken; once the member rejoins too the group waits for SyncGroup (CompletingRebalance) at
    the next generation: a commit at that generation is refused with REBALANCE_IN_PROGRESS, one at the old
    generation with ILLEGAL_GENERATION. (Nothing waits out a rebalance timeout.)"""
    join = join_request(group)
    named = await call(target, JOIN_GROUP, 5, join)   # (MEMBER_ID_REQUIRED, with the id to join with)
    second = asyncio.ensure_future(call(target, JOIN_GROUP, 5, {**join, "member_id": named.member_id}))
    state = await settled(lambda: call(target, DESCRIBE_GROUPS, 5, {"groups": [group],
                                                                     "include_authorized_operations": False}),
                          lambda a: a.groups[0].group_state == "PreparingRebalance")
    seen = {"state": state.groups[0].group_state,
            "preparing": await _commit(target, group, topics, generation, member)}
    rejoined = await call(target, JOIN_GROUP, 5, {**join, "member_id": member})
    await second
    seen["completing"] = [await _commit(target, group, topics, at, member)
                          for at in (rejoined.generation_id, generation)]
    seen["next generation"] = rejoined.generation_id - generation
    return seen


MEMBER_CASES = ["another generation", "generation -1 in a group with members", "a stranger",
                "the member itself", "an empty member id", "while the group rebalances",
                "a stranger, beside partitions that do not exist"]


@pytest.mark.parametrize("case", MEMBER_CASES)
async def test_a_classic_members_commit(targets, topic, case):
    async def scenario(target):
        group = await _ready(target, topic)
        member, generation = await member_of(target, group)
        topics = [{"name": topic, "partitions": [_partition(0)]}]
        if case == "while the group rebalances":
            return await _commits_through_a_rebalance(target, group, topics, member, generation)
        if case == "a stranger, beside partitions that do not exist":   # (refused before the group is asked)
            topics = [{"name": topic, "partitions": [_partition(0), _partition(9)]},
                      {"name": topic + "-none", "partitions": [_partition(0)]}]
            # (in any order: Kafka answers the partitions it refused itself before the group's)
            return sorted((name, sorted(parts)) for name, parts in await _commit(target, group, topics, generation,
                                                                                 "nobody"))
        generation, member = {"another generation": (generation + 1, member),
                              "generation -1 in a group with members": (-1, ""),
                              "a stranger": (generation, "nobody"),
                              "the member itself": (generation, member),
                              "an empty member id": (generation, "")}[case]
        return await _commit(target, group, topics, generation, member)
    seen = await same(targets, scenario)
    if case == "while the group rebalances":   # (taken, then REBALANCE_IN_PROGRESS and ILLEGAL_GENERATION)
        assert [[p for _, p in answer] for answer in (seen["preparing"], *seen["completing"])] == [
            [[(0, 0)]], [[(0, 27)]], [[(0, 22)]]], seen
