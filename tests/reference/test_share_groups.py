"""KIP-932 share groups over raw frames: ShareGroupHeartbeat's refusals, share session epochs, acknowledgements
of records a member does not hold, share group offsets, and the edges of ShareFetch and ShareAcknowledge (how a
ShareFetch's answer is shaped: test_share_fetches.py)."""

import re
import time
import uuid

import pytest

from kbroker.client.connection import KafkaConnection
from kbroker.protocol.types import uuid_to_str
from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_groups import coordinator_found, fill, set_group_config
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference

HEARTBEAT, FETCH, ACKNOWLEDGE = 76, 78, 79
COORDINATOR_LOADING, NOT_COORDINATOR = 14, 16


def heartbeat(group: str, member: str, epoch: int, topics=None, rack=None) -> dict:
    return {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": rack,
            "subscribed_topic_names": topics}


def share_fetch(group, member, epoch, topic_id=None, partitions=(), acks=None, max_wait=0, max_records=100,
                forgotten=(), min_bytes=1) -> dict:
    return {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait_ms": max_wait,
            "min_bytes": min_bytes, "max_bytes": 1 << 20, "max_records": max_records, "batch_size": max_records,
            "share_acquire_mode": 0, "is_renew_ack": False,
            "topics": [{"topic_id": topic_id, "partitions": [
                {"partition_index": p, "acknowledgement_batches": (acks or {}).get(p, [])} for p in partitions]}]
            if partitions else [],
            "forgotten_topics_data": [{"topic_id": topic_id, "partitions": list(forgotten)}] if forgotten else []}


async def assigned_member(target, group: str, member: str, topic: str) -> None:
    """Join, then heartbeat until the member is assigned: Kafka initializes a share partition's state before it
    assigns it, and a fetch before that finds nothing to acquire."""
    joined = await settled(lambda: call(target, HEARTBEAT, 1, heartbeat(group, member, 0, [topic])),
                           lambda a: a.error_code not in (COORDINATOR_LOADING, NOT_COORDINATOR))
    if joined.assignment is None or not joined.assignment.topic_partitions:
        await settled(lambda: call(target, HEARTBEAT, 1, heartbeat(group, member, joined.member_epoch)),
                      lambda a: a.error_code or a.assignment is not None and a.assignment.topic_partitions)


async def share_group_with_member(target, topic: str) -> tuple[str, str]:
    """A one-partition topic and a share group reading it from the earliest offset, with one assigned member."""
    await create(target, topic)
    group, member = f"s-{topic}", uuid.uuid4().hex
    await coordinator_found(target, group)
    assert await set_group_config_async(target, group) == 0
    await assigned_member(target, group, member, topic)
    return group, member


async def three_records_and_a_connection(target, topic: str, client_id: str = "member"):
    """``share_group_with_member``, three records written, the topic's id and a connection to fetch on:
    (group, member, topic id, connection)."""
    group, member = await share_group_with_member(target, topic)
    fill(target, topic, 1, per_partition=3)
    tid = await topic_id_of(target, topic)
    return group, member, tid, await KafkaConnection.open("127.0.0.1", target.port, client_id=client_id)


async def topic_id_of(target, topic: str) -> bytes:
    answer = await call(target, 3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False})
    return bytes(answer.topics[0].topic_id)


async def test_share_group_heartbeat_refusals(targets, topic):
    async def scenario(target):
        await create(target, topic)
        group, member = f"s-{topic}", uuid.uuid4().hex
        await coordinator_found(target, group)
        joined = await settled(lambda: call(target, HEARTBEAT, 1, heartbeat(group, member, 0, [topic])),
                               lambda a: a.error_code not in (COORDINATOR_LOADING, NOT_COORDINATOR))
        # The join is answered with nothing; the partition comes at a later heartbeat, once its share state is
        # initialized, at the group's next epoch.
        assigned = await settled(lambda: call(target, HEARTBEAT, 1, heartbeat(group, member, joined.member_epoch)),
                                 lambda a: a.error_code or a.assignment is not None and a.assignment.topic_partitions)
        seen = {"join": (joined.error_code, joined.member_epoch, joined.assignment.topic_partitions),
                "assigned": (assigned.member_epoch,
                             sorted(p for t in assigned.assignment.topic_partitions for p in t.partitions))}
        joined = assigned
        for name, body in [("no member id", heartbeat(group, "", 0, [topic])),
                           ("no group id", heartbeat("", member, 0, [topic])),
                           ("empty rack", heartbeat(group, member, 0, [topic], rack="")),
                           ("join without topics", heartbeat(group, uuid.uuid4().hex, 0, [])),
                           ("epoch -2", heartbeat(group, member, -2)),
                           ("stranger", heartbeat(group, "stranger", 3)),
                           ("unknown group", heartbeat(f"{group}-none", member, 3)),
                           ("leaving an unknown group", heartbeat(f"{group}-none", member, -1)),
                           ("epoch ahead", heartbeat(group, member, joined.member_epoch + 5)),
                           ("leave", heartbeat(group, member, -1)),
                           ("after leaving", heartbeat(group, member, joined.member_epoch))]:
            answer = await call(target, HEARTBEAT, 1, body)
            message = answer.error_message and answer.error_message.replace(member, "<m>")
            seen[name] = (answer.error_code, message, answer.member_epoch if answer.error_code == 0 else None)
        return seen
    await same(targets, scenario)


