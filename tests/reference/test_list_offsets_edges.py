"""ListOffsets at its edges, as raw frames side by side: a partition or topic named twice, partitions and
topics that are not there, an empty partition's special timestamps, a timestamp past every record, other
replica ids, and the versions before flexible ones."""

from __future__ import annotations

import time

import pytest

from kbroker.protocol.records import build_batch
from tests.reference.differential import call, same
from tests.reference.test_produce_fetch import create, produce, records

pytestmark = pytest.mark.reference

LIST_OFFSETS = 2


def _asked(index: int, timestamp: int = -1) -> dict:
    return {"partition_index": index, "current_leader_epoch": -1, "timestamp": timestamp}


CASES = {
    "a partition named twice": lambda t: [{"name": t, "partitions": [_asked(0), _asked(0, -2)]}],
    "a topic named twice": lambda t: [{"name": t, "partitions": [_asked(0)]}, {"name": t, "partitions": [_asked(1)]}],
    "a partition the topic lacks": lambda t: [{"name": t, "partitions": [_asked(5)]}],
    "a negative partition": lambda t: [{"name": t, "partitions": [_asked(-1)]}],
    "a topic that is not there": lambda t: [{"name": t + "-none", "partitions": [_asked(0)]}],
    "no partitions": lambda t: [{"name": t, "partitions": []}],
    "an empty partition, every special timestamp": lambda t: [{"name": t, "partitions": [
        _asked(1, ts) for ts in (-1, -2, -3, -4)]}],
    "a timestamp past every record": lambda t: [{"name": t, "partitions": [
        _asked(0, int(time.time() * 1000) + 3_600_000)]}],
    "timestamp 0": lambda t: [{"name": t, "partitions": [_asked(0, 0)]}],
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("replica_id", [-1, -2])
async def test_list_offsets_of_odd_requests(targets, topic, case, replica_id):
    async def scenario(target):
        await create(target, topic, partitions=2)
        await produce(target, topic, build_batch(records(3)))
        answer = await call(target, LIST_OFFSETS, 9, {"replica_id": replica_id, "isolation_level": 0,
                                                      "topics": CASES[case](topic)})
        # (the order of a topic's partitions is Kafka's map's, not the request's: compared as sets)
        return sorted((t.name, sorted((p.partition_index, p.error_code, p.offset, p.timestamp >= 0)
                                      for p in t.partitions)) for t in answer.topics)
    await same(targets, scenario)


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6])
async def test_list_offsets_before_flexible_versions(targets, topic, version):
    async def scenario(target):
        await create(target, topic)
        await produce(target, topic, build_batch(records(3)))
        try:
            answer = await call(target, LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [_asked(0, -1)]}, {"name": topic + "-none", "partitions": [_asked(0)]}]})
        except (ConnectionError, OSError) as exc:   # (a version the broker no longer serves closes the connection)
            return type(exc).__name__
        return sorted((t.name == topic, p.partition_index, p.error_code, p.offset)
                      for t in answer.topics for p in t.partitions)
    await same(targets, scenario)
