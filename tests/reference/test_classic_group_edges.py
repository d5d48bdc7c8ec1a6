"""A classic group's SyncGroup, LeaveGroup, Heartbeat and JoinGroup out of turn, as raw frames side by side: a
stranger, another generation, a protocol the group does not speak, a static member's id misused, a group that
is not there."""

from __future__ import annotations

import asyncio

import pytest

from kbroker.client.connection import KafkaConnection
from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_groups import coordinator_found, join_request

pytestmark = pytest.mark.reference

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS = 11, 12, 13, 14, 15


async def member_of(target, group: str, instance: str | None = None):
    """A group whose only member has joined and synced: (member id, generation)."""
    await coordinator_found(target, group)
    join = join_request(group, group_instance_id=instance)
    first = await settled(lambda: call(target, JOIN_GROUP, 5, join), lambda a: a.error_code not in (14, 15, 16))
    joined = first if first.error_code == 0 else await call(target, JOIN_GROUP, 5, {**join,
                                                                                     "member_id": first.member_id})
    synced = await call(target, SYNC_GROUP, 5, {
        "group_id": group, "generation_id": joined.generation_id, "member_id": joined.member_id,
        "group_instance_id": instance, "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": joined.member_id, "assignment": b""}]})
    assert synced.error_code == 0, synced
    return joined.member_id, joined.generation_id


CASES = ["sync of a stranger", "sync of another generation", "sync of another protocol type",
         "sync of another protocol name", "sync in a group not there", "leave of a stranger",
         "leave of the member and a stranger", "leave in a group not there", "leave v1 of a stranger",
         "leave of a static member with another member id", "heartbeat in a group not there",
         "join with another protocol type", "join with an empty group id", "join of a static member twice"]


@pytest.mark.parametrize("case", CASES)
async def test_a_classic_group_out_of_turn(targets, topic, case):
    async def scenario(target):
        group = f"g-{topic}"
        static = "static-1" if "static" in case else None
        if "not there" in case or case == "join with an empty group id":
            await coordinator_found(target, group)
            member, generation = "nobody", 1
        else:
            member, generation = await member_of(target, group, static)

        async def sync(**fields):
            body = {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": static,
                    "protocol_type": "consumer", "protocol_name": "range", "assignments": [], **fields}
            return (await call(target, SYNC_GROUP, 5, body)).error_code

        async def leave(members, version=3):
            if version < 3:
                answer = await call(target, LEAVE_GROUP, version, {"group_id": group, "member_id": members[0][0]})
                return answer.error_code
            answer = await call(target, LEAVE_GROUP, version, {"group_id": group, "members": [
                {"member_id": m, "group_instance_id": i} for m, i in members]})
            return answer.error_code, sorted((m.member_id == member, m.group_instance_id, m.error_code)
                                             for m in answer.members)

        if case == "sync of a stranger":
            return await sync(member_id="stranger")
        if case == "sync of another generation":
            return await sync(generation_id=generation + 3)
        if case == "sync of another protocol type":
            return await sync(protocol_type="connect")
        if case == "sync of another protocol name":
            return await sync(protocol_name="roundrobin")
        if case == "sync in a group not there":
            return await sync()
        if case == "leave of a stranger":
            return await leave([("stranger", None)])
        if case == "leave of the member and a stranger":
            return await leave([(member, None), ("stranger", None)])
        if case == "leave in a group not there":
            return await leave([("nobody", None)])
        if case == "leave v1 of a stranger":
            return await leave([("stranger", None)], version=1)
        if case == "leave of a static member with another member id":
            return await leave([("other-id", static)])
        if case == "heartbeat in a group not there":
            return (await call(target, HEARTBEAT, 4, {"group_id": group, "generation_id": 1, "member_id": "nobody",
                                                      "group_instance_id": None})).error_code
        if case == "join with another protocol type":
            answer = await call(target, JOIN_GROUP, 5, {**join_request(group), "protocol_type": "connect"})
            return answer.error_code
        if case == "join with an empty group id":
            answer = await call(target, JOIN_GROUP, 5, join_request(""))
            return answer.error_code
        if case == "join of a static member twice":
            answer = await call(target, JOIN_GROUP, 5, join_request(group, group_instance_id=static))
            return answer.error_code, answer.member_id != member, answer.generation_id - generation
        raise AssertionError(case)
    await same(targets, scenario)


BETWEEN = ["a pending member joins after a generation completed without it", "a pending member leaves",
           "a heartbeat of the last generation while rebalancing", "describe while completing a rebalance",
           "a member that leaves while its join waits"]


