"""The share coordinator's state as a share-partition leader sees it, over raw frames (KIP-932): writes that name
only the batches that changed join those stored, leader epochs recorded by reads fence older leaders, state
epochs move only with an initialization, and the summary checks nothing; and the state the admin APIs reset
and delete. (Its refusals of unknown topics and uninitialized state: test_share_groups.py.)"""

import random
import uuid

import pytest

from kbroker.protocol.types import uuid_to_str
from tests.reference.differential import call, same
from tests.reference.test_produce_fetch import create
from tests.reference.test_groups import coordinator_found, fill
from tests.reference.test_share_groups import (FETCH, HEARTBEAT, assigned_member, heartbeat, share_fetch,
                                               share_group_with_member, topic_id_of)
from tests.waiting import settled

pytestmark = pytest.mark.reference

INITIALIZE, READ, WRITE, SUMMARY = 83, 84, 85, 87
MOVING = (14, 15, 16)   # (the key's shard loading, not yet known, elsewhere)
STATES = (0, 2, 4)      # AVAILABLE, ACKNOWLEDGED, ARCHIVED: what a leader writes


class ShareKey:
    """One share partition's state on one target, through its coordinator's APIs as a broker sends them."""

    def __init__(self, target, group: str, topic_id: bytes) -> None:
        self.target, self.group, self.topic_id = target, group, topic_id

    async def _one(self, api: int, version: int, fields: dict):
        body = {"group_id": self.group, "topics": [{"topic_id": self.topic_id, "partitions": [
            {"partition": 0, **fields}]}]}
        answer = await settled(lambda: call(self.target, api, version, body),
                               lambda a: a.results[0].partitions[0].error_code not in MOVING)
        return answer.results[0].partitions[0]

    async def found(self) -> None:
        key = f"{self.group}:{uuid_to_str(self.topic_id)}:0"
        await settled(lambda: call(self.target, 10, 6, {"key_type": 2, "coordinator_keys": [key]}),
                      lambda a: a.coordinators[0].error_code == 0)

    async def initialize(self, state_epoch: int, start: int) -> int:
        return (await self._one(INITIALIZE, 0, {"state_epoch": state_epoch, "start_offset": start})).error_code

    async def write(self, batches, *, start=-1, state_epoch=0, leader_epoch=0) -> tuple:
        p = await self._one(WRITE, 0, {"state_epoch": state_epoch, "leader_epoch": leader_epoch, "start_offset": start,
                                       "state_batches": [{"first_offset": f, "last_offset": la, "delivery_state": s,
                                                          "delivery_count": c} for f, la, s, c in batches]})
        return p.error_code, p.error_message

    async def read(self, leader_epoch: int = 0) -> tuple:
        p = await self._one(READ, 0, {"leader_epoch": leader_epoch})
        return (p.error_code, p.error_message, p.state_epoch, p.start_offset,
                [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches])

    async def summary(self, leader_epoch: int = 0) -> tuple:
        p = await self._one(SUMMARY, 1, {"leader_epoch": leader_epoch})
        return p.error_code, p.state_epoch, p.leader_epoch, p.start_offset, p.delivery_complete_count


async def initialized_key(target, topic: str) -> ShareKey:
    await create(target, topic)
    key = ShareKey(target, f"s-{topic}", await topic_id_of(target, topic))
    await key.found()
    assert await key.initialize(0, 0) == 0
    return key


async def test_writes_join_the_stored_batches_where_they_are_further_along(targets, topic):
    """Each write names some batches: overlapping ones with a higher delivery count, or a higher state at the same
    count, win the offsets they share; touching ones alike become one; a start offset drops what lies below."""
    async def scenario(target):
        key = await initialized_key(target, topic)
        seen = []
        for batches, start in [([(0, 9, 0, 1)], -1),
                               ([(3, 5, 2, 1)], -1),               # acknowledged inside an available run
                               ([(4, 12, 0, 2)], -1),              # redelivered: a higher count across both
                               ([(5, 6, 2, 1)], -1),               # behind what is stored: changes nothing
                               ([(13, 15, 0, 2), (20, 22, 4, 3)], -1),   # touching the same count and state; a gap
                               ([(0, 30, 0, 0)], 2),               # count 0 loses everywhere; start moves to 2
                               ([], 14),                           # only the start offset, inside a batch
                               ([(14, 14, 2, 2), (16, 19, 4, 3)], -1),
                               ([(40, 44, 0, 1)], -1), ([(45, 49, 0, 0)], -1),
                               ([(45, 49, 0, 1)], -1)]:           # Kafka leaves these two touching batches apart
            seen.append((await key.write(batches, start=start), await key.read()))
        return seen
    await same(targets, scenario)


