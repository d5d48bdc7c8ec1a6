"""The group APIs over the wire, request by request: versions, batching, and each bad input's error code."""

from __future__ import annotations

import asyncio
import struct

import pytest

from kbroker.client.connection import KafkaConnection
from kbroker.protocol.errors import ErrorCode as E
from tests.integration.test_bad_input import still_serving

CREATE_TOPICS, FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC = 19, 10, 11, 12, 13, 14
OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE, LIST, DELETE, OFFSET_DELETE = 8, 9, 15, 16, 42, 47


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


@pytest.fixture
async def topic(conn, topic_name):
    resp = await conn.request(CREATE_TOPICS, 7, {"topics": [{"name": topic_name, "num_partitions": 3,
                                                             "replication_factor": 1}], "timeout_ms": 5000})
    assert resp.topics[0].error_code == 0
    return topic_name


async def find(conn, group: str):
    resp = await conn.request(FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
    assert resp.error_code == 0, resp
    return resp


async def join(conn, group, member_id="", *, version=5, session=3000, protocols=None, instance=None):
    protocols = protocols if protocols is not None else [{"name": "range", "metadata": subscription("t")}]
    return await conn.request(JOIN, version, {
        "group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": 5000, "member_id": member_id,
        "group_instance_id": instance, "protocol_type": "consumer", "protocols": protocols})


async def member(conn, group, topic):
    """A one-member group, synced: (member id, generation)."""
    await find(conn, group)
    first = await join(conn, group, protocols=[{"name": "range", "metadata": subscription(topic)}])
    assert first.error_code == E.MEMBER_ID_REQUIRED
    joined = await join(conn, group, first.member_id, protocols=[{"name": "range",
                                                                   "metadata": subscription(topic)}])
    assert joined.error_code == 0 and joined.leader == joined.member_id
    synced = await conn.request(SYNC, 5, {"group_id": group, "generation_id": joined.generation_id,
                                          "member_id": joined.member_id, "group_instance_id": None,
                                          "protocol_type": "consumer", "protocol_name": "range",
                                          "assignments": [{"member_id": joined.member_id, "assignment": b"A"}]})
    assert synced.error_code == 0 and bytes(synced.assignment) == b"A" and synced.protocol_name == "range"
    return joined.member_id, joined.generation_id


async def commit(conn, group, generation, member_id, topic, partition=0, offset=5, metadata="m", version=8):
    resp = await conn.request(OFFSET_COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
        "group_instance_id": None, "retention_time_ms": -1,
        "topics": [{"name": topic, "partitions": [{"partition_index": partition, "committed_offset": offset,
                                                    "committed_leader_epoch": -1,
                                                    "committed_metadata": metadata}]}]})
    return resp.topics[0].partitions[0].error_code


