"""Metadata answers' topic entries are kept encoded from one request to the next
(broker/handlers/metadata_topics.py): whatever changes a topic (its partitions grown, the topic deleted and made
again under its name, a partition's leader moved in a cluster), the next answer says it, and a kept entry reads
the same as one built afresh. A request for authorized operations is built afresh each time, so the two answers
side by side (operations aside) are the check, for every version where the shape changes."""

from __future__ import annotations

import asyncio

from confluent_kafka.admin import AdminClient

from kbroker.client.connection import KafkaConnection
from tests.cluster import create, describe, wait_until

METADATA, CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS = 3, 37, 19, 20
VERSIONS = (4, 5, 7, 9, 10, 12, 13)   # (from v4, where a request may say not to create what it names)


async def ask(conn, version: int, names: list[str] | None, operations: bool = False) -> dict:
    """Each topic's entry as (error, id, internal, partitions), by name; the topics asked, or all (None)."""
    body = {"topics": None if names is None else [{"name": n, "topic_id": bytes(16)} for n in names],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": operations,
            "include_cluster_authorized_operations": False}
    answer = await conn.request(METADATA, version, body)
    return {t.name: (t.error_code, bytes(t.topic_id) if version >= 10 else None, t.is_internal,
                     [(p.error_code, p.partition_index, p.leader_id, p.leader_epoch if version >= 7 else None,
                       list(p.replica_nodes), list(p.isr_nodes), list(p.offline_replicas))
                      for p in t.partitions]) for t in answer.topics}


async def answers(conn, names: list[str] | None = None) -> dict:
    """Every version's answer, checked equal to the one built afresh (asked with authorized operations)."""
    found = {}
    for version in VERSIONS:
        kept = await ask(conn, version, names)
        assert kept == await ask(conn, version, names, operations=version >= 8), f"v{version}"
        assert kept == await ask(conn, version, names), f"v{version}, asked again"
        found[version] = kept
    return found


async def test_a_topics_kept_entry_follows_its_partitions_its_deletion_and_its_making_again(conn, broker,
                                                                                           topic_name):
    created = await conn.request(CREATE_TOPICS, 7, {"topics": [{"name": topic_name, "num_partitions": 3,
                                                                "replication_factor": 1}], "timeout_ms": 5000})
    first_id = bytes(created.topics[0].topic_id)
    for names in (None, [topic_name]):
        seen = await answers(conn, names)
        assert [p[1] for p in seen[12][topic_name][3]] == [0, 1, 2] and seen[12][topic_name][1] == first_id
    grown = await conn.request(CREATE_PARTITIONS, 3, {"topics": [{"name": topic_name, "count": 5,
                                                                  "assignments": None}],
                                                      "timeout_ms": 5000, "validate_only": False})
    assert grown.results[0].error_code == 0
    for names in (None, [topic_name]):
        assert [p[1] for p in (await answers(conn, names))[12][topic_name][3]] == [0, 1, 2, 3, 4]
    # (and as librdkafka's admin client reads it, from an answer for all topics)
    listed = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics[topic_name]
    assert sorted(listed.partitions) == [0, 1, 2, 3, 4]
    deleted = await conn.request(DELETE_TOPICS, 6, {"topics": [{"name": topic_name, "topic_id": bytes(16)}],
                                                    "timeout_ms": 5000})
    assert deleted.responses[0].error_code == 0
    assert topic_name not in (await answers(conn))[12]
    gone = (await answers(conn, [topic_name]))[12][topic_name]
    assert gone[0] == 3, gone   # UNKNOWN_TOPIC_OR_PARTITION
    created = await conn.request(CREATE_TOPICS, 7, {"topics": [{"name": topic_name, "num_partitions": 2,
                                                                "replication_factor": 1}], "timeout_ms": 5000})
    again_id = bytes(created.topics[0].topic_id)
    assert again_id != first_id
    for names in (None, [topic_name]):
        seen = await answers(conn, names)
        assert [p[1] for p in seen[12][topic_name][3]] == [0, 1] and seen[12][topic_name][1] == again_id


def test_a_kept_entry_in_a_cluster_follows_a_leader_moved_by_a_stop(cluster, topic_name):
    """Each broker's kept entries follow the controller's UpdateMetadata: a partition's leader stopped, every
    other broker's next answer names the new leader and epoch, and reads as one built afresh."""
    create(cluster.bootstrap, topic_name, 3, 3)
    wait_until(lambda: all(len(p["isr"]) == 3 for p in describe(cluster.bootstrap, topic_name).values()),
               message="every replica in sync")

    async def at(port: int) -> dict:
        conn = await KafkaConnection.open("127.0.0.1", port)
        try:
            return (await answers(conn))[12][topic_name][3]
        finally:
            await conn.close()

    before = {b: asyncio.run(at(broker.port)) for b, broker in cluster.brokers.items()}
    leader = before[1][0][2]
    assert all(found == before[1] for found in before.values())
    cluster.brokers[leader].stop()
    try:
        for b, broker in cluster.brokers.items():
            if b != leader:
                moved = wait_until(lambda: (lambda p: p if p[0][2] not in (leader, -1) else None)(
                    asyncio.run(at(broker.port))), 30, 0.2, f"broker {b} naming partition 0's new leader")
                assert moved[0][3] > before[b][0][3], "the leader epoch did not move"
    finally:
        cluster.brokers[leader].start()