async def test_a_share_member_heartbeating_at_its_previous_epoch_is_taken(targets, topic):
    """A member whose epoch moved (another member joined) may heartbeat at its previous epoch (the answer with
    the new one may have been lost): Kafka takes it and answers the current epoch; an epoch older than that
    fences the member, naming the previous epoch."""
    async def scenario(target):
        await create(target, topic)
        group, first = f"s-{topic}", uuid.uuid4().hex
        await coordinator_found(target, group)
        epochs = []

        async def moved():   # (heartbeats at its epoch until the group's new one reaches it)
            answer = await settled(lambda: call(target, HEARTBEAT, 1, heartbeat(group, first, epochs[-1])),
                                   lambda a: a.error_code or a.member_epoch > epochs[-1])
            epochs.append(answer.member_epoch)
        joined = await settled(lambda: call(target, HEARTBEAT, 1, heartbeat(group, first, 0, [topic])),
                               lambda a: a.error_code not in (COORDINATOR_LOADING, NOT_COORDINATOR))
        epochs.append(joined.member_epoch)
        for _ in range(2):
            await call(target, HEARTBEAT, 1, heartbeat(group, uuid.uuid4().hex, 0, [topic]))
            await moved()
        previous = await call(target, HEARTBEAT, 1, heartbeat(group, first, epochs[-2]))
        older = await call(target, HEARTBEAT, 1, heartbeat(group, first, epochs[-3]))
        return ((previous.error_code, previous.member_epoch == epochs[-1]),
                (older.error_code, older.error_message and re.sub(r"[0-9]+", "N", older.error_message)))
    await same(targets, scenario)


async def test_a_member_leaving_moves_the_group_epoch_and_the_next_heartbeat_assigns(targets, topic):
    """Two members sharing a two-partition topic, then one leaves: the group's epoch moves at the leave and its
    assignment epoch at the other's next heartbeat, which is given both partitions (its target then falls short
    of the initialized partitions, so the epoch moves once more)."""
    async def scenario(target):
        await create(target, topic, 2)
        group, first, second = f"s-{topic}", uuid.uuid4().hex, uuid.uuid4().hex
        await coordinator_found(target, group)
        await assigned_member(target, group, first, topic)

        async def epochs():
            described = await call(target, 77, 1, {"group_ids": [group], "include_authorized_operations": False})
            g = described.groups[0]
            return g.group_epoch, g.assignment_epoch, sorted((m.member_epoch, sum(
                len(t.partitions) for t in m.assignment.topic_partitions)) for m in g.members)

        def beat(member, epoch):
            return call(target, HEARTBEAT, 1, heartbeat(group, member, epoch))

        def held(answer):
            return answer.assignment and sorted(p for t in answer.assignment.topic_partitions for p in t.partitions)
        seen = {"one member": await epochs()}
        joined = await call(target, HEARTBEAT, 1, heartbeat(group, second, 0, [topic]))
        seen["second joined"] = (joined.error_code, joined.member_epoch, len(held(joined)))
        seen["first moved"] = (await beat(first, 2)).member_epoch
        seen["two members"] = await epochs()
        left = await call(target, HEARTBEAT, 1, heartbeat(group, second, -1))
        seen["second left"] = (left.error_code, left.member_epoch, await epochs())
        again = await beat(first, 3)
        seen["first's next heartbeat"] = (again.error_code, again.member_epoch, held(again), await epochs())
        return seen
    await same(targets, scenario)


async def test_the_share_assignor_is_sticky(targets, topic):
    """Four partitions, one member, then a second and a third joining: Kafka's simple assignor keeps what each
    member held and moves only what the balance needs: a member already there gives some up, and is given
    none of another's (which member gets which, and so how many each keeps, is Kafka's hash order)."""
    async def scenario(target):
        await create(target, topic, 4)
        group = f"s-{topic}"
        await coordinator_found(target, group)
        members, epochs = [uuid.uuid4().hex for _ in range(3)], {}
        await assigned_member(target, group, members[0], topic)
        epochs[members[0]] = 2

        async def settle() -> dict:
            """Every member heartbeats at its epoch until all hold their targets at the group's epoch: what
            each holds, as ShareGroupDescribe tells."""
            async def round_of_heartbeats():
                for member in list(epochs):
                    answer = await call(target, HEARTBEAT, 1, heartbeat(group, member, epochs[member]))
                    assert answer.error_code == 0, answer
                    epochs[member] = answer.member_epoch
                described = await call(target, 77, 1, {"group_ids": [group], "include_authorized_operations": False})
                return described.groups[0]
            g = await settled(round_of_heartbeats, lambda g: g.group_epoch == g.assignment_epoch and all(
                m.member_epoch == g.group_epoch for m in g.members) and sum(
                len(t.partitions) for m in g.members for t in m.assignment.topic_partitions) == 4)
            return {m.member_id: {p for t in m.assignment.topic_partitions for p in t.partitions} for m in g.members}

        before = await settle()
        seen = {"alone": sorted(map(len, before.values()))}
        for joining in members[1:]:
            answer = await call(target, HEARTBEAT, 1, heartbeat(group, joining, 0, [topic]))
            epochs[joining] = answer.member_epoch
            after = await settle()
            seen[f"{len(epochs)} members"] = {"holding": sorted(map(len, after.values())),
                                              "members before only gave some up": all(
                                                  after[m] <= before[m] for m in before)}
            before = after
        return seen
    await same(targets, scenario)


