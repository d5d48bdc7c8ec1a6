"""A three-broker cluster on a real ZooKeeper: replication, ISR, failover, fencing, controlled shutdown."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from kafka import KafkaProducer

from kbroker.client.connection import KafkaConnection
from kbroker.protocol.errors import ErrorCode
from tests.cluster import batches, consume_all, create, describe, known_to, leader_of, wait_until

pytestmark = pytest.mark.timeout(240)


def test_replication_factor_three_copies_every_batch_to_every_replica(cluster, topic_name):
    create(cluster.bootstrap, topic_name)
    parts = describe(cluster.bootstrap, topic_name)
    assert sorted(parts) == [0, 1, 2]
    assert all(sorted(p["replicas"]) == [1, 2, 3] and sorted(p["isr"]) == [1, 2, 3] for p in parts.values())
    assert sorted(Counter_leaders(parts)) == [1, 1, 1], "leaders spread over the brokers"
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5)
    for i in range(300):
        producer.send(topic_name, value=b"v%d" % i, partition=i % 3)
    producer.flush()
    producer.close()
    for p in range(3):
        wait_until(lambda p=p: len({tuple(batches(b.data_dir, topic_name, p)) for b in cluster.brokers.values()}) == 1,
                   message=f"replicas of partition {p} identical")
    values = sorted(v for _, _, v in consume_all(cluster.bootstrap, topic_name, 3))
    assert values == sorted(b"v%d" % i for i in range(300))


def Counter_leaders(parts):
    from collections import Counter

    return Counter(p["leader"] for p in parts.values()).values()


def test_too_few_brokers_is_invalid_replication_factor(cluster, topic_name):
    from kafka.errors import InvalidReplicationFactorError

    with pytest.raises(InvalidReplicationFactorError):
        create(cluster.bootstrap, topic_name, 1, 4)


def _produce_while(cluster, topic: str, action, count: int = 3000) -> set[bytes]:
    """An idempotent acks=all librdkafka producer sends ``count`` records while ``action`` runs; returns the
    values it was told were written."""
    import threading

    from confluent_kafka import Producer

    acked: set[bytes] = set()
    errors: list[str] = []

    def report(err, msg):
        if err is None:
            acked.add(msg.value())
        else:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": 60000, "retry.backoff.ms": 100,
                         "topic.metadata.refresh.interval.ms": 1000})
    done = threading.Event()

    def send():
        for i in range(count):
            producer.produce(topic, value=b"%08d" % i, partition=0, on_delivery=report)
            producer.poll(0)
            if i % 100 == 0:
                done.wait(0.02)
        producer.flush(90)

    sender = threading.Thread(target=send)
    sender.start()
    action()
    sender.join(120)
    assert not sender.is_alive()
    assert len(acked) + len(errors) == count, (len(acked), errors[:3])
    return acked


def _assert_exactly_once_in_order(cluster, topic: str, acked: set[bytes]) -> None:
    records = consume_all(cluster.bootstrap, topic, 1)
    values = [v for _, _, v in records]
    assert len(values) == len(set(values)), "no record twice"
    assert acked <= set(values), f"acknowledged records lost: {len(acked - set(values))}"
    assert values == sorted(values), "in order"


def kill_leaders_during_produce(cluster, topic: str, cycles: int, count: int) -> None:
    """kill -9 of the partition's leader ``cycles`` times (restarting it each time) while an idempotent acks=all
    producer writes: every acknowledged record is readable afterwards, none twice, in order."""
    create(cluster.bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})

    def kill_leaders():
        for _ in range(cycles):
            wait_until(lambda: len(describe(cluster.bootstrap, topic)[0]["isr"]) == 3, 30, 0.2,
                       "full ISR before the kill")
            leader = wait_until(lambda: leader_of(cluster.bootstrap, topic, 0), 30, 0.2, "a leader")
            cluster.brokers[leader].kill()
            wait_until(lambda: leader_of(cluster.bootstrap, topic, 0) not in (leader, -1), 30, 0.2,
                       "a new leader")
            cluster.brokers[leader].start()

    acked = _produce_while(cluster, topic, kill_leaders, count)
    _assert_exactly_once_in_order(cluster, topic, acked)


def test_kill_leader_three_times_during_acks_all_idempotent_produce_loses_nothing(cluster, topic_name):
    kill_leaders_during_produce(cluster, topic_name, 3, 6000)


@pytest.mark.slow
def test_kill_leader_ten_times_during_acks_all_idempotent_produce_loses_nothing(cluster, topic_name):
    """The same, ten kills (make test-slow; make test runs three)."""
    kill_leaders_during_produce(cluster, topic_name, 10, 20000)


def test_partitions_added_and_configs_changed_reach_every_broker(cluster, topic_name):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions

    create(cluster.bootstrap, topic_name, 2, 3)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
    try:
        admin.create_partitions({topic_name: NewPartitions(5)}, timeout_ms=30000)
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name,
                                            configs={"retention.ms": "123456"})])
    finally:
        admin.close()
    parts = describe(cluster.bootstrap, topic_name)
    assert sorted(parts) == [0, 1, 2, 3, 4]
    assert all(p["leader"] >= 0 and len(p["replicas"]) == 3 for p in parts.values()), parts

    async def retention_on(broker) -> str:
        conn = await KafkaConnection.open("127.0.0.1", broker.port, client_id="config-check")
        try:
            resp = await conn.request(32, 1, {"resources": [{"resource_type": 2, "resource_name": topic_name,
                                                              "configuration_keys": ["retention.ms"]}],
                                              "include_synonyms": False})
        finally:
            await conn.close()
        return resp.results[0].configs[0].value

    def retention_everywhere():   # each broker asked itself, not whichever the admin client picks
        return {asyncio.run(retention_on(b)) for b in cluster.brokers.values()} == {"123456"}
    wait_until(retention_everywhere, 30, 0.5, "the new retention.ms on every broker")


async def test_a_creation_with_no_time_to_wait_is_answered_at_once_and_completes(cluster, topic_name):
    """CreateTopics and CreatePartitions with ``timeout_ms`` 0 (librdkafka's operation timeout 0: "return
    immediately after triggering topic creation") are answered NONE at once, as ZooKeeper-mode Kafka answered
    them, and the partitions get their leaders after. Answering REQUEST_TIMED_OUT for a topic that was made would
    send a retrying client to TOPIC_ALREADY_EXISTS."""
    broker = next(iter(cluster.brokers.values()))
    conn = await KafkaConnection.open("127.0.0.1", broker.port, client_id="no-wait")
    try:
        created = await conn.request(19, 7, {"topics": [{"name": topic_name, "num_partitions": 1,
                                                          "replication_factor": 3, "assignments": [], "configs": []}],
                                             "timeout_ms": 0, "validate_only": False})
        assert [t.error_code for t in created.topics] == [ErrorCode.NONE]
        await known_to(broker.port, topic_name, 1)
        grown = await conn.request(37, 3, {"topics": [{"name": topic_name, "count": 3, "assignments": None}],
                                           "timeout_ms": 0, "validate_only": False})
        assert [r.error_code for r in grown.results] == [ErrorCode.NONE]
    finally:
        await conn.close()
    for b in cluster.brokers.values():
        await known_to(b.port, topic_name, 3)


def test_controlled_shutdown_moves_leadership_before_exit(cluster, topic_name):
    create(cluster.bootstrap, topic_name, 3, 3)
    wait_until(lambda: all(len(p["isr"]) == 3 for p in describe(cluster.bootstrap, topic_name).values()), 30, 0.2,
               "full ISRs")
    victim = describe(cluster.bootstrap, topic_name)[0]["leader"]

    def stop_leader():
        try:
            assert cluster.brokers[victim].stop() == 0
            parts = describe(cluster.bootstrap, topic_name)
            assert all(p["leader"] != victim and p["leader"] >= 0 for p in parts.values()), parts
        finally:   # (the module's cluster goes on with three brokers whatever this test finds)
            cluster.brokers[victim].start()

    acked = _produce_while(cluster, topic_name, stop_leader, 2000)
    assert len(acked) == 2000, "producers see only retriable errors"
    _assert_exactly_once_in_order(cluster, topic_name, acked)


def test_replicas_are_spread_over_racks(tmp_path, topic_name):
    """``broker.rack`` from each broker's config reaches the controller through its registration: with racks
    {a, a, b} every partition of a two-replica topic has a replica on b, a three-replica one spans both racks,
    and Metadata reports each broker's rack."""
    from kafka import KafkaAdminClient

    from tests.cluster import Cluster

    racks = {1: "a", 2: "a", 3: "b"}
    cluster = Cluster(str(tmp_path / "cluster"), per_broker={b: {"broker.rack": r} for b, r in racks.items()})
    cluster.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            assert {b["broker_id"]: b["rack"] for b in admin.describe_cluster()["brokers"]} == racks
        finally:
            admin.close()
        create(cluster.bootstrap, f"{topic_name}-rf2", 6, 2)
        create(cluster.bootstrap, f"{topic_name}-rf3", 6, 3)
        for name, rf in ((f"{topic_name}-rf2", 2), (f"{topic_name}-rf3", 3)):
            parts = describe(cluster.bootstrap, name)
            assert len(parts) == 6 and all(len(set(p["replicas"])) == rf for p in parts.values())
            assert all({racks[r] for r in p["replicas"]} == {"a", "b"} for p in parts.values()), parts
        leaders = Counter_leaders(describe(cluster.bootstrap, f"{topic_name}-rf2"))
        assert max(leaders) - min(leaders) <= 1 and len(leaders) == 3, "leaders still spread over the brokers"
    finally:
        assert all(code == 0 for code in cluster.stop().values())


def test_consumer_group_members_get_the_partitions_of_their_rack(tmp_path, topic_name):
    """KIP-848's rack-aware assignment with librdkafka members (``client.rack``, sent as RackId): three racks of
    one broker each, one single-replica partition on each; each member is given the partition whose replica is
    in its rack, and keeps it when the members join in another order."""
    import time

    from confluent_kafka import Consumer

    from tests.cluster import Cluster

    racks = {1: "a", 2: "b", 3: "c"}
    cluster = Cluster(str(tmp_path / "cluster"), per_broker={b: {"broker.rack": r} for b, r in racks.items()})
    cluster.start()
    consumers = {}
    try:
        create(cluster.bootstrap, topic_name, 3, 1)
        rack_of = {p: racks[info["replicas"][0]] for p, info in describe(cluster.bootstrap, topic_name).items()}
        assert sorted(rack_of.values()) == ["a", "b", "c"], rack_of
        for rack in ("c", "a", "b"):
            consumers[rack] = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{topic_name}",
                                        "group.protocol": "consumer", "client.rack": rack})
            consumers[rack].subscribe([topic_name])

        def assigned() -> dict:
            for c in consumers.values():
                c.poll(0.05)
            return {rack: sorted(tp.partition for tp in c.assignment()) for rack, c in consumers.items()}
        deadline = time.monotonic() + 60
        while any(len(ps) != 1 for ps in assigned().values()):
            assert time.monotonic() < deadline, assigned()
        assert {rack: [p for p, r in rack_of.items() if r == rack] for rack in racks.values()} == assigned()
    finally:
        for c in consumers.values():
            c.close()
        assert all(code == 0 for code in cluster.stop().values())


