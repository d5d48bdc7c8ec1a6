"""A share fetch while one of its share partitions cannot load its state: the share coordinator holding that
state is held with SIGSTOP (and ZooKeeper's session outlasts the test, so the coordinator does not move).
The fetch answers within its wait with what the other partitions have, as Kafka's does, and the state that
could not load lands once the coordinator answers again."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from kbroker.client.connection import KafkaConnection
from kbroker.coordinators.partitioning import partition_for
from kbroker.coordinators.share.coordinator import shard_key
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.records import build_batch
from kbroker.protocol.types import uuid_to_str
from tests.cluster import Cluster, create, describe, wait_until
from tests.integration.share_members import ask, joined_share_member, set_group_configs, share_state, topic_id_of

pytestmark = pytest.mark.timeout(180)

STATE_TOPIC, STATE_PARTITIONS = "__share_group_state", 5   # (not a multiple of the brokers: see placement)
SHARE_FETCH, METADATA, PRODUCE, DESCRIBE_CONFIGS, FIND_COORDINATOR, WRITE_SHARE_GROUP_STATE = 78, 3, 0, 32, 10, 85


def share_fetch(group: str, member: str, epoch: int, topic_id: bytes, partitions, max_wait: int, acks=()) -> dict:
    """``acks``: the acknowledgement batches sent with each partition named."""
    return {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait_ms": max_wait,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100, "batch_size": 100,
            "topics": [{"topic_id": topic_id, "partitions": [
                {"partition_index": p, "acknowledgement_batches": list(acks)} for p in partitions]}]
            if partitions else [],
            "forgotten_topics_data": []}


async def topic_metadata(port: int, topic: str):
    """``topic`` as the broker at ``port`` knows it (Metadata v12)."""
    probe = await KafkaConnection.open("127.0.0.1", port)
    try:
        known = await probe.request(METADATA, 12, {"topics": [{"name": topic, "topic_id": None}],
                                                   "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False})
    finally:
        await probe.close()
    return known.topics[0]


def acquired(answer) -> dict[int, list[tuple[int, int]]]:
    """partition -> its acquired offset ranges, for the partitions that acquired any."""
    return {p.partition_index: [(r.first_offset, r.last_offset) for r in p.acquired_records]
            for t in answer.responses for p in t.partitions if p.acquired_records}


def placement(c: Cluster, topic: str, topic_id: bytes, prefix: str):
    """(group, leader, held, stopped, other): a group whose state for partition ``held`` of ``topic`` is kept
    by broker ``stopped`` and for partition ``other`` by another broker, both partitions led by ``leader``
    (not ``stopped``). The leaders of a topic's partitions go round the brokers, and so do the shards', and a
    key's shard moves with its partition number: were the shards a multiple of the brokers, both partitions
    a broker leads would always have their state at the same broker."""
    parts = describe(c.bootstrap, topic)
    shards = describe(c.bootstrap, STATE_TOPIC)
    for leader in c.brokers:
        led = [p for p, s in parts.items() if s["leader"] == leader]
        for i in range(200):
            group = f"{prefix}-{i}"
            keeper = {p: shards[partition_for(shard_key(group, topic_id, p), STATE_PARTITIONS)]["leader"]
                      for p in led}
            for held in led:
                stopped = keeper[held]
                if stopped == leader:
                    continue
                other = next((p for p in led if keeper[p] != stopped), None)
                if other is not None:
                    return group, leader, held, stopped, other
    raise AssertionError(f"no placement found: {parts}, {shards}")


async def test_a_share_fetch_answers_within_its_wait_while_a_share_partitions_state_cannot_load(
        tmp_path, topic_name):
    c = Cluster(str(tmp_path), overrides={"zookeeper.session.timeout.ms": "60000",
                                          "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS)})
    conn = paused = None
    try:
        await asyncio.to_thread(c.start)   # (it runs event loops of its own; a failed start still stops below)
        create(c.bootstrap, topic_name, partitions=6, rf=1)
        topic_id = (await topic_metadata(next(iter(c.brokers.values())).port, topic_name)).topic_id
        # A first share fetch makes the share-state topic (each leader's own group, so nothing stays loaded).
        for b, proc in c.brokers.items():
            warm = await KafkaConnection.open("127.0.0.1", proc.port)
            try:
                await warm.request(SHARE_FETCH, 1, share_fetch(f"warm-{b}-{topic_name}", uuid.uuid4().hex, 0,
                                                               topic_id, range(6), 2000))
            finally:
                await warm.close()
        wait_until(lambda: all(s["leader"] >= 0 for s in describe(c.bootstrap, STATE_TOPIC).values()), 30, 0.2,
                   "every share-state shard led")
        group, leader, held, stopped, other = placement(c, topic_name, topic_id, f"share-{topic_name}")
        set_group_configs(c.bootstrap, group, share_auto_offset_reset="earliest")
        conn = await KafkaConnection.open("127.0.0.1", c.brokers[leader].port, client_id="member")

        async def reset_value():
            answer = await conn.request(DESCRIBE_CONFIGS, 4, {"resources": [{
                "resource_type": 32, "resource_name": group, "configuration_keys": ["share.auto.offset.reset"]}],
                "include_synonyms": False, "include_documentation": False})
            return answer.results[0].configs[0].value
        deadline = time.monotonic() + 30
        while await reset_value() != "earliest":
            assert time.monotonic() < deadline, "the group's config never reached the partitions' leader"
            await asyncio.sleep(0.05)

        member, epoch = await asyncio.to_thread(joined_share_member, c.bootstrap, group, topic_name), 0
        c.brokers[stopped].pause()
        paused = c.brokers[stopped]

        async def fetch(partitions, max_wait=1000):
            nonlocal epoch
            began = time.monotonic()
            answer = await conn.request(SHARE_FETCH, 1, share_fetch(group, member, epoch, topic_id, partitions,
                                                                    max_wait))
            epoch += 1
            assert answer.error_code == 0, answer
            return answer, time.monotonic() - began

        async def produce(partition, count):
            answer = await conn.request(PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                                                     "topic_data": [{"name": topic_name, "partition_data": [{
                                                         "index": partition, "records": build_batch(
                                                             [(None, b"v%d" % i, []) for i in range(count)])}]}]})
            assert answer.responses[0].partition_responses[0].error_code == 0, answer

        # The held partition's state is at a stopped broker (kbroker's persister would retry it for 15 s).
        first, took = await fetch([held, other])
        assert took < 8, f"the first share fetch took {took:.1f}s, not its 1 s wait"
        assert acquired(first) == {}
        await produce(other, 3)
        second, took = await fetch([])
        assert took < 8, f"a share fetch with records took {took:.1f}s"
        assert acquired(second) == {other: [(0, 2)]}

        paused.resume()
        paused = None
        await produce(held, 2)
        deadline = time.monotonic() + 30
        got: dict = {}
        while held not in got:   # the load the first fetch began lands once the coordinator answers
            assert time.monotonic() < deadline, f"{held}'s state never loaded: {got}"
            answer, _ = await fetch([])
            got.update(acquired(answer))
        assert got[held] == [(0, 1)] and other not in got
    finally:
        if paused is not None:
            paused.resume()
        if conn is not None:
            await conn.close()
        codes = await asyncio.to_thread(c.stop)
    assert all(code == 0 for code in codes.values() if code is not None), codes


class ShareSession:
    """A member's share session on one broker's connection."""

    def __init__(self, conn, group: str, member: str, topic_id: bytes) -> None:
        self.conn, self.group, self.member, self.topic_id, self.epoch = conn, group, member, topic_id, 0

    @classmethod
    async def open(cls, port: int, *args) -> "ShareSession":
        return cls(await KafkaConnection.open("127.0.0.1", port, client_id="member"), *args)

    async def fetch(self, acks=(), max_wait: int = 500):
        answer = await self.conn.request(SHARE_FETCH, 1, share_fetch(self.group, self.member, self.epoch,
                                                                     self.topic_id, [0], max_wait, acks))
        self.epoch += 1
        assert answer.error_code == 0 and all(p.acknowledge_error_code == 0 for t in answer.responses
                                              for p in t.partitions), answer
        return answer

    async def acquire(self) -> list[tuple[int, int]]:
        """Fetch partition 0 until something is acquired: its offset ranges."""
        deadline = time.monotonic() + 30
        while not (got := acquired(await self.fetch()).get(0)):
            assert time.monotonic() < deadline, "nothing acquired"
        return got

    async def accept(self, first: int, last: int) -> None:
        """Accept ``first``-``last``: answered once the leader has written the state."""
        await self.fetch([{"first_offset": first, "last_offset": last, "acknowledge_types": [1]}], max_wait=0)

    async def close(self) -> None:
        await self.conn.close()   # (what it holds goes back to the group)


async def leader_epoch(port: int, topic: str) -> int:
    return (await topic_metadata(port, topic)).partitions[0].leader_epoch


async def test_a_new_leaders_load_fences_the_share_state_writes_of_the_leader_before_it(tmp_path, topic_name):
    """Leadership of a share partition moves (its leader's controlled shutdown): the new leader's first fetch
    loads the state, and its read records the new leader epoch at the share coordinator before anything is
    acquired, so a write from the leader before it (sent here by the test at that leader's epoch, as a leader
    that has not heard yet sends it) is FENCED_LEADER_EPOCH. Before, only a write moved the coordinator's
    epoch: until the new leader first wrote, the old one's write replaced the state."""
    # (the share state replicated as a cluster keeps it: its shard may be on the broker that stops)
    c = Cluster(str(tmp_path), overrides={"share.coordinator.state.topic.replication.factor": "3",
                                          "share.coordinator.state.topic.min.isr": "2"})
    try:
        await asyncio.to_thread(c.start)
        create(c.bootstrap, topic_name, partitions=1, rf=3)
        wait_until(lambda: len(describe(c.bootstrap, topic_name)[0]["isr"]) == 3, 30, 0.2, "a full ISR")
        any_broker = next(iter(c.brokers.values())).bootstrap
        topic_id = await asyncio.to_thread(topic_id_of, any_broker, topic_name)
        group = f"share-{topic_name}"
        await asyncio.to_thread(set_group_configs, c.bootstrap, group, share_auto_offset_reset="earliest")
        member = await asyncio.to_thread(joined_share_member, c.bootstrap, group, topic_name)
        old = describe(c.bootstrap, topic_name)[0]["leader"]
        produced = await asyncio.to_thread(ask, c.brokers[old].bootstrap, PRODUCE, 9, {
            "transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [{"name": topic_name,
            "partition_data": [{"index": 0, "records": build_batch([(None, b"v%d" % i, []) for i in range(4)])}]}]})
        assert produced.responses[0].partition_responses[0].error_code == 0, produced
        old_epoch = await leader_epoch(c.brokers[old].port, topic_name)
        session = await ShareSession.open(c.brokers[old].port, group, member, topic_id)
        assert await session.acquire() == [(0, 3)]
        await session.accept(0, 1)   # (the old leader writes the state at its epoch)
        await session.close()

        assert await asyncio.to_thread(c.brokers[old].stop) == 0   # (controlled shutdown: leadership moves)
        new = wait_until(lambda: describe(c.bootstrap, topic_name)[0]["leader"] not in (old, -1)
                         and describe(c.bootstrap, topic_name)[0]["leader"], 30, 0.2, "a new leader")
        assert await leader_epoch(c.brokers[new].port, topic_name) > old_epoch
        session = await ShareSession.open(c.brokers[new].port, group, member, topic_id)
        assert await session.acquire() == [(2, 3)]   # (loaded at the new epoch; it has written nothing since)

        found = await asyncio.to_thread(ask, c.brokers[new].bootstrap, FIND_COORDINATOR, 6, {
            "key_type": 2, "coordinator_keys": [f"{group}:{uuid_to_str(topic_id)}:0"]})
        keeper = c.brokers[found.coordinators[0].node_id]
        stale = await asyncio.to_thread(ask, keeper.bootstrap, WRITE_SHARE_GROUP_STATE, 1, {
            "group_id": group, "topics": [{"topic_id": topic_id, "partitions": [{
                "partition": 0, "state_epoch": -1, "leader_epoch": old_epoch, "start_offset": 4,
                "delivery_complete_count": 0, "state_batches": []}]}]})
        assert stale.results[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH, stale
        await session.accept(2, 3)   # (the new leader's own write is taken)
        await session.close()
        state = await asyncio.to_thread(share_state, keeper.bootstrap, group, topic_id, 0)
        assert (state.error_code, state.start_offset, state.state_batches) == (0, 4, []), state
    finally:
        codes = await asyncio.to_thread(c.stop)
    assert all(code == 0 for code in codes.values() if code is not None), codes
