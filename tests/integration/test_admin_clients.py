"""Group and transaction admin APIs through real clients' admin tools (kafka-python, confluent-kafka).

ListGroups with a state filter, OffsetDelete, LeaveGroup v3+ by instance id, DescribeTransactions,
ListTransactions and DescribeProducers each answer what the client expects.
"""

from __future__ import annotations

import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from tests.integration.workload import make_topic


def test_group_admin_through_kafka_python_and_confluent(broker, topic_name):
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient
    from kafka.admin import MemberToRemove

    make_topic(broker.bootstrap, topic_name, 2)
    group = f"admin-{topic_name}"
    consumer = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group,
                             group_instance_id="instance-1", enable_auto_commit=False,
                             session_timeout_ms=10000, heartbeat_interval_ms=300)
    deadline = time.monotonic() + 20
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(timeout_ms=500)
    assert consumer.assignment()
    consumer.commit({TopicPartition(topic_name, 0): OffsetAndMetadata(3, "", -1)})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        stable = admin.list_groups(states_filter=["Stable"])
        assert {"group_id": group, "protocol_type": "consumer", "group_state": "Stable", "group_type": "classic"} \
            in stable
        assert all(g["group_state"] == "Stable" for g in stable)
        rd_admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        listed = rd_admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(10)
        assert group in {g.group_id for g in listed.valid}
        # The static member is removed by its instance id (LeaveGroup v3+), as admin tools do.
        removed = admin.remove_group_members(group, [MemberToRemove(group_instance_id="instance-1")])
        assert [e.__name__ for e in removed.values()] == ["NoError"]
        consumer.close(autocommit=False)
        empty = admin.list_groups(states_filter=["Empty"])
        assert {"group_id": group, "protocol_type": "consumer", "group_state": "Empty", "group_type": "classic"} in empty

        def committed() -> dict[int, int]:
            found = rd_admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
            return {tp.partition: tp.offset for tp in found.topic_partitions}

        assert committed() == {0: 3}
        deleted = admin.delete_group_offsets(group, [TopicPartition(topic_name, 0)])   # OffsetDelete
        assert [e.__name__ for e in deleted.values()] == ["NoError"]
        assert committed() == {}
    finally:
        admin.close()


def test_transaction_admin_through_kafka_python(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, 1)
    txn_id = f"admin-txn-{topic_name}"
    tp = TopicPartition(topic_name, 0)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=txn_id)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic_name, b"open", partition=0).get(10)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)

    def ongoing() -> set[str]:
        return {t.transactional_id for listings in admin.list_transactions(state_filters=["Ongoing"]).values()
                for t in listings}

    try:
        described = admin.describe_transactions([txn_id])[txn_id]
        assert (described.state.value, described.topic_partitions) == ("Ongoing", {tp})
        assert txn_id in ongoing()
        [state] = admin.describe_producers([tp])[tp].active_producers
        assert (state.producer_id, state.producer_epoch, state.last_sequence, state.current_transaction_start_offset) \
            == (described.producer_id, described.producer_epoch, 0, 0)
        producer.abort_transaction()
        producer.close()
        assert txn_id not in ongoing()
        assert admin.describe_transactions([txn_id])[txn_id].state.value == "CompleteAbort"
    finally:
        admin.close()


def test_log_dirs_through_kafka_python(tmp_path, topic_name):
    """DescribeLogDirs: each of two log.dirs with the partitions it holds and their sizes, and the disk's room."""
    from tests.brokerproc import BrokerProcess

    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    proc = BrokerProcess(dirs[0], {"log.dirs": ",".join(dirs)})
    proc.start()
    try:
        make_topic(proc.bootstrap, topic_name, partitions=4)
        producer = KafkaProducer(bootstrap_servers=proc.bootstrap)
        for i in range(40):
            producer.send(topic_name, b"x" * 100, partition=i % 4)
        producer.flush(10)
        producer.close()
        client = KafkaAdminClient(bootstrap_servers=proc.bootstrap)
        try:
            described = client.describe_log_dirs({topic_name: [0, 1, 2, 3]})
        finally:
            client.close()
        (only,) = described   # one broker
        assert sorted(d["log_dir"] for d in only["log_dirs"]) == sorted(dirs)
        sizes = {}
        for d in only["log_dirs"]:
            assert d["error_code"] == 0 and d["total_bytes"] >= d["usable_bytes"] > 0
            for topic in d["topics"]:
                for p in topic["partitions"]:
                    sizes[(topic["name"], p["partition_index"])] = p["partition_size"]
        assert sorted(sizes) == [(topic_name, i) for i in range(4)] and all(s > 1000 for s in sizes.values())
    finally:
        assert proc.stop() == 0


def test_more_partitions_than_one_request_may_ask_through_confluent_are_refused(broker, topic_name):
    """confluent-kafka's admin asking for 20,000 partitions (its own cap is 100,000; the broker's, as Kafka's,
    10,000 a request) gets POLICY_VIOLATION, as from Kafka, and nothing is made."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    future = admin.create_topics([NewTopic(topic_name, 20_000, 1)], request_timeout=10)[topic_name]
    try:
        future.result(15)
        raise AssertionError("created")
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError.POLICY_VIOLATION, exc
    assert topic_name not in admin.list_topics(timeout=10).topics


def test_a_name_colliding_with_a_topics_through_confluent_is_refused(broker, topic_name):
    """Kafka forbids topics whose names differ only in '.' versus '_': confluent-kafka's admin asking for
    "<t>.x" after "<t>_x" gets INVALID_TOPIC_EXCEPTION naming the topic it collides with (the broker's index of
    such names), and a name without either is made."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(f"{topic_name}_x", 1, 1)])[f"{topic_name}_x"].result(15)
    future = admin.create_topics([NewTopic(f"{topic_name}.x", 1, 1)])[f"{topic_name}.x"]
    try:
        future.result(15)
        raise AssertionError("created")
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError.TOPIC_EXCEPTION, exc
        assert f"collides with existing topic: {topic_name}_x" in exc.args[0].str(), exc
    admin.create_topics([NewTopic(f"{topic_name}x", 1, 1)])[f"{topic_name}x"].result(15)
    assert f"{topic_name}.x" not in admin.list_topics(timeout=10).topics