async def test_a_share_group_grows_with_its_topics_and_subscription(targets, topic):
    """A partition added to the topic a member reads, then a second topic subscribed: each moves the group's
    epoch at the next heartbeat with only the initialized partitions assigned, and once the new partitions'
    state is initialized, the epoch moves again and the member is given them."""
    async def scenario(target):
        await create(target, topic, 1)
        await create(target, f"{topic}-more", 2)
        group, member = f"s-{topic}", uuid.uuid4().hex
        await coordinator_found(target, group)
        await assigned_member(target, group, member, topic)
        epoch = [2]

        def holding(count, topics=None):
            async def beat():
                answer = await call(target, HEARTBEAT, 1, heartbeat(group, member, epoch[0], topics))
                epoch[0] = answer.member_epoch if not answer.error_code else epoch[0]
                if answer.assignment is not None:
                    seen.append((answer.member_epoch, sorted(len(t.partitions) for t in
                                                             answer.assignment.topic_partitions)))
                return answer
            return settled(beat, lambda a: a.error_code or a.assignment is not None and sum(
                len(t.partitions) for t in a.assignment.topic_partitions) == count)
        seen = []
        grown = await call(target, 37, 3, {"topics": [{"name": topic, "count": 2, "assignments": None}],
                                           "timeout_ms": 10000, "validate_only": False})
        assert grown.results[0].error_code == 0, grown
        await holding(2)
        await holding(4, [topic, f"{topic}-more"])
        return seen
    await same(targets, scenario)


async def test_a_share_member_subscribed_to_a_topic_before_it_exists(targets, topic):
    """A member subscribes to a topic there is not yet: it is given nothing, and once the topic is created its
    partitions are assigned (the group's epoch moving for the new topic, then for its initialized state)."""
    async def scenario(target):
        group, member = f"s-{topic}", uuid.uuid4().hex
        await coordinator_found(target, group)
        joined = await settled(lambda: call(target, HEARTBEAT, 1, heartbeat(group, member, 0, [topic])),
                               lambda a: a.error_code not in (COORDINATOR_LOADING, NOT_COORDINATOR))
        seen = [("joined", joined.error_code, joined.member_epoch, len(joined.assignment.topic_partitions))]
        again = await call(target, HEARTBEAT, 1, heartbeat(group, member, joined.member_epoch))
        seen.append(("no topic yet", again.error_code, again.member_epoch, again.assignment))
        await create(target, topic, 2)
        epoch = [again.member_epoch]

        async def beat():
            answer = await call(target, HEARTBEAT, 1, heartbeat(group, member, epoch[0]))
            epoch[0] = answer.member_epoch if not answer.error_code else epoch[0]
            if answer.assignment is not None:
                seen.append(("assigned", answer.member_epoch, sorted(
                    p for t in answer.assignment.topic_partitions for p in t.partitions)))
            return answer
        await settled(beat, lambda a: a.error_code or a.assignment is not None and a.assignment.topic_partitions)
        return seen
    await same(targets, scenario)


async def test_a_share_group_at_its_maximum_size(targets, topic):
    """``group.share.max.size`` members (200, the default of both brokers) join; the next is refused
    GROUP_MAX_SIZE_REACHED in Kafka's words, and one more fits once a member left."""
    async def scenario(target):
        await create(target, topic)
        group = f"s-{topic}"
        await coordinator_found(target, group)
        conn = await KafkaConnection.open("127.0.0.1", target.port, client_id="member")
        try:
            members, joined = [uuid.uuid4().hex for _ in range(200)], []
            for m in members:   # (Kafka's coordinator may still be loading the group's shard at first)
                joined.append(await settled(lambda: conn.request(HEARTBEAT, 1, heartbeat(group, m, 0, [topic])),
                                            lambda a: a.error_code not in (COORDINATOR_LOADING, NOT_COORDINATOR)))
            refused = await conn.request(HEARTBEAT, 1, heartbeat(group, uuid.uuid4().hex, 0, [topic]))
            left = await conn.request(HEARTBEAT, 1, heartbeat(group, members[0], -1))
            later = await conn.request(HEARTBEAT, 1, heartbeat(group, uuid.uuid4().hex, 0, [topic]))
        finally:
            await conn.close()
        return {"joined": sorted({a.error_code for a in joined}),
                "one more": (refused.error_code, refused.error_message, refused.member_epoch),
                "after a leave": (left.error_code, later.error_code)}
    await same(targets, scenario)