async def test_random_writes_agree_batch_for_batch(targets, topic):
    """A seeded run of writes of one to four batches, each anywhere in the first 40 offsets with any count and
    state a leader writes, the start offset now and then moved: the stored batches read back after every write."""
    rng = random.Random(932)
    writes = []
    start = 0
    for _ in range(40):
        batches = []
        for _ in range(rng.randint(1, 4)):
            first = rng.randint(0, 38)
            batches.append((first, rng.randint(first, min(first + 8, 39)), rng.choice(STATES), rng.randint(0, 3)))
        if rng.random() < 0.15:
            start = min(start + rng.randint(1, 4), 30)
            writes.append((batches, start))
        else:
            writes.append((batches, -1))

    async def scenario(target):
        key = await initialized_key(target, topic)
        return [(await key.write(batches, start=s), await key.read()) for batches, s in writes]
    await same(targets, scenario)


async def test_a_read_at_a_new_leader_epoch_fences_the_leaders_before_it(targets, topic):
    """A read at leader epoch 3 is stored: a write or read at 2 is then FENCED_LEADER_EPOCH (and a read at -1),
    a write at -1 or 3 is taken, a write never moves the epoch itself. The state epoch fences writes below it,
    moves only with an initialization (which keeps the leader epoch), and the summary fences no one."""
    async def scenario(target):
        key = await initialized_key(target, topic)
        seen = {"write at 5": await key.write([(0, 1, 2, 1)], leader_epoch=5),
                "summary after it": await key.summary(),
                "read at 3": await key.read(3),
                "summary after the read": await key.summary(0),
                "write at 2": await key.write([(2, 2, 2, 1)], leader_epoch=2),
                "read at 2": await key.read(2),
                "read at -1": await key.read(-1),
                "write at -1": await key.write([(3, 3, 2, 1)], leader_epoch=-1),
                "write at 3, state epoch 7": await key.write([(4, 4, 2, 1)], leader_epoch=3, state_epoch=7),
                "summary after those": await key.summary(-1),
                "initialize at state epoch 2": await key.initialize(2, 10),
                "write at state epoch 1": await key.write([(11, 11, 2, 1)], leader_epoch=3, state_epoch=1),
                "write at both older": await key.write([(11, 11, 2, 1)], leader_epoch=1, state_epoch=1),
                "write at state epoch -1": await key.write([(12, 12, 2, 1)], leader_epoch=3, state_epoch=-1),
                "read at 4": await key.read(4),
                "summary at the end": await key.summary(0)}
        return seen
    await same(targets, scenario)


async def state_summary(target, group: str, tid: bytes) -> tuple:
    """ReadShareGroupStateSummary of partition 0, as the group coordinator reads it, with the group's epoch now:
    (error, state epoch, group epoch, leader epoch, start offset, delivery complete count)."""
    body = {"group_id": group, "topics": [{"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": -1}]}]}
    answer = await settled(lambda: call(target, 87, 1, body),
                           lambda a: a.results[0].partitions[0].error_code not in (14, 15, 16))
    p = answer.results[0].partitions[0]
    described = await call(target, 77, 1, {"group_ids": [group], "include_authorized_operations": False})
    return (p.error_code, p.state_epoch, described.groups[0].group_epoch, p.leader_epoch, p.start_offset,
            p.delivery_complete_count)


