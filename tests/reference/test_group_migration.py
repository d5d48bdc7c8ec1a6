"""Online migration between the classic and the consumer group protocol over raw frames, side by side with
Kafka: a classic member joining a consumer group, a running classic group converted by a member's first
ConsumerGroupHeartbeat (upgrade), and converted back when its last consumer-protocol member leaves
(downgrade)."""

import uuid

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_consumer_groups import (
    COORDINATOR_LOADING, DESCRIBE, HEARTBEAT, LIST_GROUPS, NOT_COORDINATOR, OFFSET_COMMIT, beat, settled_member, shape)
from tests.reference.test_groups import coordinator_found
from tests.reference.test_produce_fetch import create

import pytest

pytestmark = pytest.mark.reference

JOIN_GROUP, SYNC_GROUP, CLASSIC_HEARTBEAT, LEAVE_GROUP = 11, 14, 12, 13


def subscription(topic: str, owned=(), version: int = 1) -> bytes:
    return ConsumerProtocolSubscription(version=version, topics=[topic], user_data=None,
                                        owned_partitions=[(topic, list(owned))] if owned else []).encode()


def assigned(raw: bytes) -> list[int]:
    if not raw:
        return []
    return sorted(p for tp in ConsumerProtocolAssignment.decode(bytes(raw)).assigned_partitions
                  for p in tp.partitions)


def join_request(group: str, topic: str, member_id: str = "", owned=(), **fields) -> dict:
    return {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": member_id,
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(topic, owned)}], "reason": None, **fields}


async def classic_join(target, group: str, topic: str, member_id: str = "", owned=(), version: int = 5):
    return await call(target, JOIN_GROUP, version, join_request(group, topic, member_id, owned))


async def classic_sync(target, group: str, member_id: str, generation: int, assignments=()):
    return await call(target, SYNC_GROUP, 5, {
        "group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": None,
        "protocol_type": "consumer", "protocol_name": "range", "assignments": list(assignments)})


async def classic_beat(target, group: str, member_id: str, generation: int) -> int:
    return (await call(target, CLASSIC_HEARTBEAT, 4, {"group_id": group, "generation_id": generation,
                                                      "member_id": member_id, "group_instance_id": None})).error_code