async def test_share_sessions_and_acknowledgements(targets, topic):
    """Each member keeps one connection, as a client does: Kafka 4.1+ closes a share session when the connection
    that opened it ends."""
    async def scenario(target):
        await create(target, topic)
        group, member, other = f"s-{topic}", uuid.uuid4().hex, uuid.uuid4().hex
        await coordinator_found(target, group)
        assert await set_group_config_async(target, group) == 0
        await assigned_member(target, group, member, topic)
        await assigned_member(target, group, other, topic)
        fill(target, topic, 1, per_partition=6)
        tid = await topic_id_of(target, topic)
        mine = await KafkaConnection.open("127.0.0.1", target.port, client_id="member")
        theirs = await KafkaConnection.open("127.0.0.1", target.port, client_id="other")
        ack = lambda first, last, types: [{"first_offset": first, "last_offset": last,   # noqa: E731
                                           "acknowledge_types": types}]
        acknowledge = lambda who, epoch, batches: {   # noqa: E731
            "group_id": group, "member_id": who, "share_session_epoch": epoch, "topics": [
                {"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": batches}]}]
            if batches else []}
        ranges = lambda p: [(r.first_offset, r.last_offset, r.delivery_count) for r in p.acquired_records]  # noqa
        try:
            seen = {}
            for name, epoch in [("continue without a session", 1), ("close without a session", -1)]:
                seen[name] = (await mine.request(FETCH, 1, share_fetch(group, member, epoch, tid, [0]))).error_code
            seen["acknowledge opening a session"] = (await mine.request(ACKNOWLEDGE, 1, acknowledge(member, 0, [])
                                                                        )).error_code
            first = await mine.request(FETCH, 1, share_fetch(group, member, 0, tid, [0], max_wait=2000))
            part = first.responses[0].partitions[0]
            seen["first fetch"] = (first.error_code, first.acquisition_lock_timeout_ms > 0, part.error_code,
                                   ranges(part))
            seen["wrong epoch"] = (await mine.request(FETCH, 1, share_fetch(group, member, 5, tid, [0]))).error_code
            await theirs.request(FETCH, 1, share_fetch(group, other, 0, tid, [0]))
            stolen = await theirs.request(ACKNOWLEDGE, 1, acknowledge(other, 1, ack(0, 0, [1])))
            seen["acknowledging another's record"] = (stolen.error_code, [p.error_code for t in stolen.responses
                                                                          for p in t.partitions])
            mixed = await mine.request(ACKNOWLEDGE, 1, acknowledge(member, 1, ack(0, 2, [1, 2, 3])))
            seen["accept release reject"] = mixed.error_code, [p.error_code for t in mixed.responses
                                                               for p in t.partitions]
            again = await mine.request(ACKNOWLEDGE, 1, acknowledge(member, 2, ack(0, 0, [1])))
            seen["acknowledging a record accepted already"] = (again.error_code, [
                p.error_code for t in again.responses for p in t.partitions])
            # Acknowledgements ride on a fetch too (Kafka applies them beside the fetch, so what that fetch
            # acquires is not compared).
            riding = await mine.request(FETCH, 1, share_fetch(group, member, 3, tid, [0], acks={0: ack(3, 3, [1])}))
            seen["acknowledged on a fetch"] = riding.error_code, [p.acknowledge_error_code for t in riding.responses
                                                                  for p in t.partitions]
            seen["close"] = (await mine.request(ACKNOWLEDGE, 1, acknowledge(member, -1, []))).error_code
            # What the closed session's member held goes to the other member (Kafka releases it a moment later).
            got, epoch = [], 2
            for _ in range(20):
                answer = await theirs.request(FETCH, 1, share_fetch(group, other, epoch, tid, [0], max_wait=500))
                epoch += 1
                got += [r for t in answer.responses for p in t.partitions for r in ranges(p)]
                if sum(last - first + 1 for first, last, _ in got) >= 3:
                    break
            seen["the other member after the close"] = sorted(got)
            return seen
        finally:
            await mine.close()
            await theirs.close()
    await same(targets, scenario)


async def set_group_config_async(target, group: str) -> int:
    import asyncio
    return await asyncio.to_thread(set_group_config, target, group, share_auto_offset_reset="earliest")


