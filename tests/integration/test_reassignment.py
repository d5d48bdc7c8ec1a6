"""Partition reassignment (KIP-455) through kafka-python's admin client on a real three-broker cluster: replicas
move to other brokers while a producer writes with acks=all, the new replicas catch up before the old ones
leave, the old ones delete their copy, nothing acknowledged is lost; a reassignment is listed while it runs and
can be cancelled; bad requests get Kafka's errors; a single broker accepts only itself."""

from __future__ import annotations

import os
import threading

import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import NewTopic

from tests.cluster import batches, consume_all, describe, wait_until

pytestmark = pytest.mark.timeout(240)


def test_replicas_move_to_other_brokers_under_load_and_the_old_ones_leave(cluster, topic_name):
    from confluent_kafka import Producer

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, replica_assignments={0: [1, 2], 1: [2, 1]})])
        wait_until(lambda: sorted(describe(cluster.bootstrap, topic_name)) == [0, 1], 30, 0.2, "topic ready")
        acked, stop = set(), threading.Event()

        def produce():
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                 "enable.idempotence": True, "linger.ms": 2})
            i = 0
            while not stop.is_set() or i < 2000:
                try:
                    producer.produce(topic_name, b"v%d" % i, partition=i % 2,
                                     on_delivery=lambda err, msg: err is None and acked.add(msg.value()))
                except BufferError:   # the local queue is full: wait for deliveries to make room
                    producer.poll(0.05)
                    continue
                producer.poll(0)
                i += 1
            assert producer.flush(60) == 0

        writer = threading.Thread(target=produce)
        writer.start()
        try:
            result = admin.alter_partition_reassignments({TopicPartition(topic_name, 0): [3, 2],
                                                         TopicPartition(topic_name, 1): [3, 1]})
            assert result == {TopicPartition(topic_name, 0): None, TopicPartition(topic_name, 1): None}
            wait_until(lambda: not admin.list_partition_reassignments([TopicPartition(topic_name, 0),
                                                                        TopicPartition(topic_name, 1)]),
                       60, 0.2, "reassignments finished")
        finally:
            stop.set()
            writer.join(120)
        parts = describe(cluster.bootstrap, topic_name)
        assert sorted(parts[0]["replicas"]) == [2, 3] and sorted(parts[0]["isr"]) == [2, 3]
        assert sorted(parts[1]["replicas"]) == [1, 3] and sorted(parts[1]["isr"]) == [1, 3]
        # the replica that left deleted its copy; the new one holds the same batches as the others
        wait_until(lambda: not os.path.exists(os.path.join(cluster.brokers[1].data_dir, f"{topic_name}-0")),
                   30, 0.2, "broker 1 deleted partition 0")
        wait_until(lambda: batches(cluster.brokers[3].data_dir, topic_name, 0)
                   == batches(cluster.brokers[2].data_dir, topic_name, 0), 30, 0.2, "replicas of 0 identical")
        values = [v for _, _, v in consume_all(cluster.bootstrap, topic_name, 2)]
        assert len(values) == len(set(values)) and acked <= set(values)
    finally:
        admin.close()