async def test_find_coordinator_single_and_batched(conn, broker):
    v0 = await conn.request(FIND_COORDINATOR, 0, {"key": "any-group"})
    assert (v0.error_code, v0.node_id, v0.port) == (0, 0, broker.port)
    v4 = await conn.request(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["a", "b", "c"]})
    assert [(c.key, c.error_code, c.port) for c in v4.coordinators] == [(k, 0, broker.port) for k in "abc"]
    txn = await conn.request(FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx-a", "tx-b"]})
    assert [(c.key, c.error_code, c.port) for c in txn.coordinators] == [("tx-a", 0, broker.port),
                                                                        ("tx-b", 0, broker.port)]
    bad = await conn.request(FIND_COORDINATOR, 4, {"key_type": 7, "coordinator_keys": ["x"]})
    assert bad.coordinators[0].error_code == E.INVALID_REQUEST


async def test_join_errors(conn, broker, topic):
    group = f"join-{topic}"
    await find(conn, group)
    assert (await join(conn, group, session=100)).error_code == E.INVALID_SESSION_TIMEOUT
    assert (await join(conn, group, session=1_800_001)).error_code == E.INVALID_SESSION_TIMEOUT
    assert (await join(conn, group, "who-is-this")).error_code == E.UNKNOWN_MEMBER_ID
    assert (await join(conn, "", version=3)).error_code == E.INVALID_GROUP_ID
    await member(conn, group, topic)
    other = await join(conn, group, version=3, protocols=[{"name": "roundrobin", "metadata": b""}])
    assert other.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    await still_serving(broker, topic)


async def test_old_join_versions_get_a_member_id_at_once(conn, topic):
    group = f"v0-{topic}"
    await find(conn, group)
    joined = await join(conn, group, version=0)
    assert joined.error_code == 0 and joined.member_id.startswith("wire-test-") and joined.generation_id == 1


async def test_sync_heartbeat_and_commit_check_generation_and_member(conn, broker, topic):
    group = f"gen-{topic}"
    member_id, generation = await member(conn, group, topic)
    bad_sync = await conn.request(SYNC, 3, {"group_id": group, "generation_id": generation + 1,
                                            "member_id": member_id, "assignments": []})
    assert bad_sync.error_code == E.ILLEGAL_GENERATION

    async def heartbeat(group_id, gen, mid):
        return (await conn.request(HEARTBEAT, 4, {"group_id": group_id, "generation_id": gen, "member_id": mid,
                                                  "group_instance_id": None})).error_code

    assert await heartbeat(group, generation, member_id) == 0
    assert await heartbeat(group, generation + 1, member_id) == E.ILLEGAL_GENERATION
    assert await heartbeat(group, generation, "stranger") == E.UNKNOWN_MEMBER_ID
    assert await heartbeat(f"no-such-{topic}", 1, member_id) == E.UNKNOWN_MEMBER_ID

    assert await commit(conn, group, generation, member_id, topic) == 0
    assert await commit(conn, group, generation + 1, member_id, topic) == E.ILLEGAL_GENERATION
    assert await commit(conn, group, generation, "stranger", topic) == E.UNKNOWN_MEMBER_ID
    assert await commit(conn, group, -1, "", topic) == E.UNKNOWN_MEMBER_ID   # the group has a member
    assert await commit(conn, group, generation, member_id, topic, partition=99) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert await commit(conn, group, generation, member_id, "no-such-topic") == E.UNKNOWN_TOPIC_OR_PARTITION
    assert await commit(conn, group, generation, member_id, topic, metadata="x" * 4097) == \
        E.OFFSET_METADATA_TOO_LARGE
    await still_serving(broker, topic)


async def test_standalone_commits_and_offset_fetch_versions(conn, topic):
    groups = [f"solo-a-{topic}", f"solo-b-{topic}"]
    for group in groups:
        await find(conn, group)
    assert await commit(conn, groups[0], -1, "", topic, offset=11, version=2) == 0
    assert await commit(conn, groups[1], -1, "", topic, partition=2, offset=22) == 0
    v1 = await conn.request(OFFSET_FETCH, 1, {"group_id": groups[0], "topics": [
        {"name": topic, "partition_indexes": [0, 1]}]})
    assert [(p.partition_index, p.committed_offset) for p in v1.topics[0].partitions] == [(0, 11), (1, -1)]
    everything = await conn.request(OFFSET_FETCH, 5, {"group_id": groups[1], "topics": None})
    assert everything.error_code == 0
    assert [(t.name, p.partition_index, p.committed_offset) for t in everything.topics for p in t.partitions] == \
        [(topic, 2, 22)]
    v8 = await conn.request(OFFSET_FETCH, 8, {"groups": [
        {"group_id": groups[0], "topics": [{"name": topic, "partition_indexes": [0]}]},
        {"group_id": groups[1], "topics": None},
        {"group_id": f"never-{topic}", "topics": [{"name": topic, "partition_indexes": [0]}]}],
        "require_stable": False})
    found = {g.group_id: [(p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions]
             for g in v8.groups}
    assert found == {groups[0]: [(0, 11)], groups[1]: [(2, 22)], f"never-{topic}": [(0, -1)]}


async def test_describe_list_leave_delete(conn, topic):
    group = f"admin-{topic}"
    member_id, generation = await member(conn, group, topic)
    described = await conn.request(DESCRIBE, 5, {"groups": [group, f"absent-{topic}"],
                                                 "include_authorized_operations": False})
    # (answered in Kafka's order, by the groups' coordinator shards, not in the order asked)
    by_id = {g.group_id: g for g in described.groups}
    live, absent = by_id[group], by_id[f"absent-{topic}"]
    assert (live.group_state, live.protocol_type, live.protocol_data) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.client_id, bytes(m.member_assignment)) for m in live.members] == \
        [(member_id, "wire-test", b"A")]
    assert absent.group_state == "Dead" and absent.error_code == 0
    listed = await conn.request(LIST, 4, {"states_filter": ["Stable"]})
    assert group in {g.group_id for g in listed.groups}
    assert all(g.group_state == "Stable" for g in listed.groups)

    deleted = await conn.request(DELETE, 2, {"groups_names": [group, f"absent-{topic}"]})
    assert {r.group_id: r.error_code for r in deleted.results} == {
        group: E.NON_EMPTY_GROUP, f"absent-{topic}": E.GROUP_ID_NOT_FOUND}
    assert await commit(conn, group, generation, member_id, topic) == 0
    refused = await conn.request(OFFSET_DELETE, 0, {"group_id": group, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0}]}]})
    assert refused.topics[0].partitions[0].error_code == E.GROUP_SUBSCRIBED_TO_TOPIC

    left = await conn.request(LEAVE, 5, {"group_id": group, "members": [
        {"member_id": member_id, "group_instance_id": None, "reason": "test"},
        {"member_id": "stranger", "group_instance_id": None, "reason": None}]})
    assert [(m.member_id, m.error_code) for m in left.members] == [(member_id, 0), ("stranger", E.UNKNOWN_MEMBER_ID)]
    removed = await conn.request(OFFSET_DELETE, 0, {"group_id": group, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0}]}]})
    assert removed.error_code == 0 and removed.topics[0].partitions[0].error_code == 0
    deleted = await conn.request(DELETE, 2, {"groups_names": [group]})
    assert deleted.results[0].error_code == 0
    again = await conn.request(DESCRIBE, 5, {"groups": [group], "include_authorized_operations": False})
    assert again.groups[0].group_state == "Dead"


async def test_parked_join_lets_the_connection_keep_serving(conn, broker, topic):
    """A second member's join parks until the first rejoins; other connections are served meanwhile."""
    group = f"park-{topic}"
    member_id, _ = await member(conn, group, topic)
    other = await KafkaConnection.open("127.0.0.1", broker.port, client_id="other")
    try:
        newcomer = asyncio.ensure_future(join(other, group, version=3))
        await asyncio.sleep(0.2)
        assert not newcomer.done()
        await still_serving(broker, topic)
        rejoined = await join(conn, group, member_id)
        joined = await asyncio.wait_for(newcomer, 5)
        assert rejoined.generation_id == joined.generation_id == 2
        assert {m.member_id for m in rejoined.members} == {member_id, joined.member_id}
    finally:
        await other.close()
