"""OffsetForLeaderEpoch side by side (KIP-101, KIP-320): where each leader epoch ends, as a consumer validating its
position after a leader change asks it (replica id -1) and as a follower would (-2, the debug id), with the
errors for what the leader does not have."""

from __future__ import annotations

import pytest

from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_produce_fetch import create, create_written

pytestmark = pytest.mark.reference

OFFSET_FOR_LEADER_EPOCH = 23

CASES = {   # case -> (partition, current leader epoch, leader epoch asked)
    "the current epoch": (0, -1, 0),
    "the current epoch, current epoch given": (0, 0, 0),
    "a later epoch": (0, -1, 3),
    "an earlier epoch than any": (0, -1, -1),
    "a future current epoch": (0, 5, 0),
    "a partition the topic lacks": (7, -1, 0),
    "an empty partition": (1, -1, 0),
}


@pytest.mark.parametrize("version", [2, 3, 4])
@pytest.mark.parametrize("replica_id", [-1, -2])
@pytest.mark.parametrize("case", list(CASES))
async def test_where_an_epoch_ends(targets, topic, case, replica_id, version):
    partition, current, asked = CASES[case]

    async def scenario(target):
        await create_written(target, topic, [12])   # partition 0 written, partition 1 left empty
        await call(target, 37, 3, {"topics": [{"name": topic, "count": 2, "assignments": None}],
                                   "timeout_ms": 10000, "validate_only": False})
        await settled(lambda: call(target, OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [{
            "topic": topic, "partitions": [{"partition": 1, "current_leader_epoch": -1, "leader_epoch": 0}]}]}),
            lambda a: a.topics[0].partitions[0].error_code == 0)
        answer = await call(target, OFFSET_FOR_LEADER_EPOCH, version, {
            "replica_id": replica_id, "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": current, "leader_epoch": asked}]}]})
        (result,) = answer.topics[0].partitions
        return result.error_code, result.leader_epoch, result.end_offset
    await same(targets, scenario)


async def test_an_unknown_topic(targets, topic):
    async def scenario(target):
        answer = await call(target, OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [{
            "topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
        return [(t.topic, [(p.partition, p.error_code, p.leader_epoch, p.end_offset) for p in t.partitions])
                for t in answer.topics]
    await same(targets, scenario)


async def test_epochs_after_a_partition_was_added(targets, topic):
    """A partition added later starts at the topic's epochs of its own (its first leader epoch)."""
    async def scenario(target):
        await create(target, topic, 1)
        answer = await call(target, 37, 3, {"topics": [{"name": topic, "count": 2, "assignments": None}],
                                            "timeout_ms": 10000, "validate_only": False})
        assert answer.results[0].error_code == 0
        found = await settled(lambda: call(target, OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [{
            "topic": topic, "partitions": [{"partition": 1, "current_leader_epoch": -1, "leader_epoch": 0}]}]}),
            lambda a: a.topics[0].partitions[0].error_code == 0)
        p = found.topics[0].partitions[0]
        return p.error_code, p.end_offset
    await same(targets, scenario)