def test_a_broker_that_has_just_joined_answers_metadata_once_the_controller_has_told_it(tmp_path, topic_name):
    """A client that bootstraps from a broker before the controller's first UpdateMetadata reaches it gets the
    whole cluster and its controller, not an empty answer (librdkafka's admin client would then wait for a
    controller change that never comes). The controller is held with SIGSTOP while the second broker joins."""
    import os
    import threading

    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.brokerproc import BrokerProcess
    from tests.cluster import CLUSTER_OVERRIDES, Cluster

    cluster = Cluster(str(tmp_path / "cluster"), size=1)
    cluster.start()
    try:
        controller = cluster.brokers[1]
        controller.pause()
        resume = threading.Timer(1.0, controller.resume)
        try:
            joined = BrokerProcess(os.path.join(cluster.root, "broker-2", "data"), {
                **CLUSTER_OVERRIDES, "broker.id": "2", "zookeeper.connect": cluster.zookeeper.connect + "/kbroker"})
            cluster.brokers[2] = joined.start()
            resume.start()
            admin = AdminClient({"bootstrap.servers": joined.bootstrap})
            metadata = admin.list_topics(timeout=20)
        finally:
            resume.cancel()
            controller.resume()   # (a second SIGCONT is harmless)
        assert metadata.controller_id == 1
        assert sorted(metadata.brokers) == [1, 2]
        admin.create_topics([NewTopic(topic_name, 2, 2)])[topic_name].result(30)
        assert sorted(describe(joined.bootstrap, topic_name)) == [0, 1]
    finally:
        assert all(code == 0 for code in cluster.stop().values())