@pytest.mark.parametrize("case", BETWEEN)
async def test_a_classic_group_between_generations(targets, topic, case):
    """Kafka 4.2's classic group across rebalances: a member id handed out with MEMBER_ID_REQUIRED stays the
    member's to join with until its session times out, even after a generation completed without it, and its
    leaving rebalances the group; a heartbeat's generation is checked before the group's state; DescribeGroups
    shows each member's last assignment while the group rebalances; a member that leaves while its JoinGroup
    waits is answered UNKNOWN_MEMBER_ID naming no member. Each case failed on kbroker before its fix."""
    async def scenario(target):
        group = f"g-{topic}"
        await coordinator_found(target, group)
        a, b, admin = [await KafkaConnection.open("127.0.0.1", target.port, client_id=f"c{i}") for i in range(3)]
        later = None

        async def state():
            return (await admin.request(DESCRIBE_GROUPS, 5, {"groups": [group],
                                                             "include_authorized_operations": False})).groups[0]

        async def until_rebalancing(answer):   # (a join parks while the group rebalances: no answer to wait on)
            while not answer.done() and (await state()).group_state != "PreparingRebalance":
                await asyncio.sleep(0.02)

        async def newcomer_waiting():
            """A new member whose JoinGroup (with the id it was handed) waits in the rebalance it started."""
            nonlocal later
            newcomer = (await b.request(JOIN_GROUP, 5, join_request(group))).member_id
            later = asyncio.ensure_future(b.request(JOIN_GROUP, 5, {**join_request(group), "member_id": newcomer}))
            await until_rebalancing(later)
            return newcomer

        async def heartbeat(member, generation):
            return (await a.request(HEARTBEAT, 4, {"group_id": group, "generation_id": generation,
                                                   "member_id": member, "group_instance_id": None})).error_code
        try:
            await settled(state, lambda g: g.error_code == 0)   # (Kafka's group shard may still be loading)
            if case.startswith("a pending member"):
                pending = (await b.request(JOIN_GROUP, 5, join_request(group))).member_id
            member, generation = await joined_and_synced(a, group, b"\x01")
            if case == "a pending member joins after a generation completed without it":
                later = asyncio.ensure_future(b.request(JOIN_GROUP, 5, {**join_request(group), "member_id": pending}))
                await until_rebalancing(later)
                rejoined = await a.request(JOIN_GROUP, 5, {**join_request(group), "member_id": member})
                other = await later
                return [(j.error_code, j.generation_id - generation, len(j.members)) for j in (rejoined, other)]
            if case == "a pending member leaves":
                left = await b.request(LEAVE_GROUP, 3, {"group_id": group, "members": [
                    {"member_id": pending, "group_instance_id": None}]})
                return [m.error_code for m in left.members], await heartbeat(member, generation)
            if case == "a heartbeat of the last generation while rebalancing":
                await newcomer_waiting()
                return await heartbeat(member, generation - 1), await heartbeat(member, generation)
            if case == "a member that leaves while its join waits":
                newcomer = await newcomer_waiting()
                left = await admin.request(LEAVE_GROUP, 3, {"group_id": group, "members": [
                    {"member_id": newcomer, "group_instance_id": None}]})
                answer = await later
                return [m.error_code for m in left.members], answer.error_code, answer.member_id
            if case == "describe while completing a rebalance":
                rejoined = await a.request(JOIN_GROUP, 5, {**join_request(group), "member_id": member})
                described = await state()
                return (rejoined.generation_id - generation, described.group_state,
                        [bytes(m.member_assignment) for m in described.members])
            raise AssertionError(case)
        finally:
            if later is not None:
                later.cancel()
            for conn in (a, b, admin):
                await conn.close()
    await same(targets, scenario)


async def joined_and_synced(conn, group: str, assignment: bytes) -> tuple[str, int]:
    """A member that joined an empty group (asked for its id first) and synced ``assignment`` for itself."""
    first = await settled(lambda: conn.request(JOIN_GROUP, 5, join_request(group)),
                          lambda a: a.error_code not in (14, 15, 16))
    joined = await conn.request(JOIN_GROUP, 5, {**join_request(group), "member_id": first.member_id})
    synced = await conn.request(SYNC_GROUP, 5, {
        "group_id": group, "generation_id": joined.generation_id, "member_id": joined.member_id,
        "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": joined.member_id, "assignment": assignment}]})
    assert (joined.error_code, synced.error_code) == (0, 0), (joined, synced)
    return joined.member_id, joined.generation_id