async def group_type(target, group: str) -> list:
    answer = await call(target, LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    return [(g.group_state, g.group_type) for g in answer.groups if g.group_id == group]


async def topic_id(target, topic: str) -> bytes:
    answer = await call(target, 3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
    return answer.topics[0].topic_id


async def created(target, topic: str, partitions: int) -> None:
    """Create the topic and wait until the group coordinator sees it: Kafka's may not at the first heartbeat
    after the topic is made (its metadata image lags), and would then assign nothing and move the group's
    epoch again when it does, so a scenario's epochs and assignments would depend on that timing. A member of
    a group of its own holding every partition shows the coordinator has it; that member then leaves."""
    await create(target, topic, partitions=partitions)
    probe, member = f"probe-{topic}", uuid.uuid4().hex
    epoch = await settled_member(target, probe, member, [topic], partitions)
    await call(target, HEARTBEAT, 1, beat(probe, member, -1))
    assert epoch > 0


@pytest.mark.parametrize("case", ["a member asked for its id", "a member that left"])
async def test_a_consumer_member_replaces_an_empty_classic_group(targets, topic, case):
    """A classic group in state Empty, with a member still pending its id or one that joined, synced and left,
    becomes a consumer group at the first ConsumerGroupHeartbeat."""
    async def scenario(target):
        await create(target, topic, partitions=2)
        group = f"g-{topic}"
        await coordinator_found(target, group)
        first = await settled(lambda: classic_join(target, group, topic),   # (Kafka's group shard may still load)
                              lambda a: a.error_code not in (COORDINATOR_LOADING, NOT_COORDINATOR))
        seen = {"asked for an id": first.error_code}
        if case == "a member that left":
            joined = await classic_join(target, group, topic, first.member_id)
            synced = await classic_sync(target, group, first.member_id, joined.generation_id)
            left = await call(target, LEAVE_GROUP, 5, {"group_id": group, "members": [
                {"member_id": first.member_id, "group_instance_id": None, "reason": None}]})
            seen["joined, synced, left"] = (joined.error_code, synced.error_code, left.error_code)
        answer = await call(target, HEARTBEAT, 1, beat(group, uuid.uuid4().hex[:22], 0, rebalance_timeout_ms=10000,
                                                       subscribed_topic_names=[topic], topic_partitions=[]))
        seen["consumer member"] = (answer.error_code, answer.member_epoch > 0)
        seen["type"] = await group_type(target, group)
        return seen
    await same(targets, scenario)


async def test_a_classic_member_joins_a_consumer_group(targets, topic):
    """It is given a member id, then answered at once with its member epoch as the generation and no leader;
    it waits (empty assignment, then REBALANCE_IN_PROGRESS) until the consumer member gave its partition up."""
    async def scenario(target):
        await create(target, topic, partitions=2)
        group, a = f"g-{topic}", uuid.uuid4().hex
        base = await settled_member(target, group, a, [topic], 2)
        seen = {}
        first = await classic_join(target, group, topic)
        seen["join without id"] = (first.error_code, bool(first.member_id))
        b = first.member_id
        joined = await classic_join(target, group, topic, b)
        seen["join"] = (joined.error_code, joined.generation_id - base, joined.protocol_type, joined.protocol_name,
                        joined.leader, len(joined.members), joined.member_id == b)
        synced = await classic_sync(target, group, b, joined.generation_id)
        seen["sync"] = (synced.error_code, synced.protocol_type, synced.protocol_name, assigned(synced.assignment))
        seen["sync at another generation"] = (await classic_sync(target, group, b, joined.generation_id + 5)).error_code
        seen["beat while a holds its partition"] = await classic_beat(target, group, b, joined.generation_id)

        def relative(answer) -> tuple:
            return answer.error_code, answer.member_epoch - base
        told = await call(target, HEARTBEAT, 1, beat(group, a, base))
        seen["a told to revoke"] = relative(told)
        owned = [{"topic_id": await topic_id(target, topic), "partitions": shape(told)[3]}]
        seen["a revoked"] = relative(await call(target, HEARTBEAT, 1, beat(group, a, base, topic_partitions=owned)))
        seen["beat once it is free"] = await classic_beat(target, group, b, joined.generation_id)
        again = await classic_join(target, group, topic, b)
        seen["rejoin"] = (again.error_code, again.generation_id - base)
        synced = await classic_sync(target, group, b, again.generation_id)
        seen["sync after rejoining"] = (synced.error_code, assigned(synced.assignment))
        seen["beat when reconciled"] = await classic_beat(target, group, b, again.generation_id)
        seen["beat at an old generation"] = await classic_beat(target, group, b, joined.generation_id)
        seen["unknown member"] = await classic_beat(target, group, "stranger", again.generation_id)
        seen["consumer member's id in a classic heartbeat"] = await classic_beat(target, group, a, base + 1)
        commit = await call(target, OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": again.generation_id - 1, "member_id": b,
            "group_instance_id": None, "retention_time_ms": -1, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]})
        seen["commit at an old generation"] = commit.topics[0].partitions[0].error_code
        described = await call(target, DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})
        seen["described"] = sorted((m.member_type, m.member_epoch - base, sorted(
            p for t in m.assignment.topic_partitions for p in t.partitions)) for m in described.groups[0].members)
        seen["type"] = await group_type(target, group)
        other_protocol = await call(target, JOIN_GROUP, 5, {**join_request(group, topic), "protocol_type": "connect"})
        seen["another protocol type"] = other_protocol.error_code
        left = await call(target, LEAVE_GROUP, 4, {"group_id": group, "members": [
            {"member_id": b, "group_instance_id": None, "reason": None},
            {"member_id": "stranger", "group_instance_id": None, "reason": None}]})
        seen["leave"] = (left.error_code, [m.error_code for m in left.members])
        seen["a after b left"] = relative(await call(target, HEARTBEAT, 1, beat(group, a, base + 1)))
        seen["type after"] = await group_type(target, group)
        return seen
    seen = await same(targets, scenario)
    assert seen["join without id"] == (79, True) and seen["sync after rejoining"] == (0, [1])
    assert seen["described"] == [(0, 1, [1]), (1, 1, [0])] and seen["type after"] == [("Stable", "consumer")]