async def two_of_five_accepted(target, topic: str) -> tuple[str, str]:
    """A share group with one member that fetched five records of a one-partition topic and accepted two."""
    group, member = await share_group_with_member(target, topic)
    fill(target, topic, 1, per_partition=5)
    tid = await topic_id_of(target, topic)
    conn = await KafkaConnection.open("127.0.0.1", target.port, client_id="member")
    try:
        await conn.request(FETCH, 1, share_fetch(group, member, 0, tid, [0], max_wait=2000))
        await conn.request(ACKNOWLEDGE, 1, {"group_id": group, "member_id": member, "share_session_epoch": 1,
                                            "topics": [{"topic_id": tid, "partitions": [{
                                                "partition_index": 0, "acknowledgement_batches": [
                                                    {"first_offset": 0, "last_offset": 1,
                                                     "acknowledge_types": [1]}]}]}]})
    finally:
        await conn.close()
    # (Kafka writes the acknowledgement's state a moment after it answered: wait for it)
    await settled(lambda: call(target, 90, 1, {"groups": [{"group_id": group, "topics": [
        {"topic_name": topic, "partitions": [0]}]}]}),
        lambda a: a.groups[0].topics and a.groups[0].topics[0].partitions[0].start_offset == 2)
    return group, member


async def test_share_group_offsets_once_the_topic_is_deleted_and_made_again(targets, topic):
    """An empty share group's offsets, named and all, after its topic was deleted and after one of the same name
    was made: the new topic's partitions have no state in the group."""
    async def scenario(target):
        group, member = await two_of_five_accepted(target, topic)
        await call(target, HEARTBEAT, 1, heartbeat(group, member, -1))

        async def described(topics):
            answer = await call(target, 90, 1, {"groups": [{"group_id": group, "topics": topics}]})
            return [(t.topic_name, [(p.partition_index, p.start_offset, p.lag, p.error_code) for p in t.partitions])
                    for t in answer.groups[0].topics]
        named = [{"topic_name": topic, "partitions": [0]}]
        seen = {"before": (await described(None), await described(named))}
        deleted = await call(target, 20, 6, {"topics": [{"name": topic, "topic_id": bytes(16)}], "timeout_ms": 10000})
        assert deleted.responses[0].error_code == 0
        await settled(lambda: call(target, 3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False}),
                      lambda a: a.topics[0].error_code == 3)   # UNKNOWN_TOPIC_OR_PARTITION
        seen["deleted"] = (await settled(lambda: described(None), lambda a: a == [], 10), await described(named))
        await create(target, topic)
        seen["made again"] = (await described(None), await described(named))
        return seen
    await same(targets, scenario)


async def test_a_share_members_topic_deleted_and_made_again(targets, topic):
    """A member reading a topic that is deleted, then made again under its name: its partitions leave the
    member's assignment, and the new topic's are assigned once their state is initialized, at Kafka's epochs."""
    async def scenario(target):
        await create(target, topic, 2)
        group, member = f"s-{topic}", uuid.uuid4().hex
        await coordinator_found(target, group)
        await assigned_member(target, group, member, topic)
        seen, epoch = [], [2]

        def holding(count):
            async def beat():
                answer = await call(target, HEARTBEAT, 1, heartbeat(group, member, epoch[0]))
                epoch[0] = answer.member_epoch if not answer.error_code else epoch[0]
                if answer.assignment is not None:
                    seen.append((answer.member_epoch, sorted(
                        p for t in answer.assignment.topic_partitions for p in t.partitions)))
                return answer
            return settled(beat, lambda a: a.error_code or a.assignment is not None and sum(
                len(t.partitions) for t in a.assignment.topic_partitions) == count)
        deleted = await call(target, 20, 6, {"topics": [{"name": topic, "topic_id": bytes(16)}], "timeout_ms": 10000})
        assert deleted.responses[0].error_code == 0
        await holding(0)
        await create(target, topic, 3)
        await holding(3)
        return seen
    await same(targets, scenario)


@pytest.mark.parametrize("version", [0, 1])
async def test_describe_share_group_offsets(targets, topic, version):
    """After a member accepted two records of five: the start offset, and from v1 the lag; all the group's
    share partitions, the same once its member left."""
    async def scenario(target):
        group, member = await two_of_five_accepted(target, topic)
        seen = {}
        for name, topics in [("named", [{"topic_name": topic, "partitions": [0]}]), ("all", None),
                             ("unknown topic", [{"topic_name": f"{topic}-none", "partitions": [0]}])]:
            # (not a partition past the topic's: Kafka 4.2.1 answers it after about 28 s, its persister retrying)
            answer = await call(target, 90, version, {"groups": [{"group_id": group, "topics": topics}]})
            g = answer.groups[0]
            seen[name] = (g.error_code, g.error_message, [
                (t.topic_name.replace(topic, "<t>"), t.topic_id != bytes(16), [
                    (p.partition_index, p.start_offset, p.get("lag"), p.error_code, p.error_message)
                    for p in t.partitions]) for t in g.topics])
        # (not an empty group id: Kafka's answer for it depends on what other scenarios left on the broker)
        for name, group_id in [("no such group", f"{group}-none")]:
            other = await call(target, 90, version, {"groups": [{"group_id": group_id, "topics": None}]})
            g = other.groups[0]
            seen[name] = (g.error_code, g.error_message and g.error_message.replace(topic, "<t>"))
        # An empty group: what it initialized is still described (its lag while its consumers are down)
        assert (await call(target, HEARTBEAT, 1, heartbeat(group, member, -1))).error_code == 0
        answer = await call(target, 90, version, {"groups": [{"group_id": group, "topics": None}]})
        seen["all, once the member left"] = [(t.topic_name, [(p.partition_index, p.start_offset, p.get("lag"))
                                                             for p in t.partitions]) for t in answer.groups[0].topics]
        return seen
    await same(targets, scenario)