async def test_alter_and_delete_share_group_offsets(targets, topic):
    """AlterShareGroupOffsets and DeleteShareGroupOffsets on a group with a member, then once it left; a member
    joining after the delete reads from the group's reset offset."""
    async def scenario(target):
        group, member = await share_group_with_member(target, topic)
        alter = lambda name, offset: {"group_id": group, "topics": [   # noqa: E731
            {"topic_name": name, "partitions": [{"partition_index": 0, "start_offset": offset}]}]}
        seen = {}
        answer = await call(target, 91, 0, alter(topic, 0))
        seen["alter with a member"] = (answer.error_code, answer.error_message, len(answer.responses))
        answer = await call(target, 92, 0, {"group_id": group, "topics": [{"topic_name": topic}]})
        seen["delete with a member"] = (answer.error_code, answer.error_message, len(answer.responses))
        await call(target, HEARTBEAT, 1, heartbeat(group, member, -1))
        answer = await call(target, 91, 0, alter(topic, 0))
        seen["alter"] = (answer.error_code, [[(p.partition_index, p.error_code) for p in t.partitions]
                                             for t in answer.responses])
        tid0 = await topic_id_of(target, topic)
        seen["the state after the alter"] = await state_summary(target, group, tid0)
        answer = await call(target, 91, 0, alter(f"{topic}-none", 0))
        seen["alter an unknown topic"] = (answer.error_code, [(t.topic_id, [(p.partition_index, p.error_code,
                                                                            p.error_message) for p in t.partitions])
                                                              for t in answer.responses])
        answer = await call(target, 91, 0, {"group_id": group, "topics": [
            {"topic_name": topic, "partitions": [{"partition_index": 7, "start_offset": 0}]}]})
        seen["alter an unknown partition"] = (answer.error_code, [
            (t.topic_id == tid0, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
            for t in answer.responses])
        answer = await call(target, 92, 0, {"group_id": group, "topics": [{"topic_name": topic}]})
        seen["delete"] = (answer.error_code, [t.error_code for t in answer.responses])
        # A member joining after the delete: the partition's state is made again, and read from the reset offset
        fill(target, topic, 1, per_partition=2)
        again, tid = uuid.uuid4().hex, await topic_id_of(target, topic)
        await assigned_member(target, group, again, topic)
        seen["the state made again"] = await state_summary(target, group, tid)
        fetched = await settled(lambda: call(target, FETCH, 1, share_fetch(group, again, 0, tid, [0], max_wait=500)),
                                lambda a: any(p.acquired_records for t in a.responses for p in t.partitions))
        seen["fetch after the delete"] = [(p.error_code, [(r.first_offset, r.last_offset) for r in p.acquired_records])
                                          for t in fetched.responses for p in t.partitions]
        answer = await call(target, 91, 0, {"group_id": f"{group}-none", "topics": []})
        seen["alter an unknown group, no topics"] = (answer.error_code, answer.error_message)
        answer = await call(target, 91, 0, {**alter(topic, 0), "group_id": f"{group}-none"})
        seen["alter an unknown group"] = (answer.error_code, [[(p.partition_index, p.error_code)
                                                               for p in t.partitions] for t in answer.responses])
        return seen
    await same(targets, scenario)


async def test_delete_share_group_offsets_of_topics_the_group_never_initialized(targets, topic):
    """DeleteShareGroupOffsets naming a topic the group never read, one it is reading, one it read and whose
    offsets were deleted already and one there is not, for an empty group; then, the topic read again, a
    request naming a refused topic before a deleted one (the deleted one is answered first)."""
    async def scenario(target):
        group, member = await share_group_with_member(target, topic)
        await create(target, f"{topic}-never")
        await call(target, HEARTBEAT, 1, heartbeat(group, member, -1))

        async def delete(*names):
            answer = await call(target, 92, 0, {"group_id": group, "topics": [{"topic_name": n} for n in names]})
            return answer.error_code, [(t.topic_name.replace(topic, "<t>"), t.topic_id != bytes(16), t.error_code,
                                        t.error_message) for t in answer.responses]
        seen = {"never read": await delete(f"{topic}-never"),
                "read": await delete(topic),
                "deleted already": await delete(topic),
                "none there": await delete(f"{topic}-none"),
                "all three": await delete(f"{topic}-never", topic, f"{topic}-none")}
        await assigned_member(target, group, member, topic)
        await call(target, HEARTBEAT, 1, heartbeat(group, member, -1))
        seen["refused, then read again"] = await delete(f"{topic}-never", topic)
        return seen
    await same(targets, scenario)


async def test_share_group_offsets_refused_for_the_group(targets, topic):
    """AlterShareGroupOffsets and DeleteShareGroupOffsets refused for the group as a whole: an empty group id,
    a consumer group's id, a share group with a member and a group there is not (altering it makes it, so only
    deleting is refused); each with Kafka's words."""
    from tests.reference.test_consumer_groups import first_join

    async def scenario(target):
        group, member = await share_group_with_member(target, topic)
        consumer = f"c-{topic}"
        await coordinator_found(target, consumer)
        await first_join(target, consumer, uuid.uuid4().hex, [topic])
        seen = {}
        for name, group_id in [("no group id", ""), ("no group", f"{group}-none"), ("a consumer group", consumer),
                               ("a member", group)]:
            for api in (91, 92):
                partitions = [{"partition_index": 0, "start_offset": 0}] if api == 91 else None
                body = {"group_id": group_id, "topics": [{"topic_name": topic, **(
                    {"partitions": partitions} if partitions else {})}]}
                answer = await call(target, api, 0, body)
                seen[(name, api)] = (answer.error_code, answer.error_message and answer.error_message.replace(
                    topic, "<t>"), len(answer.responses))
        answer = await call(target, 92, 0, {"group_id": f"{group}-gone", "topics": [{"topic_name": topic}]})
        seen["deleting a group there is not"] = (answer.error_code, answer.error_message.replace(topic, "<t>"))
        return seen
    await same(targets, scenario)