async def test_a_running_classic_group_upgrades_and_downgrades(targets, topic):
    """A classic group of two members; one restarts with the consumer protocol: the group becomes a consumer
    group at the classic generation, the remaining classic member is asked to rejoin and gives a partition
    up. When the consumer member leaves, the group is classic again and rebalances."""
    async def scenario(target):
        await created(target, topic, 2)
        group = f"g-{topic}"
        await coordinator_found(target, group)
        seen = {}
        first = await settled(lambda: classic_join(target, group, topic),
                              lambda a: a.error_code not in (COORDINATOR_LOADING, NOT_COORDINATOR))
        c = first.member_id
        joined = await classic_join(target, group, topic, c)
        generation = joined.generation_id
        synced = await classic_sync(target, group, c, generation, [
            {"member_id": c, "assignment": ConsumerProtocolAssignment(
                version=0, assigned_partitions=[(topic, [0, 1])], user_data=None).encode()}])
        seen["classic"] = (joined.error_code, joined.leader == c, synced.error_code, assigned(synced.assignment),
                           await group_type(target, group))
        n = uuid.uuid4().hex
        answer = await call(target, HEARTBEAT, 1, {
            "group_id": group, "member_id": n, "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []})
        seen["upgrade"] = (answer.error_code, answer.member_epoch - generation, shape(answer)[3])
        seen["type after the upgrade"] = await group_type(target, group)
        seen["classic beat"] = await classic_beat(target, group, c, generation)
        rejoined = await classic_join(target, group, topic, c, owned=[0, 1])
        seen["classic rejoins owning both"] = (rejoined.error_code, rejoined.generation_id - generation)
        synced = await classic_sync(target, group, c, rejoined.generation_id)
        seen["its sync"] = (synced.error_code, assigned(synced.assignment))
        kept = assigned(synced.assignment)
        again = await classic_join(target, group, topic, c, owned=kept)
        seen["classic rejoins after revoking"] = (again.error_code, again.generation_id - generation)
        synced = await classic_sync(target, group, c, again.generation_id)
        seen["its second sync"] = (synced.error_code, assigned(synced.assignment))
        answer = await call(target, HEARTBEAT, 1, beat(group, n, answer.member_epoch))
        seen["consumer member"] = (answer.error_code, answer.member_epoch - generation, shape(answer)[3])
        described = await call(target, DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})
        g = described.groups[0]
        seen["described"] = (g.group_state, g.group_epoch - generation, sorted(
            (m.member_type, m.member_epoch - generation) for m in g.members))
        seen["consumer member leaves"] = (await call(target, HEARTBEAT, 1, beat(group, n, -1))).error_code
        seen["type after the downgrade"] = await group_type(target, group)
        seen["classic beat after the downgrade"] = await classic_beat(target, group, c, again.generation_id)
        back = await classic_join(target, group, topic, c, owned=kept)
        seen["rejoined the classic group"] = (back.error_code, back.generation_id - generation, back.leader == c,
                                              len(back.members))
        return seen
    seen = await same(targets, scenario)
    assert seen["type after the upgrade"] == [("Reconciling", "consumer")] and seen["its sync"] == (0, [0])
    assert seen["type after the downgrade"] == [("PreparingRebalance", "classic")]


async def test_a_classic_static_member_taking_the_last_consumer_members_place_turns_the_group_classic(
        targets, topic):
    """Kafka downgrades at that JoinGroup: the group is classic and Stable, and the member syncs into the
    partitions its predecessor was assigned."""
    async def scenario(target):
        await created(target, topic, 2)
        group = f"g-{topic}"
        await coordinator_found(target, group)
        first = await settled(lambda: classic_join(target, group, topic),
                              lambda a: a.error_code not in (COORDINATOR_LOADING, NOT_COORDINATOR))
        c = first.member_id
        joined = await classic_join(target, group, topic, c)
        await classic_sync(target, group, c, joined.generation_id, [
            {"member_id": c, "assignment": ConsumerProtocolAssignment(
                version=0, assigned_partitions=[(topic, [0, 1])], user_data=None).encode()}])
        n = uuid.uuid4().hex
        answer = await call(target, HEARTBEAT, 1, {
            "group_id": group, "member_id": n, "member_epoch": 0, "instance_id": "instance-n", "rack_id": None,
            "rebalance_timeout_ms": 30000, "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []})
        seen = {"upgrade": (answer.error_code, answer.member_epoch - joined.generation_id)}
        replaced = await call(target, JOIN_GROUP, 5, {**join_request(group, topic), "group_instance_id": "instance-n"})
        seen["static classic join"] = (replaced.error_code, replaced.generation_id - joined.generation_id,
                                       replaced.leader, len(replaced.members))
        seen["type"] = await group_type(target, group)
        synced = await classic_sync(target, group, replaced.member_id, replaced.generation_id)
        seen["sync"] = (synced.error_code, assigned(synced.assignment))
        seen["the other member"] = await classic_beat(target, group, c, joined.generation_id)
        seen["the replaced consumer member"] = (await call(target, HEARTBEAT, 1, beat(
            group, n, answer.member_epoch, instance_id="instance-n"))).error_code
        return seen
    seen = await same(targets, scenario)
    assert seen["type"] == [("Stable", "classic")], seen