async def test_find_coordinator_of_a_share_partition(targets, topic):
    """FindCoordinator v6 (KIP-932): the share coordinator of ``group:topicId:partition``, for brokers."""
    async def scenario(target):
        await create(target, topic)
        tid = await topic_id_of(target, topic)
        key = f"s-{topic}:{uuid_to_str(tid)}:0"
        seen = {}
        for name, keys in [("share key", [key]), ("malformed", ["no-colons"])]:
            answer = await settled(lambda: call(target, 10, 6, {"key_type": 2, "coordinator_keys": keys}),
                                   lambda a: a.coordinators[0].error_code not in (15,))   # COORDINATOR_NOT_AVAILABLE
            seen[name] = [(c.error_code, c.node_id >= 0) for c in answer.coordinators]
        return seen
    await same(targets, scenario)


SHARE_STATE_CALLS = {   # the share coordinator's APIs, as a broker sends them: (api key, a partition's fields)
    "initialize": (83, {"state_epoch": 0, "start_offset": 0}),
    "read": (84, {"leader_epoch": 0}),
    "write": (85, {"state_epoch": 0, "leader_epoch": 0, "start_offset": 0, "state_batches": [
        {"first_offset": 0, "last_offset": 0, "delivery_state": 2, "delivery_count": 1}]}),
    "delete": (86, {}),
    "summary": (87, {"leader_epoch": 0}),
}


@pytest.mark.parametrize("api", list(SHARE_STATE_CALLS))
async def test_the_share_coordinators_refusals(targets, topic, api):
    """Each share-state API (sent here as a broker would) for a topic id no topic has, a partition past the
    topic's, a negative partition, and a partition whose state was never initialized; twice, so that what the
    first call left shows (a write or a read makes no state; an initialization of a partition that does not
    exist makes none). Kafka's words are compared too."""
    async def scenario(target):
        await create(target, topic)
        tid = await topic_id_of(target, topic)
        group = f"s-{topic}"
        found = await settled(lambda: call(target, 10, 6, {"key_type": 2, "coordinator_keys": [
            f"{group}:{uuid_to_str(tid)}:0"]}), lambda a: a.coordinators[0].error_code == 0)
        assert found.coordinators[0].error_code == 0, found   # (the share-state topic made)
        key, fields = SHARE_STATE_CALLS[api]
        seen = {}
        for case, topic_id, partition in [("unknown topic id", uuid.uuid4().bytes, 0), ("past the topic's", tid, 3),
                                          ("negative", tid, -1), ("never initialized", tid, 0)]:
            body = {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": [
                {"partition": partition, **fields}]}]}
            for attempt in range(2):   # (the first until the key's shard has loaded: NOT_COORDINATOR before)
                answer = await settled(lambda: call(target, key, 0, body),
                                       lambda a: a.results[0].partitions[0].error_code not in (14, 15, 16))
                p = answer.results[0].partitions[0]
                seen[case, attempt] = (p.error_code, p.error_message, p.get("state_epoch"), p.get("start_offset"))
        return seen
    await same(targets, scenario)


async def test_a_share_fetch_from_a_member_outside_the_group(targets, topic):
    """A member id the share group does not know fetches and acknowledges: what Kafka answers it."""
    async def scenario(target):
        group, member, tid, conn = await three_records_and_a_connection(target, topic, "stranger")
        try:
            fetched = await conn.request(FETCH, 1, share_fetch(group, "stranger", 0, tid, [0], max_wait=1000))
            parts = [(p.error_code, [(r.first_offset, r.last_offset) for r in p.acquired_records])
                     for t in fetched.responses for p in t.partitions]
            return {"fetch": (fetched.error_code, parts)}
        finally:
            await conn.close()
    await same(targets, scenario)