def test_a_reassignment_is_listed_until_cancelled_and_bad_ones_are_refused(cluster, topic_name):
    from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError

    probe = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        controller = probe.describe_cluster()["controller_id"]
    finally:
        probe.close()
    # Partition 0 on [kept, leaving] moves to [kept, paused]: ``kept`` is the controller, which keeps running;
    # ``paused`` is SIGSTOPped, so it cannot catch up and the reassignment stays in progress; clients use the
    # two running brokers meanwhile.
    kept = controller
    leaving, paused = sorted(set(cluster.brokers) - {controller})
    live = ",".join(cluster.brokers[b].bootstrap for b in (kept, leaving))
    admin = KafkaAdminClient(bootstrap_servers=live)
    tp = TopicPartition(topic_name, 0)
    try:
        admin.create_topics([NewTopic(topic_name, replica_assignments={0: [kept, leaving]})])
        wait_until(lambda: sorted(describe(live, topic_name)) == [0], 30, 0.2, "topic ready")
        assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
        assert admin.alter_partition_reassignments({tp: [kept, 9]}) == {tp: InvalidReplicationAssignmentError}
        assert admin.alter_partition_reassignments({tp: [kept, kept]}) == {tp: InvalidReplicationAssignmentError}
        cluster.brokers[paused].pause()
        try:
            assert admin.alter_partition_reassignments({tp: [kept, paused]}) == {tp: None}
            listed = admin.list_partition_reassignments()
            assert listed[tp] == {"replicas": [kept, paused, leaving], "adding_replicas": [paused],
                                  "removing_replicas": [leaving]}
            assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
            assert admin.list_partition_reassignments().get(tp) is None
        finally:
            cluster.brokers[paused].resume()
        wait_until(lambda: describe(cluster.bootstrap, topic_name)[0]["replicas"] == [kept, leaving], 30, 0.2,
                   "back to the original replicas")
        wait_until(lambda: not os.path.exists(os.path.join(cluster.brokers[paused].data_dir, f"{topic_name}-0")),
                   30, 0.2, "the paused broker dropped the replica it was given")
    finally:
        admin.close()


def test_a_single_broker_accepts_only_itself(broker, topic_name):
    from kafka.errors import InvalidReplicationAssignmentError

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    tp = TopicPartition(topic_name, 0)
    try:
        admin.create_topics([NewTopic(topic_name, 1, 1)])
        assert admin.alter_partition_reassignments({tp: [0]}) == {tp: None}
        assert admin.alter_partition_reassignments({tp: [0, 1]}) == {tp: InvalidReplicationAssignmentError}
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()


async def test_a_broker_without_a_replica_of_an_existing_partition_says_not_leader(cluster, topic_name):
    """A client with stale metadata (the replica moved away) is told NOT_LEADER_OR_FOLLOWER and looks the
    leader up again; UNKNOWN_TOPIC_OR_PARTITION would be wrong, and librdkafka's idempotent producer, retrying
    after it, could take a later batch's success for the failed one's (seen as lost records in the test
    above before this answer was fixed)."""
    from kbroker.client.connection import KafkaConnection
    from kbroker.protocol.records import build_batch

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, replica_assignments={0: [1]})])
    finally:
        admin.close()
    wait_until(lambda: describe(cluster.bootstrap, topic_name)[0]["leader"] == 1, 30, 0.2, "leader elected")
    wait_until(lambda: all(describe(b.bootstrap, topic_name) for b in cluster.brokers.values()), 30, 0.2,
               "every broker knows the topic")
    conn = await KafkaConnection.open("127.0.0.1", cluster.brokers[2].port, client_id="stale")
    try:
        for topic, expected in ((topic_name, 6), (f"{topic_name}-nope", 3)):   # NOT_LEADER, UNKNOWN_TOPIC
            response = await conn.request(0, 9, {"acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": build_batch([(None, b"x", [])])}]}]})
            assert response.responses[0].partition_responses[0].error_code == expected
    finally:
        await conn.close()



