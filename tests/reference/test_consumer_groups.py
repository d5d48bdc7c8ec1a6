"""KIP-848 consumer groups over raw frames: ConsumerGroupHeartbeat's refusals and epochs, what a member's
commit and fetch are checked against, and how the other group APIs show a consumer group."""

import asyncio
import uuid

from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_groups import coordinator_found
from tests.reference.test_produce_fetch import create

import pytest

pytestmark = pytest.mark.reference

HEARTBEAT, DESCRIBE, OFFSET_COMMIT, OFFSET_FETCH, LIST_GROUPS, DESCRIBE_GROUPS = 68, 69, 8, 9, 16, 15
COORDINATOR_LOADING, NOT_COORDINATOR = 14, 16


def join(group: str, member: str, topics=None, **fields) -> dict:
    return {"group_id": group, "member_id": member, "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 30000, "subscribed_topic_names": topics, "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": [], **fields}


def beat(group: str, member: str, epoch: int, **fields) -> dict:
    return {"group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": -1, "subscribed_topic_names": None, "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": None, **fields}


def shape(answer) -> tuple:
    """An answer without what differs between brokers by nature (topic ids, generated member ids)."""
    assignment = None
    if answer.assignment is not None:
        assignment = sorted(p for t in answer.assignment.topic_partitions for p in t.partitions)
    return answer.error_code, answer.error_message, answer.member_epoch, assignment


async def first_join(target, group: str, member: str, topics, version=1, **fields):
    await coordinator_found(target, group)
    return await settled(lambda: call(target, HEARTBEAT, version, join(group, member, topics, **fields)),
                         lambda a: a.error_code not in (COORDINATOR_LOADING, NOT_COORDINATOR))


async def test_heartbeat_refusals(targets, topic):
    async def scenario(target):
        await create(target, topic, partitions=2)
        group, member = f"g-{topic}", uuid.uuid4().hex
        joined = await first_join(target, group, member, [topic])
        # (the assignment of a first join is not compared: Kafka's coordinator may not see a topic made a moment
        # ago yet, and then assigns it at a later heartbeat; test_epochs_... waits for it)
        seen = {"join": (joined.error_code, joined.error_message, joined.member_epoch > 0)}
        for name, version, body in [
            ("v1 without a member id", 1, join(group, "", [topic])),
            ("v0 without a member id", 0, join(group, "", [topic])),
            ("no group id", 1, join("", member, [topic])),
            ("empty instance id", 1, join(group, member, [topic], instance_id="")),
            ("empty rack id", 1, join(group, member, [topic], rack_id="")),
            ("join without rebalance timeout", 1, join(group, member, [topic], rebalance_timeout_ms=-1)),
            ("join with owned partitions", 1, join(group, member, [topic], topic_partitions=None)),
            ("join without a subscription", 1, join(group, member, None)),
            ("epoch -3", 1, beat(group, member, -3)),
            ("static leave without instance id", 1, beat(group, member, -2)),
            ("unknown assignor", 1, join(group, member, [topic], server_assignor="sticky")),
            ("invalid regex", 1, join(group, member, None, subscribed_topic_regex="[")),
            ("epoch ahead", 1, beat(group, member, 7)),
            ("unknown member", 1, beat(group, "stranger", 1)),
            ("unknown group", 1, beat(f"{group}-none", member, 1)),
            ("leave of an unknown member", 1, beat(group, "stranger", -1)),
        ]:
            answer = await call(target, HEARTBEAT, version, body)
            # (a regular expression's own complaint is the library's: Kafka's is RE2/J's, kbroker's Python's)
            message = answer.error_message and answer.error_message.split(": ")[0]
            seen[name] = (answer.error_code, message)
        seen["v0 join makes the id"] = bool((await call(target, HEARTBEAT, 0, join(group, "", [topic]))).member_id)
        return seen
    seen = await same(targets, scenario)
    assert seen["join"] == (0, None, True) and seen["v1 without a member id"][0] == 42


async def settled_member(target, group: str, member: str, topics, partitions: int, **fields):
    """Join, then heartbeat until the member holds every partition: Kafka's coordinator may see a topic made a
    moment ago only at a later heartbeat (its metadata image lags), so the first target can be empty."""
    answer = await first_join(target, group, member, topics, **fields)
    epoch, held = answer.member_epoch, shape(answer)[3]
    for _ in range(50):
        if held == list(range(partitions)):
            return epoch
        await asyncio.sleep(0.1)
        answer = await call(target, HEARTBEAT, 1, beat(group, member, epoch))
        epoch = answer.member_epoch
        held = shape(answer)[3] if answer.assignment is not None else held
    raise AssertionError(f"{member} never held every partition: {held}")


async def test_epochs_of_a_joining_rejoining_and_leaving_member(targets, topic):
    """Epochs relative to the first member's once it holds everything (Kafka's may be one higher)."""
    async def scenario(target):
        await create(target, topic, partitions=3)
        group, a, b = f"g-{topic}", uuid.uuid4().hex, uuid.uuid4().hex
        base = await settled_member(target, group, a, [topic], 3)

        def relative(answer) -> tuple:
            code, message, epoch, held = shape(answer)
            return code, message and message.replace(str(base), "E").replace(str(base + 1), "E+1"), \
                epoch - base if epoch > 0 else epoch, held
        seen = {"a again": relative(await call(target, HEARTBEAT, 1, beat(group, a, base)))}
        seen["b joins"] = relative(await call(target, HEARTBEAT, 1, join(group, b, [topic])))
        # a must give up what goes to b: it keeps its epoch until it stops reporting those partitions.
        told = await call(target, HEARTBEAT, 1, beat(group, a, base))
        seen["a told to revoke"] = relative(told)
        kept = [p for t in told.assignment.topic_partitions for p in t.partitions] if told.assignment else []
        seen["b before a revoked"] = relative(await call(target, HEARTBEAT, 1, beat(group, b, base + 1)))
        topic_id = (await call(target, 3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False})).topics[0].topic_id
        owned = [{"topic_id": topic_id, "partitions": kept}]
        seen["a revoked"] = relative(await call(target, HEARTBEAT, 1, beat(group, a, base, topic_partitions=owned)))
        seen["b after a revoked"] = relative(await call(target, HEARTBEAT, 1, beat(group, b, base + 1)))
        seen["a with its previous epoch"] = relative(await call(target, HEARTBEAT, 1, beat(
            group, a, base, topic_partitions=owned)))
        seen["a rejoins at 0"] = relative(await call(target, HEARTBEAT, 1, join(group, a, [topic])))
        seen["b leaves"] = relative(await call(target, HEARTBEAT, 1, beat(group, b, -1)))
        seen["b again after leaving"] = (await call(target, HEARTBEAT, 1, beat(group, b, base + 1))).error_code
        described = await call(target, DESCRIBE, 1, {"group_ids": [group, f"{group}-none"],
                                                     "include_authorized_operations": False})
        # (sorted: Kafka answers the groups of each coordinator shard together, not in the order asked)
        seen["described"] = sorted((g.error_code, g.group_state, g.group_epoch - base, g.assignment_epoch - base,
                              g.assignor_name, sorted((m.member_epoch - base, m.member_type, sorted(
                                  p for t in m.assignment.topic_partitions for p in t.partitions))
                                  for m in g.members)) if g.error_code == 0 else (g.error_code, g.error_message)
                             for g in described.groups)
        return seen
    await same(targets, scenario)