async def test_a_share_fetch_for_a_group_that_never_joined_leaves_no_state(targets, topic):
    """A ShareFetch naming a group no member joined: its partition is refused UNKNOWN_SERVER_ERROR (the share
    coordinator holds no state for it, and the partition's leader makes none), and the group has no start offset
    after it. A member that joins then is assigned the partition, whose state exists from then on with no start
    offset until a fetch loads it; the member's fetch reads from the group's reset offset."""
    async def scenario(target):
        await create(target, topic)
        fill(target, topic, 1, per_partition=3)
        tid, group = await topic_id_of(target, topic), f"never-{topic}"
        await coordinator_found(target, group)

        def first_fetch(member: str):   # (on a connection of its own: a first fetch's load can outlast its wait)
            return call(target, FETCH, 1, share_fetch(group, member, 0, tid, [0], max_wait=500))
        fetched = await settled(lambda: first_fetch(str(uuid.uuid4())), lambda a: a.responses)

        async def start_offsets():
            answer = await call(target, 90, 1, {"groups": [{"group_id": group, "topics": [
                {"topic_name": topic, "partitions": [0]}]}]})
            return [(p.start_offset, p.lag, p.error_code) for t in answer.groups[0].topics for p in t.partitions]
        seen = {"fetch": [(p.error_code, len(p.acquired_records)) for t in fetched.responses for p in t.partitions],
                "offsets after the fetch": await start_offsets()}
        assert await set_group_config_async(target, group) == 0
        member = uuid.uuid4().hex
        await assigned_member(target, group, member, topic)
        seen["offsets once assigned"] = await start_offsets()
        acquired = await settled(lambda: first_fetch(member),
                                 lambda a: any(p.acquired_records for t in a.responses for p in t.partitions))
        seen["member's fetch"] = [(p.error_code, [(r.first_offset, r.last_offset) for r in p.acquired_records])
                                  for t in acquired.responses for p in t.partitions]
        return seen
    await same(targets, scenario)


@pytest.mark.parametrize("version", [0, 1])
async def test_list_config_resources(targets, topic, version):
    """ListConfigResources (KIP-1142): a topic and a group with a config of its own, by type."""
    async def scenario(target):
        await create(target, topic)
        group = f"s-{topic}"
        assert await set_group_config_async(target, group) == 0
        # (Kafka's brokers list what their metadata image holds, which takes the controller's record of the
        # topic and the group's config a moment after each was answered: wait until it holds both, asking at v1,
        # as v0 lists client metrics resources only)
        await settled(lambda: call(target, 74, 1, {"resource_types": []}),
                      lambda a: {topic, group} <= {r.resource_name for r in a.config_resources})
        seen = {}
        for name, types in [("all", []), ("topics", [2]), ("groups", [32]), ("client metrics", [16]),
                            ("brokers", [4]), ("unknown type", [99])]:
            answer = await call(target, 74, version, {"resource_types": types})
            mine = sorted((r.resource_name, r.get("resource_type")) for r in answer.config_resources
                          if r.resource_name in (topic, group))
            brokers = sum(1 for r in answer.config_resources if r.get("resource_type") == 4)
            seen[name] = (answer.error_code, mine, brokers)
        return seen
    await same(targets, scenario)


def one(first, last, kind=1) -> list[dict]:
    return [{"first_offset": first, "last_offset": last, "acknowledge_types": [kind]}]


@pytest.mark.parametrize("case", [
    "a partition the topic lacks", "acknowledgements in the fetch that opens the session", "MaxRecords 0",
    "a forgotten partition the session lacks", "acknowledgements for a partition the topic lacks",
    "acknowledgements past the acquired records", "an unknown acknowledge type", "a closing fetch's acknowledgements",
    "a gap and an acceptance", "acknowledgement batches that overlap"])
async def test_share_fetch_edges(targets, topic, case):
    """What ShareFetch answers at its edges, partition by partition (error, acknowledgement error, acquired
    ranges); the member acquired offsets 0-4 first where the case needs it."""
    def shape(a):
        return a.error_code, a.error_message, sorted(
            (p.partition_index, p.error_code, p.error_message, p.acknowledge_error_code, p.acknowledge_error_message,
             len(p.acquired_records)) for t in a.responses for p in t.partitions)

    async def scenario(target):
        group, member = await share_group_with_member(target, topic)
        fill(target, topic, 1, per_partition=5)
        tid = await topic_id_of(target, topic)
        conn = await KafkaConnection.open("127.0.0.1", target.port, client_id="member")

        async def fetch(epoch, partitions, max_wait=0, **kw):
            return shape(await conn.request(FETCH, 1, share_fetch(group, member, epoch, tid, partitions,
                                                                   max_wait=max_wait, **kw)))
        try:
            if case == "a partition the topic lacks":
                return [await fetch(0, [0, 5], 1000)]
            if case == "acknowledgements in the fetch that opens the session":
                return [await fetch(0, [0], 1000, acks={0: one(0, 0)})]
            if case == "MaxRecords 0":
                return [await fetch(0, [0], 1000, max_records=0)]
            seen = [await fetch(0, [0], 2000)]
            seen.append(await {
                "a forgotten partition the session lacks": lambda: fetch(1, [], forgotten=[7]),
                "acknowledgements for a partition the topic lacks": lambda: fetch(1, [3], acks={3: one(0, 0)}),
                "acknowledgements past the acquired records": lambda: fetch(1, [0], acks={0: one(3, 9)}),
                "an unknown acknowledge type": lambda: fetch(1, [0], acks={0: one(0, 0, 7)}),
                "a closing fetch's acknowledgements": lambda: fetch(-1, [0], acks={0: one(0, 1)}),
                "a gap and an acceptance": lambda: fetch(1, [0], acks={0: [
                    {"first_offset": 0, "last_offset": 1, "acknowledge_types": [0, 1]}]}),
                "acknowledgement batches that overlap": lambda: fetch(1, [0], acks={0: one(0, 2) + one(1, 3)}),
            }[case]())
            return seen
        finally:
            await conn.close()
    await same(targets, scenario)