def test_a_throttled_reassignment_moves_at_the_throttled_rate(cluster, topic_name):
    """leader/follower.replication.throttled.rate with the topic's throttled replicas: a new replica copies
    3 MB at about 300 kB/s instead of at once, then joins the ISR with the same batches as the leader."""
    import time

    from confluent_kafka import Producer
    from kafka.admin import ConfigResource, ConfigResourceType

    rate, size = 300_000, 3_000_000
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, replica_assignments={0: [1]})])
        wait_until(lambda: sorted(describe(cluster.bootstrap, topic_name)) == [0], 30, 0.2, "topic ready")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(size // 1000):
            producer.produce(topic_name, b"%06d" % i + b"x" * 994, partition=0)
            producer.poll(0)
        assert producer.flush(30) == 0
        admin.alter_configs([
            ConfigResource(ConfigResourceType.BROKER, "1", {"leader.replication.throttled.rate": str(rate)}),
            ConfigResource(ConfigResourceType.BROKER, "3", {"follower.replication.throttled.rate": str(rate)}),
            ConfigResource(ConfigResourceType.TOPIC, topic_name, {"leader.replication.throttled.replicas": "0:1",
                                                                  "follower.replication.throttled.replicas": "0:3"})],
            raise_on_unknown=False)   # (the rates are no KafkaConfig's, described only once set, as in Kafka)
        started = time.monotonic()
        assert admin.alter_partition_reassignments({TopicPartition(topic_name, 0): [1, 3]}) == \
            {TopicPartition(topic_name, 0): None}
        wait_until(lambda: not admin.list_partition_reassignments([TopicPartition(topic_name, 0)]), 60, 0.2,
                   "reassignment finished")
        took = time.monotonic() - started
        # 3 MB at 300 kB/s is 10 s; the first window may run ahead by one fetch (1 MiB)
        assert took >= 0.6 * size / rate, f"moved in {took:.1f} s: not throttled"
        assert sorted(describe(cluster.bootstrap, topic_name)[0]["isr"]) == [1, 3]
        wait_until(lambda: batches(cluster.brokers[3].data_dir, topic_name, 0)
                   == batches(cluster.brokers[1].data_dir, topic_name, 0), 30, 0.2, "replicas identical")
    finally:
        admin.reset_configs([   # (every dynamic key of the two brokers back to its default: no throttle left)
            ConfigResource(ConfigResourceType.BROKER, "1", {}), ConfigResource(ConfigResourceType.BROKER, "3", {})])
        admin.close()


def test_throttled_replica_lists_are_validated_and_described(broker, topic_name):
    """The topics' throttled-replica configs take ``*`` or ``partition:broker`` pairs (anything else is
    INVALID_CONFIG, as Kafka answers), and DescribeConfigs gives back what was set (confluent-kafka)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
    from confluent_kafka.admin import NewTopic as ConfluentTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([ConfluentTopic(topic_name, 1, 1)])[topic_name].result(10)
    resource = ConfigResource("topic", topic_name)

    def set_configs(**values):
        changes = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in values.items()]
        admin.incremental_alter_configs([ConfigResource("topic", topic_name, incremental_configs=changes)])[
            resource].result(10)

    for bad in ("0-1", "x:1", "0:1,*"):
        with pytest.raises(KafkaException) as refused:
            set_configs(leader_replication_throttled_replicas=bad)
        assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG, bad
    set_configs(leader_replication_throttled_replicas="0:0,1:2", follower_replication_throttled_replicas="*")
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["leader.replication.throttled.replicas"].value == "0:0,1:2"
    assert configs["follower.replication.throttled.replicas"].value == "*"


async def test_a_request_that_forbids_a_replication_factor_change_gets_only_moves(cluster, topic_name):
    """KIP-860 (v1): with allow_replication_factor_change false a new replica count is refused; a move that
    keeps it goes through."""
    from kbroker.client.connection import KafkaConnection
    from kbroker.protocol.errors import ErrorCode
    from tests.cluster import create

    create(cluster.bootstrap, topic_name, 1, 2)
    replicas = describe(cluster.bootstrap, topic_name)[0]["replicas"]
    other = next(b for b in cluster.brokers if b not in replicas)

    async def reassign(conn, target):
        answer = await conn.request(45, 1, {"timeout_ms": 30000, "allow_replication_factor_change": False,
                                            "topics": [{"name": topic_name, "partitions": [
                                                {"partition_index": 0, "replicas": target}]}]})
        return answer.allow_replication_factor_change, answer.responses[0].partitions[0].error_code

    async def on_the_controller():
        from kafka import KafkaAdminClient
        probe = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            controller = probe.describe_cluster()["controller_id"]
        finally:
            probe.close()
        conn = await KafkaConnection.open("127.0.0.1", cluster.brokers[controller].port)
        try:
            grown = await reassign(conn, replicas + [other])
            moved = await reassign(conn, [replicas[0], other])
        finally:
            await conn.close()
        return grown, moved
    grown, moved = await on_the_controller()
    assert grown == (False, ErrorCode.INVALID_REPLICATION_FACTOR) and moved == (False, ErrorCode.NONE)
    wait_until(lambda: describe(cluster.bootstrap, topic_name)[0]["replicas"] == [replicas[0], other], 30, 0.2,
               "the move done")