async def test_a_revoking_member_that_unsubscribes_or_is_asked_for_more(targets, topic):
    """Kafka 4.2's reconciliation, with the range assignor so that the targets are the members' sorted order
    (a- < b- < c-). A member still revoking that unsubscribes gives up everything at once, at its epoch; one
    that revoked while the target took more from it revokes again at the same epoch, not the next."""
    async def scenario(target):
        await create(target, topic, partitions=4)
        group, tag = f"g-{topic}", uuid.uuid4().hex[:8]
        first, second, third = f"c-{tag}", f"a-{tag}", f"b-{tag}"
        base = await settled_member(target, group, first, [topic], 4, server_assignor="range")
        topic_id = (await call(target, 3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False})).topics[0].topic_id

        def relative(answer) -> tuple:
            code, _, epoch, held = shape(answer)
            return code, epoch - base if epoch > 0 else epoch, held

        def owned(*partitions):
            return [{"topic_id": topic_id, "partitions": list(partitions)}]
        seen = {"second joins": relative(await call(target, HEARTBEAT, 1, join(
            group, second, [topic], server_assignor="range")))}
        seen["first told to revoke"] = relative(await call(target, HEARTBEAT, 1, beat(group, first, base)))
        seen["third joins"] = relative(await call(target, HEARTBEAT, 1, join(
            group, third, [topic], server_assignor="range")))
        seen["first revoked, asked for more"] = relative(await call(target, HEARTBEAT, 1, beat(
            group, first, base, topic_partitions=owned(2, 3))))
        seen["first unsubscribes"] = relative(await call(target, HEARTBEAT, 1, beat(
            group, first, base, subscribed_topic_names=[])))
        described = await call(target, DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})
        seen["described"] = sorted((m.member_id[:1], m.member_epoch - base, sorted(
            p for t in m.assignment.topic_partitions for p in t.partitions)) for m in described.groups[0].members)
        return seen
    seen = await same(targets, scenario)
    assert seen["first revoked, asked for more"] == (0, 0, [3]) and seen["first unsubscribes"] == (0, 0, [])


