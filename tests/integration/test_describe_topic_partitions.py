"""DescribeTopicPartitions (KIP-966) through kafka-python's admin client: topics in name order with their
partitions, pages of at most the asked number of partitions chained by the cursor until every partition was
seen once, unknown topics answered with their error, and a cursor outside the asked topics refused. In a
cluster, each partition's leader, replicas and ISR as Metadata reports them."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from tests.cluster import describe, wait_until

pytestmark = pytest.mark.timeout(120)


def pages(admin: KafkaAdminClient, topics: list[str], limit: int) -> list[dict]:
    """Every page, following the cursor (each page's topics with their partition indexes)."""
    out, cursor = [], None
    while True:
        result = admin.describe_topic_partitions(topics, response_partition_limit=limit, cursor=cursor)
        out.append(result)
        cursor = result["next_cursor"]
        if cursor is None:
            return out


def test_pages_of_partitions_follow_the_cursor_through_every_topic(broker, topic_name):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        names = [f"{topic_name}-b", f"{topic_name}-a", f"{topic_name}-c"]
        admin.create_topics([NewTopic(n, p, 1) for n, p in zip(names, (3, 5, 2))])
        whole = admin.describe_topic_partitions(names)
        assert whole["next_cursor"] is None
        assert [(t["name"], t["error_code"], len(t["partitions"])) for t in whole["topics"]] == \
            [(f"{topic_name}-a", 0, 5), (f"{topic_name}-b", 0, 3), (f"{topic_name}-c", 0, 2)]
        assert all(p["leader_id"] == 0 and p["replica_nodes"] == [0] and p["isr_nodes"] == [0]
                   for t in whole["topics"] for p in t["partitions"])

        seen = []
        paged = pages(admin, names, 4)
        for page in paged:
            assert sum(len(t["partitions"]) for t in page["topics"]) <= 4
            seen += [(t["name"], p["partition_index"]) for t in page["topics"] for p in t["partitions"]]
        assert len(paged) == 3
        assert seen == [(t["name"], p["partition_index"]) for t in whole["topics"] for p in t["partitions"]]
        assert paged[0]["next_cursor"] == {"topic_name": f"{topic_name}-a", "partition_index": 4}
        assert paged[1]["next_cursor"] == {"topic_name": f"{topic_name}-c", "partition_index": 0}

        unknown = admin.describe_topic_partitions([f"{topic_name}-nope", f"{topic_name}-c"])["topics"]
        assert [(t["name"], t["error_code"]) for t in unknown] == [(f"{topic_name}-c", 0), (f"{topic_name}-nope", 3)]
        stray = admin.describe_topic_partitions([f"{topic_name}-a"],
                                                cursor={"topic_name": f"{topic_name}-z", "partition_index": 0})
        assert [t["error_code"] for t in stray["topics"]] == [42]   # INVALID_REQUEST
    finally:
        admin.close()


def test_a_cluster_answers_with_each_partitions_replicas_and_isr(cluster, topic_name):
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, 3, 3)])
        expected = describe(cluster.bootstrap, topic_name)

        def answered():
            # (the broker the admin client asks may not know the new topic yet: UNKNOWN_TOPIC_OR_PARTITION
            # until the controller's UpdateMetadata reaches it, as Kafka's cache answers)
            topic = admin.describe_topic_partitions([topic_name])["topics"][0]
            assert topic["error_code"] in (0, 3), topic
            return topic["partitions"] if topic["error_code"] == 0 else None
        found = wait_until(answered, 30, 0.1, "the topic known to the broker asked")
    finally:
        admin.close()
    assert {p["partition_index"]: {"leader": p["leader_id"], "replicas": p["replica_nodes"], "isr": p["isr_nodes"]}
            for p in found} == expected
