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
from kbroker.protocol.records import build_batch
from tests.cluster import Cluster, create, describe, wait_until
from tests.integration.share_members import joined_share_member, set_group_configs

pytestmark = pytest.mark.timeout(180)

STATE_TOPIC, STATE_PARTITIONS = "__share_group_state", 5   # (not a multiple of the brokers: see placement)
SHARE_FETCH, METADATA, PRODUCE, DESCRIBE_CONFIGS = 78, 3, 0, 32


def share_fetch(group: str, member: str, epoch: int, topic_id: bytes, partitions, max_wait: int) -> dict:
    return {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait_ms": max_wait,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100, "batch_size": 100,
            "topics": [{"topic_id": topic_id, "partitions": [
                {"partition_index": p, "acknowledgement_batches": []} for p in partitions]}] if partitions else [],
            "forgotten_topics_data": []}


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
        any_port = next(iter(c.brokers.values())).port
        probe = await KafkaConnection.open("127.0.0.1", any_port)
        try:
            known = await probe.request(METADATA, 12, {"topics": [{"name": topic_name, "topic_id": None}],
                                                       "allow_auto_topic_creation": False,
                                                       "include_topic_authorized_operations": False})
        finally:
            await probe.close()
        topic_id = known.topics[0].topic_id
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