async def test_what_moves_the_group_epoch_and_which_assignor_a_tie_picks(targets, topic):
    """A member's rack or server assignor changing does not bump the group epoch (only its subscription does, or
    the topics' metadata); the group's assignor is the one most members ask for, uniform on a tie."""
    async def scenario(target):
        await create(target, topic, partitions=2)
        group, first, second = f"g-{topic}", uuid.uuid4().hex, uuid.uuid4().hex
        base = await settled_member(target, group, first, [topic], 2, server_assignor="range")

        async def described():
            answer = await call(target, DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})
            g = answer.groups[0]
            return g.group_epoch - base, g.assignor_name
        seen = {}
        for name, fields in [("rack", {"rack_id": "r1"}), ("assignor", {"server_assignor": "uniform"}),
                             ("both back", {"rack_id": "r2", "server_assignor": "range"})]:
            answer = await call(target, HEARTBEAT, 1, beat(group, first, base, **fields))
            seen[name] = (answer.error_code, answer.member_epoch - base, await described())
        await call(target, HEARTBEAT, 1, beat(group, first, base, server_assignor="uniform"))
        joined = await call(target, HEARTBEAT, 1, join(group, second, [topic], server_assignor="range"))
        seen["a tie"] = (joined.error_code, await described())
        return seen
    seen = await same(targets, scenario)
    assert seen["rack"] == (0, 0, (0, "range")) and seen["a tie"] == (0, (1, "uniform"))


async def test_a_members_commits_and_fetches_are_checked_against_its_epoch(targets, topic):
    async def scenario(target):
        await create(target, topic, partitions=1)
        group, member = f"g-{topic}", uuid.uuid4().hex
        joined = await first_join(target, group, member, [topic])
        seen = {}
        for name, member_id, epoch in [("current", member, joined.member_epoch),
                                       ("stale", member, joined.member_epoch - 1),
                                       ("stranger", "stranger", joined.member_epoch),
                                       ("outsider", "", -1)]:
            commit = await call(target, OFFSET_COMMIT, 9, {
                "group_id": group, "generation_id_or_member_epoch": epoch, "member_id": member_id,
                "group_instance_id": None, "retention_time_ms": -1, "topics": [{"name": topic, "partitions": [
                    {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1,
                     "committed_metadata": ""}]}]})
            fetch = await call(target, OFFSET_FETCH, 9, {"groups": [{
                "group_id": group, "member_id": member_id or None, "member_epoch": epoch,
                "topics": [{"name": topic, "partition_indexes": [0]}]}], "require_stable": False})
            # (a group's error comes with no topics: Kafka's admin and consumers read the group's code only)
            seen[name] = (commit.topics[0].partitions[0].error_code, fetch.groups[0].error_code,
                          [(p.partition_index, p.error_code) for t in fetch.groups[0].topics for p in t.partitions])
        return seen
    seen = await same(targets, scenario)
    assert seen["current"] == (0, 0, [(0, 0)]) and seen["stranger"][1:] == (25, [])


async def test_the_group_apis_show_a_consumer_group(targets, topic):
    async def scenario(target):
        await create(target, topic, partitions=2)
        group, member = f"g-{topic}", uuid.uuid4().hex
        await first_join(target, group, member, [topic])
        seen = {}
        for types in ([], ["consumer"], ["classic"]):
            answer = await call(target, LIST_GROUPS, 5, {"states_filter": [], "types_filter": types})
            seen[f"listed {types}"] = [(g.group_state, g.protocol_type, g.group_type) for g in answer.groups
                                       if g.group_id == group]
        described = await call(target, DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations":
                                                             False})
        g = described.groups[0]
        seen["described"] = (g.error_code, g.group_state, g.protocol_type, g.protocol_data, len(g.members))
        seen["leave"] = (await call(target, HEARTBEAT, 1, beat(group, member, -1))).error_code
        deleted = await call(target, 42, 2, {"groups_names": [group]})
        seen["deleted once empty"] = [r.error_code for r in deleted.results]
        return seen
    await same(targets, scenario)
