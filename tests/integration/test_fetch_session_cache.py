"""A full cache of fetch sessions (``max.incremental.fetch.session.cache.slots``) makes room as Kafka's does: a
follower's session takes a consumer's however fresh, a session of more partitions takes one of fewer created
long enough ago (``min.incremental.fetch.session.eviction.ms``, shortened here on the in-process broker), and a
session that outranks none is refused: its client fetches without one (session id 0)."""

from __future__ import annotations

import asyncio
import time

import pytest

from kbroker.client.connection import KafkaConnection
from kbroker.protocol.errors import ErrorCode

FETCH = 1
SETTLED_S = 2.0   # the eviction age, for the test (long beside a loaded machine's stalls: the sessions kept in use must
#                   never look idle that long)


@pytest.fixture
def kbroker_config():
    return {"num.partitions": "6", "max.incremental.fetch.session.cache.slots": "2"}


def _full(topic: str, partitions: int, replica_id: int = -1, session_id: int = 0, epoch: int = 0) -> dict:
    return {"replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1,
                 "last_fetched_epoch": -1, "log_start_offset": -1} for p in range(partitions)]}] if partitions else []}


def test_a_full_session_cache_makes_room_as_kafkas_does(kbroker, topic_name):
    cache = kbroker.broker.fetch_sessions
    cache.min_eviction_s = SETTLED_S

    async def main():
        conn = await KafkaConnection.open("127.0.0.1", kbroker.port)

        async def open_session(partitions: int, replica_id: int = -1) -> int:
            return (await conn.request(FETCH, 12, _full(topic_name, partitions, replica_id))).session_id

        epochs = {}

        async def use(session_id: int):
            epochs[session_id] = epochs.get(session_id, 0) + 1
            return (await conn.request(FETCH, 12, _full(topic_name, 0, session_id=session_id,
                                                        epoch=epochs[session_id]))).error_code
        try:
            await conn.request(3, 12, {"topics": [{"name": topic_name}], "allow_auto_topic_creation": True,
                                       "include_topic_authorized_operations": False})
            small, large = await open_session(1), await open_session(3)
            fresh_refused = await open_session(4)   # both fresh and in use: nothing to take
            follower = await open_session(1, replica_id=1)   # takes the least valuable consumer's: small
            small_gone = await use(small)
            # Kept in use while they grow older than the eviction age (only the least recently used idle one
            # would otherwise go)
            deadline = time.monotonic() + SETTLED_S * 1.5
            while time.monotonic() < deadline:
                assert await use(large) == 0 and await use(follower) == 0
                await asyncio.sleep(SETTLED_S / 5)   # (a client's fetch interval: what keeps them in use)
            fewer_refused = await open_session(2)   # settled: large (3 partitions) and the follower's
            more = await open_session(4)            # outranks large
            large_gone = await use(large)
            return fresh_refused, follower, small_gone, fewer_refused, more, large_gone
        finally:
            await conn.close()

    fresh_refused, follower, small_gone, fewer_refused, more, large_gone = asyncio.run(main())
    assert fresh_refused == 0 and follower != 0 and small_gone == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert fewer_refused == 0 and more != 0 and large_gone == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert set(cache.sessions) == {follower, more} and cache.evicted == 2
