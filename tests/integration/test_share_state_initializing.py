"""A share member joins while the broker that would hold its partition's share state is down (kill -9; the
share-state topic has one replica in these tests, so that shard is offline until the broker comes back). As in
Kafka, the join is answered at once with nothing and the state is initialized in the background: the
initialization fails, the partition is asked for again at a later heartbeat, and once the broker is back the
member is assigned the partition and reads every record once."""

from __future__ import annotations

import asyncio
import time

import pytest

from kbroker.protocol.types import uuid_to_str
from tests.cluster import Cluster, create, describe, wait_until
from tests.integration.share_members import Member, ask, set_group_configs, topic_id_of, wait_for

pytestmark = pytest.mark.timeout(240)

FIND_COORDINATOR, GROUP, SHARE = 10, 0, 2


def coordinator_of(bootstrap: str, key_type: int, key: str) -> int:
    def found():
        answer = ask(bootstrap.split(",")[0], FIND_COORDINATOR, 6, {"key_type": key_type, "coordinator_keys": [key]})
        return None if answer.coordinators[0].error_code else answer.coordinators[0].node_id
    return wait_until(found, 30, 0.05, f"the coordinator of {key}")


def apart(c: Cluster, topic: str, topic_id: bytes) -> tuple[str, int, int]:
    """(group, its coordinator, the broker keeping its share state for partition 0 of ``topic``), those two
    brokers not the same one."""
    for i in range(100):
        group = f"share-{topic}-{i}"
        coordinator = coordinator_of(c.bootstrap, GROUP, group)
        keeper = coordinator_of(c.bootstrap, SHARE, f"{group}:{uuid_to_str(topic_id)}:0")
        if coordinator != keeper:
            return group, coordinator, keeper
    raise AssertionError("every group's coordinator keeps its share state")


def logged(path: str, event: str) -> bool:
    with open(path, encoding="utf-8", errors="replace") as f:
        return event in f.read()


async def test_a_share_partition_is_assigned_once_its_state_can_be_initialized(tmp_path, topic_name):
    c = Cluster(str(tmp_path))
    member = None
    try:
        await asyncio.to_thread(c.start)
        create(c.bootstrap, topic_name, partitions=1, rf=3)
        wait_until(lambda: len(describe(c.bootstrap, topic_name)[0]["isr"]) == 3, 30, 0.2, "a full ISR")
        topic_id = await asyncio.to_thread(topic_id_of, next(iter(c.brokers.values())).bootstrap, topic_name)
        group, coordinator, keeper = await asyncio.to_thread(apart, c, topic_name, topic_id)
        await asyncio.to_thread(set_group_configs, c.bootstrap, group, share_auto_offset_reset="earliest")
        leader = describe(c.bootstrap, topic_name)[0]["leader"]
        produced = await asyncio.to_thread(ask, c.brokers[leader].bootstrap, 0, 9, {
            "transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [{"name": topic_name,
            "partition_data": [{"index": 0, "records": _batch(10)}]}]})
        assert produced.responses[0].partition_responses[0].error_code == 0, produced

        c.brokers[keeper].kill()
        member = Member(c.bootstrap, group, [topic_name], name="member")
        coordinator_log = c.brokers[coordinator].log_path
        wait_until(lambda: logged(coordinator_log, "share_state_not_initialized"), 60, 0.2,
                   "the initialization's failure at the group's coordinator")
        assert member.deliveries == []   # (nothing assigned: the partition's state does not exist)

        await asyncio.to_thread(c.brokers[keeper].start)
        began = time.monotonic()
        await asyncio.to_thread(wait_for, lambda: len(member.acknowledged) == 10, 60,
                                "every record read and acknowledged once the state exists", [member])
        assert sorted(member.deliveries) == [(0, offset, 1) for offset in range(10)]
        # (asked again at the heartbeat after the failure, not only once its asking is older than the retry
        # interval, 30 s: that would take about 14 s from here)
        assert time.monotonic() - began < 10, f"assigned {time.monotonic() - began:.1f}s after the restart"
    finally:
        if member is not None:
            await asyncio.to_thread(member.stop)
        codes = await asyncio.to_thread(c.stop)
    assert all(code == 0 for code in codes.values() if code is not None), codes


def _batch(count: int) -> bytes:
    from kbroker.protocol.records import build_batch
    return build_batch([(None, b"v%d" % i, []) for i in range(count)])