def share_states_on_disk(cluster, topic_id: bytes) -> dict[tuple, list]:
    """(group, partition) -> the last value each replica of ``__share_group_state`` holds for a key of
    ``topic_id`` (None: a tombstone), read from the brokers' log files."""
    import os

    from kbroker.coordinators.share.records import decode_key
    from kbroker.protocol.records import iter_records
    found: dict[tuple, list] = {}
    for broker in cluster.brokers.values():
        for folder in sorted(os.listdir(broker.data_dir)):
            if not folder.startswith("__share_group_state-"):
                continue
            last = {}
            for batch in batches(broker.data_dir, "__share_group_state", int(folder.rsplit("-", 1)[1])):
                for record in iter_records(batch):
                    group, key_topic, partition = decode_key(record.key)
                    if key_topic == topic_id:
                        last[group, partition] = record.value
            for key, value in last.items():
                found.setdefault(key, []).append(value)
    return found


def test_a_deleted_topic_leaves_every_broker(cluster, topic_name):
    """DeleteTopics: the controller sends StopReplica with delete to every replica; each broker removes its
    partition folders and Metadata no longer knows the topic; the share state of its partitions ends in a
    tombstone on every replica of the share-state topic (the share coordinator holding it cleans it up)."""
    import os

    from confluent_kafka.admin import AdminClient
    from tests.integration.share_members import joined_share_member, topic_id_of

    create(cluster.bootstrap, topic_name, 2, 3)
    topic_id = topic_id_of(cluster.bootstrap.split(",")[0], topic_name)
    joined_share_member(cluster.bootstrap, f"share-{topic_name}", topic_name)   # (the state of both made)
    wait_until(lambda: len(share_states_on_disk(cluster, topic_id)) == 2, 30, 0.2, "both share states written")
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for i in range(20):
        producer.send(topic_name, value=b"d%d" % i, partition=i % 2)
    producer.flush()
    producer.close()
    folders = [os.path.join(b.data_dir, f"{topic_name}-{p}") for b in cluster.brokers.values() for p in (0, 1)]
    assert all(os.path.isdir(f) for f in folders)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.delete_topics([topic_name])[topic_name].result(30)
    wait_until(lambda: not any(os.path.exists(f) for f in folders), 30, 0.2, "every replica deleted")
    wait_until(lambda: topic_name not in admin.list_topics(timeout=10).topics, 30, 0.2, "metadata forgot it")
    def tombstoned():
        states = share_states_on_disk(cluster, topic_id)
        return len(states) == 2 and all(copies and set(copies) == {None} for copies in states.values())
    wait_until(tombstoned, 30, 0.2, "the share states tombstoned on every replica")