@pytest.mark.parametrize("case", [
    "a partition the topic lacks", "past the acquired records", "epoch 0 (no session)", "after the closing one",
    "an unknown topic id", "no partitions", "a wrong epoch", "batches that overlap", "v2 renewal",
    "a renewal at v1", "a v2 renewal the request does not flag"])
async def test_share_acknowledge_edges(targets, topic, case):
    """What ShareAcknowledge answers at its edges (the request's error, each partition's), after the member's
    first ShareFetch acquired offsets 0-4."""
    async def scenario(target):
        group, member = await share_group_with_member(target, topic)
        fill(target, topic, 1, per_partition=5)
        tid = await topic_id_of(target, topic)
        conn = await KafkaConnection.open("127.0.0.1", target.port, client_id="member")

        async def ack(epoch, parts, version=1, topic_id=tid, **extra):
            answer = await conn.request(ACKNOWLEDGE, version, {
                "group_id": group, "member_id": member, "share_session_epoch": epoch, **extra, "topics": [{
                    "topic_id": topic_id, "partitions": [{"partition_index": p, "acknowledgement_batches": b}
                                                         for p, b in parts.items()]}]})
            return answer.error_code, answer.error_message, sorted((p.partition_index, p.error_code, p.error_message)
                                             for t in answer.responses for p in t.partitions)
        try:
            seen = [(await conn.request(FETCH, 1, share_fetch(group, member, 0, tid, [0], max_wait=2000))).error_code]
            if case == "after the closing one":
                seen.append(await ack(-1, {0: one(0, 0)}))
            seen.append(await {
                "a partition the topic lacks": lambda: ack(1, {5: one(0, 0)}),
                "past the acquired records": lambda: ack(1, {0: one(2, 8)}),
                "epoch 0 (no session)": lambda: ack(0, {0: one(0, 0)}),
                "after the closing one": lambda: ack(1, {0: one(1, 1)}),
                "an unknown topic id": lambda: ack(1, {0: one(0, 0)}, topic_id=uuid.uuid4().bytes),
                "no partitions": lambda: ack(1, {}),
                "a wrong epoch": lambda: ack(5, {0: one(0, 0)}),
                "batches that overlap": lambda: ack(1, {0: one(0, 2) + one(1, 3)}),
                "v2 renewal": lambda: ack(1, {0: one(0, 1, 4)}, version=2, is_renew_ack=True),
                "a renewal at v1": lambda: ack(1, {0: one(0, 1, 4)}),
                "a v2 renewal the request does not flag": lambda: ack(1, {0: one(0, 1, 4)}, version=2,
                                                                      is_renew_ack=False),
            }[case]())
            return seen
        finally:
            await conn.close()
    await same(targets, scenario)


async def test_a_broker_holds_at_most_its_share_session_limit(targets, topic):
    """Past ``group.share.max.share.sessions`` (2,000 by default) a new share session is refused with
    SHARE_SESSION_LIMIT_REACHED, answered once the fetch's wait has passed; the sessions end by their final
    epoch, the last with its connection, and a new member's session opens again. (All but the last are
    closed by their final epoch: Kafka 4.2 closes only a connection's latest session at a disconnect, so
    the others would stay counted on the reference broker and refuse later scenarios' sessions.)"""
    async def scenario(target):
        group, _ = await share_group_with_member(target, topic)
        tid = await topic_id_of(target, topic)
        conn = await KafkaConnection.open("127.0.0.1", target.port, client_id="many")
        try:
            opened, refusal = 0, None
            while refusal is None and opened <= 2100:
                request = share_fetch(group, f"member-{opened}", 0, tid, [0], max_records=0)
                if opened >= 1990:   # (near the limit, each with a wait that a refusal must sit out)
                    request["max_wait_ms"] = 300
                began = time.monotonic()
                answer = await conn.request(FETCH, 1, request)
                if answer.error_code:
                    refusal = (answer.error_code, time.monotonic() - began >= 0.25)
                else:
                    opened += 1
            closed = {(await conn.request(FETCH, 1, share_fetch(group, f"member-{i}", -1))).error_code
                      for i in range(opened - 1)}
        finally:
            await conn.close()
        again = await KafkaConnection.open("127.0.0.1", target.port, client_id="again")
        try:
            reopened = await settled(lambda: again.request(FETCH, 1, share_fetch(group, "a-new-member", 0, tid, [0],
                                                                                  max_records=0)),
                                     lambda a: a.error_code == 0)
        finally:
            await again.close()
        return {"refusal": refusal, "opened at most 2,000": 1990 <= opened <= 2000, "closed": closed,
                "again": reopened.error_code}
    seen = await same(targets, scenario)
    assert seen["refusal"] == (133, True)
