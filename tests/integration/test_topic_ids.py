"""Topics named by id on the wire (KIP-516): Fetch v13+ and Produce v13 read and write a topic through the
id Metadata gave for it, an id no topic has is UNKNOWN_TOPIC_ID, and a topic deleted and recreated under
the same name is never read or written through its old id, in a fetch session or out of one."""

from __future__ import annotations

import asyncio

from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.records import build_batch

PRODUCE, FETCH, METADATA, CREATE_TOPICS, DELETE_TOPICS = 0, 1, 3, 19, 20


async def create(conn, name: str) -> bytes:
    created = await conn.request(CREATE_TOPICS, 7, {"topics": [{"name": name, "num_partitions": 1,
                                                                "replication_factor": 1}], "timeout_ms": 5000})
    assert created.topics[0].error_code == 0
    return bytes(created.topics[0].topic_id)


async def delete(conn, name: str) -> None:
    deleted = await conn.request(DELETE_TOPICS, 6, {"topics": [{"name": name, "topic_id": bytes(16)}],
                                                    "timeout_ms": 5000})
    assert deleted.responses[0].error_code == 0


async def produce(conn, name: str, value: bytes, version: int = 9, topic_id: bytes | None = None):
    topic = {"name": name} if version < 13 else {"topic_id": topic_id}
    answer = await conn.request(PRODUCE, version, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                                                   "topic_data": [{**topic, "partition_data": [
                                                       {"index": 0, "records": build_batch([(b"k", value, [])])}]}]})
    return answer.responses[0]


def fetch_request(topics: dict[bytes, int], session_id: int = 0, epoch: int = -1, forgotten=(), wait_ms: int = 0):
    return {"replica_id": -1, "max_wait_ms": wait_ms, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch, "rack_id": "",
            "topics": [{"topic_id": topic_id, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]} for topic_id, offset in topics.items()],
            "forgotten_topics_data": [{"topic_id": t, "partitions": [0]} for t in forgotten]}


def by_id(answer) -> dict[bytes, tuple]:
    return {bytes(t.topic_id): (t.partitions[0].error_code, bytes(t.partitions[0].records or b""))
            for t in answer.responses}


async def test_fetch_names_topics_by_id_and_refuses_an_unknown_one(conn, topic_name):
    topic_id = await create(conn, topic_name)
    assert (await produce(conn, topic_name, b"by name")).partition_responses[0].error_code == 0
    stranger = bytes(range(16))
    for version in (13, 16, 18):
        answer = await conn.request(FETCH, version, fetch_request({topic_id: 0, stranger: 0}))
        seen = by_id(answer)
        assert seen[topic_id][0] == ErrorCode.NONE and b"by name" in seen[topic_id][1]
        assert seen[stranger][0] == ErrorCode.UNKNOWN_TOPIC_ID
        assert all(not t.topic for t in answer.responses)   # (names are not on the wire from v13)


async def test_a_recreated_topic_is_never_read_through_its_old_id(conn, topic_name):
    """A session opened on the old id keeps answering UNKNOWN_TOPIC_ID for it once the topic is recreated,
    and a fetch parked on the old id is answered UNKNOWN_TOPIC_ID, not with the new topic's records."""
    old_id = await create(conn, topic_name)
    await produce(conn, topic_name, b"old")
    opened = await conn.request(FETCH, 13, fetch_request({old_id: 0}, epoch=0))
    assert opened.error_code == 0 and b"old" in by_id(opened)[old_id][1]
    session = opened.session_id
    parked = asyncio.ensure_future(conn.request(FETCH, 13, fetch_request({old_id: 1}, wait_ms=5000)))
    await asyncio.sleep(0)
    await delete(conn, topic_name)
    new_id = await create(conn, topic_name)
    assert new_id != old_id
    await produce(conn, topic_name, b"new")
    assert by_id(await parked) == {old_id: (ErrorCode.UNKNOWN_TOPIC_ID, b"")}
    incremental = await conn.request(FETCH, 13, fetch_request({}, session_id=session, epoch=1))
    assert by_id(incremental) == {old_id: (ErrorCode.UNKNOWN_TOPIC_ID, b"")}
    # Forgetting the old id and naming the new one reads the new topic from its start.
    moved = await conn.request(FETCH, 13, fetch_request({new_id: 0}, session_id=session, epoch=2, forgotten=[old_id]))
    seen = by_id(moved)
    assert old_id not in seen and seen[new_id][0] == 0 and b"new" in seen[new_id][1] and b"old" not in seen[new_id][1]


async def test_produce_v13_writes_through_the_id_and_refuses_an_old_one(conn, topic_name):
    old_id = await create(conn, topic_name)
    written = await produce(conn, topic_name, b"through the id", version=13, topic_id=old_id)
    assert bytes(written.topic_id) == old_id and written.partition_responses[0].error_code == 0
    await delete(conn, topic_name)
    new_id = await create(conn, topic_name)
    refused = await produce(conn, topic_name, b"stale", version=13, topic_id=old_id)
    assert refused.partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    seen = by_id(await conn.request(FETCH, 13, fetch_request({new_id: 0})))
    assert seen[new_id][0] == 0 and seen[new_id][1] == b""   # nothing of the stale write reached the new topic


async def test_offsets_are_committed_and_fetched_by_id(conn, topic_name):
    """OffsetCommit and OffsetFetch v10: a group's offsets through the topic's id; an old id commits nothing."""
    topic_id = await create(conn, topic_name)
    group = f"g-{topic_name}"

    async def commit(with_id: bytes, offset: int) -> int:
        answer = await conn.request(8, 10, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                                            "group_instance_id": None, "topics": [{"topic_id": with_id, "partitions": [
                                                {"partition_index": 0, "committed_offset": offset,
                                                 "committed_leader_epoch": -1, "committed_metadata": None}]}]})
        assert bytes(answer.topics[0].topic_id) == with_id
        return answer.topics[0].partitions[0].error_code

    async def committed() -> dict[bytes, int]:
        answer = await conn.request(9, 10, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                                                        "topics": None}], "require_stable": False})
        return {bytes(t.topic_id): t.partitions[0].committed_offset for t in answer.groups[0].topics}

    found = await conn.request(10, 4, {"key_type": 0, "coordinator_keys": [group]})   # creates __consumer_offsets
    assert found.coordinators[0].error_code == 0
    assert await commit(topic_id, 7) == 0
    assert await committed() == {topic_id: 7}
    await delete(conn, topic_name)
    await create(conn, topic_name)   # the same name again, under a new id
    assert await commit(topic_id, 9) == ErrorCode.UNKNOWN_TOPIC_ID
    assert await committed() == {}   # the deleted topic's offsets went with it, as in Kafka