async def test_a_follower_serves_consumers_that_may_read_it_and_refuses_the_rest(cluster, topic_name):
    """Fetch v11+ carries client metadata (KIP-392): a follower serves it up to its own high watermark, as
    Kafka 4 does; an older Fetch, Produce and ListOffsets it refuses with NOT_LEADER_OR_FOLLOWER."""
    from kbroker.protocol.records import build_batch

    create(cluster.bootstrap, topic_name, partitions=1)
    state = describe(cluster.bootstrap, topic_name)[0]
    follower = cluster.brokers[next(r for r in state["replicas"] if r != state["leader"])]
    await known_to(cluster.brokers[state["leader"]].port, topic_name, leading=True)
    await known_to(follower.port, topic_name)
    leader = await KafkaConnection.open("127.0.0.1", cluster.brokers[state["leader"]].port)
    conn = await KafkaConnection.open("127.0.0.1", follower.port)
    try:
        produced = await leader.request(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 10000,
                                               "topic_data": [{"name": topic_name, "partition_data": [
                                                   {"index": 0, "records": build_batch([(b"k", b"read me", [])])}]}]})
        assert produced.responses[0].partition_responses[0].error_code == 0

        async def fetch(version: int):
            answer = await conn.request(1, version, {
                "replica_id": -1, "max_wait_ms": 5000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "rack_id": "", "topics": [{"topic": topic_name, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                     "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": []})
            return answer.responses[0].partitions[0]
        # (the follower's high watermark reaches 1 with its next fetch from the leader: the fetch waits for it)
        served = await fetch(11)
        assert served.error_code == 0 and b"read me" in bytes(served.records) and served.high_watermark == 1
        assert (await fetch(10)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        listed = await conn.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{
            "name": topic_name, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        assert listed.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        await conn.close()
        await leader.close()


async def test_a_broker_without_the_partition_sends_the_client_to_its_leader(cluster, topic_name):
    """Kafka's answers where a client reached the wrong broker or came too early, which clients retry after
    refreshing metadata: DeleteRecords and DescribeProducers at a broker holding no replica (and
    DescribeProducers at a follower) are NOT_LEADER_OR_FOLLOWER, and a Metadata request that auto-creates a
    topic is LEADER_NOT_AVAILABLE until the controller has told this broker the leaders."""
    create(cluster.bootstrap, topic_name, partitions=1, rf=2)
    state = describe(cluster.bootstrap, topic_name)[0]
    follower = next(r for r in state["replicas"] if r != state["leader"])
    bystander = next(b for b in cluster.brokers if b not in state["replicas"])
    for b in (follower, bystander):
        await known_to(cluster.brokers[b].port, topic_name)
    conns = {b: await KafkaConnection.open("127.0.0.1", cluster.brokers[b].port) for b in (follower, bystander)}
    try:
        for b, conn in conns.items():
            producers = await conn.request(61, 0, {"topics": [{"name": topic_name, "partition_indexes": [0]}]})
            assert producers.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER, b
        deleted = await conns[bystander].request(21, 2, {"topics": [{"name": topic_name, "partitions": [
            {"partition_index": 0, "offset": 0}]}], "timeout_ms": 5000})
        assert deleted.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

        # KIP-951: Produce v10+ and Fetch v16+ name the leader and its endpoint with the refusal.
        from kbroker.protocol.records import build_batch
        leader = cluster.brokers[state["leader"]]
        known = await conns[bystander].request(3, 12, {"topics": [{"name": topic_name, "topic_id": None}],
                                                       "allow_auto_topic_creation": False,
                                                       "include_topic_authorized_operations": False})
        produced = await conns[bystander].request(0, 10, {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                                                          "topic_data": [{"name": topic_name, "partition_data": [
                                                              {"index": 0, "records": build_batch([(b"k", b"v", [])])}]}]})
        fetched = await conns[bystander].request(1, 16, {
            "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [], "topics": [{
                "topic_id": known.topics[0].topic_id, "partitions": [{
                    "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                    "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
        for answer, partition in ((produced, produced.responses[0].partition_responses[0]),
                                  (fetched, fetched.responses[0].partitions[0])):
            assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert partition.current_leader.leader_id == state["leader"]
            assert [(e.node_id, e.port) for e in answer.node_endpoints] == [(state["leader"], leader.port)]

        new_topic = topic_name + "-auto"
        answers = []

        async def metadata():
            answer = await conns[bystander].request(3, 12, {"topics": [{"name": new_topic, "topic_id": None}],
                                                            "allow_auto_topic_creation": True,
                                                            "include_topic_authorized_operations": False})
            answers.append(answer.topics[0].error_code)
            return answer.topics[0].error_code == 0 and all(p.leader_id >= 0 for p in answer.topics[0].partitions)
        deadline = asyncio.get_running_loop().time() + 30
        while not await metadata():
            assert asyncio.get_running_loop().time() < deadline, answers
            await asyncio.sleep(0.05)
        assert answers[0] == ErrorCode.LEADER_NOT_AVAILABLE and ErrorCode.UNKNOWN_TOPIC_OR_PARTITION not in answers
    finally:
        for conn in conns.values():
            await conn.close()


async def test_a_share_fetch_where_the_partition_is_not_led_names_its_leader_and_endpoint(cluster, topic_name):
    """ShareFetch and ShareAcknowledge at a follower or a broker without the partition: NOT_LEADER_OR_FOLLOWER
    with the leader and its epoch, and the leader's endpoint in the answer (Kafka's, as Fetch v16+ does), so a
    share consumer that met a leadership change goes to the new leader. The refused partition's records are
    empty, not null, as Kafka writes them (librdkafka cannot parse a null record set there, never sees the
    error, and fetches from the old leader again at once, forever)."""
    create(cluster.bootstrap, topic_name, partitions=1, rf=2)
    state = describe(cluster.bootstrap, topic_name)[0]
    leader = state["leader"]
    elsewhere = [b for b in cluster.brokers if b != leader]
    member = uuid.uuid4().hex
    for b in elsewhere:
        conn = await KafkaConnection.open("127.0.0.1", cluster.brokers[b].port)
        try:
            known = await conn.request(3, 12, {"topics": [{"name": topic_name, "topic_id": None}],
                                               "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False})
            topic_id = known.topics[0].topic_id
            epoch = known.topics[0].partitions[0].leader_epoch
            partitions = [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}]}]
            fetched = await conn.request(78, 1, {
                "group_id": f"share-{topic_name}", "member_id": member, "share_session_epoch": 0, "max_wait_ms": 0,
                "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10,
                "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0,
                                                                  "acknowledgement_batches": []}]}],
                "forgotten_topics_data": []})
            acked = await conn.request(79, 1, {"group_id": f"share-{topic_name}", "member_id": member,
                                               "share_session_epoch": 1, "topics": partitions})
            assert fetched.responses[0].partitions[0].records is not None, b
            for answer in (fetched, acked):
                assert answer.error_code == 0, b
                partition = answer.responses[0].partitions[0]
                assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER, b
                assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (leader, epoch)
                assert [(e.node_id, e.port) for e in answer.node_endpoints] == [
                    (leader, cluster.brokers[leader].port)], b
        finally:
            await conn.close()


def test_a_client_metrics_subscription_reaches_every_broker(cluster):
    """Made on one broker, kept in /config/client-metrics: every broker describes and lists it (and would
    hand it to the clients that ask it), and its removal reaches them too."""
    name = f"sub-{uuid.uuid4().hex[:6]}"

    async def alter(broker, value):
        conn = await KafkaConnection.open("127.0.0.1", broker.port, client_id="metrics-config")
        try:
            answer = await conn.request(44, 1, {"resources": [{"resource_type": 16, "resource_name": name, "configs": [
                {"name": "interval.ms", "config_operation": 0 if value else 1, "value": value}]}],
                "validate_only": False})
        finally:
            await conn.close()
        return answer.responses[0].error_code

    async def seen_on(broker):
        conn = await KafkaConnection.open("127.0.0.1", broker.port, client_id="metrics-config")
        try:
            listed = await conn.request(74, 1, {"resource_types": [16]})
            described = await conn.request(32, 4, {"resources": [{"resource_type": 16, "resource_name": name,
                                                                   "configuration_keys": ["interval.ms"]}],
                                                   "include_synonyms": False, "include_documentation": False})
        finally:
            await conn.close()
        return name in {r.resource_name for r in listed.config_resources}, described.results[0].configs[0].value

    first = cluster.brokers[min(cluster.brokers)]
    assert asyncio.run(alter(first, "12345")) == 0
    wait_until(lambda: {asyncio.run(seen_on(b)) for b in cluster.brokers.values()} == {(True, "12345")}, 30, 0.2,
               "the subscription on every broker")
    assert asyncio.run(alter(first, None)) == 0
    wait_until(lambda: {asyncio.run(seen_on(b)) for b in cluster.brokers.values()} == {(False, "300000")}, 30, 0.2,
               "the subscription gone from every broker")


def test_a_feature_level_reaches_every_broker(cluster):
    """UpdateFeatures on one broker, kept in /feature: every broker's ApiVersions reports the new level."""
    async def update(broker, level, upgrade_type):
        conn = await KafkaConnection.open("127.0.0.1", broker.port, client_id="features")
        try:
            answer = await conn.request(57, 2, {"timeout_ms": 10000, "validate_only": False, "feature_updates": [
                {"feature": "transaction.version", "max_version_level": level, "upgrade_type": upgrade_type}]})
        finally:
            await conn.close()
        return answer.error_code

    async def level_on(broker):
        conn = await KafkaConnection.open("127.0.0.1", broker.port, client_id="features")
        try:
            answer = await conn.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        finally:
            await conn.close()
        return {f.name: f.max_version_level for f in answer.finalized_features}.get("transaction.version", 0)

    first = cluster.brokers[min(cluster.brokers)]
    assert asyncio.run(update(first, 1, 2)) == 0
    try:
        wait_until(lambda: {asyncio.run(level_on(b)) for b in cluster.brokers.values()} == {1}, 30, 0.2,
                   "transaction.version 1 on every broker")
    finally:
        assert asyncio.run(update(first, 2, 1)) == 0
    wait_until(lambda: {asyncio.run(level_on(b)) for b in cluster.brokers.values()} == {2}, 30, 0.2,
               "transaction.version 2 again on every broker")
