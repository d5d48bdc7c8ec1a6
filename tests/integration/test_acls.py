"""ACLs on a real broker, driven by kafka-python, confluent-kafka and aiokafka as users with different rights:
ACLs made and removed through each admin API take effect on the next request; every API answers a principal
without the right with Kafka's error (topic, group, transactional id, cluster); Metadata hides the topics it may
not describe; the controller and replica APIs refuse a non-super user; ACLs survive a restart."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import TopicAuthorizationFailedError as AioTopicAuthorizationFailed
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern,
                         ResourcePatternFilter)
from kafka.admin import ResourceType as KResourceType
from kafka.errors import ClusterAuthorizationFailedError, SecurityDisabledError, TopicAuthorizationFailedError

from kbroker.client.connection import KafkaConnection
from kbroker.client.sasl import SaslCredentials
from kbroker.protocol.errors import ErrorCode
from tests.brokerproc import ROOT, BrokerProcess

pytestmark = pytest.mark.timeout(180)

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule required"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN, WRITE_TXN_MARKERS = 4, 5, 6, 7, 27
ALLOCATE_PRODUCER_IDS = 67
FETCH, METADATA, CREATE_ACLS, DESCRIBE_ACLS = 1, 3, 30, 29


def acl_settings() -> dict[str, str]:
    users = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    return {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                f'{PLAIN_MODULE} username="admin" password="admin-secret" {users};',
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"}


def confluent(user: str) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
            "sasl.password": USERS[user]}


def kafka_python(user: str) -> dict:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": user,
            "sasl_plain_password": USERS[user]}


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    broker = BrokerProcess(str(tmp_path_factory.mktemp("acls") / "data"), acl_settings())
    broker.start()
    yield broker
    assert broker.stop() == 0
    assert "Traceback" not in open(broker.log_path, encoding="utf-8").read()


def admin(broker, user="admin") -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, **confluent(user)})


def allow(principal: str, rtype: ResourceType, name: str, op: AclOperation,
          pattern=ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


def grant(broker, *bindings: AclBinding) -> None:
    client = admin(broker)   # (held: a collected AdminClient fails its pending futures)
    for future in client.create_acls(list(bindings)).values():
        future.result(30)


def create_topic(broker, name: str, partitions: int = 1) -> None:
    client = admin(broker)
    client.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def describe_everything(bootstrap: str, security: dict) -> list:
    client = KafkaAdminClient(bootstrap_servers=bootstrap, **security)
    try:
        return client.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                              ResourcePatternFilter(KResourceType.ANY, None,
                                                                    ACLResourcePatternType.ANY)))[0]
    finally:
        client.close()


async def raw(broker, user: str) -> KafkaConnection:
    return await KafkaConnection.open("127.0.0.1", broker.port, sasl=SaslCredentials("PLAIN", user, USERS[user]))


def test_acls_made_through_kafka_python_take_effect_at_once(acl_broker, topic_name):
    create_topic(acl_broker, topic_name)
    client = KafkaAdminClient(bootstrap_servers=acl_broker.bootstrap, **kafka_python("admin"))
    pattern = ResourcePattern(KResourceType.TOPIC, topic_name)
    write = ACL("User:alice", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW, pattern)

    def alice_sends() -> bool:
        producer = KafkaProducer(bootstrap_servers=acl_broker.bootstrap, max_block_ms=5000, retries=0,
                                 **kafka_python("alice"))
        try:
            producer.send(topic_name, b"hello").get(timeout=10)
            return True
        except TopicAuthorizationFailedError:
            return False
        finally:
            producer.close(timeout=5)

    try:
        assert not alice_sends()
        result = client.create_acls([write])
        assert result["failed"] == [] and len(result["succeeded"]) == 1
        assert alice_sends()
        found, error = client.describe_acls(ACLFilter(None, "*", ACLOperation.ANY, ACLPermissionType.ANY,
                                                      ResourcePatternFilter(KResourceType.TOPIC, topic_name,
                                                                            ACLResourcePatternType.ANY)))
        assert [(a.principal, a.operation) for a in found] == [("User:alice", ACLOperation.WRITE)]
        deleted = client.delete_acls([ACLFilter("User:alice", "*", ACLOperation.ANY, ACLPermissionType.ANY,
                                                ResourcePatternFilter(KResourceType.TOPIC, topic_name,
                                                                      ACLResourcePatternType.LITERAL))])
        assert len(deleted[0][1]) == 1
        assert not alice_sends()
    finally:
        client.close()


def test_a_group_consumer_needs_read_on_topic_and_group(acl_broker, topic_name):
    create_topic(acl_broker, topic_name)
    producer = Producer({"bootstrap.servers": acl_broker.bootstrap, **confluent("admin")})
    for i in range(10):
        producer.produce(topic_name, b"r%d" % i)
    assert producer.flush(30) == 0
    group = f"{topic_name}-group"

    def consume(expect_error: int | None) -> list[bytes] | str:
        """The records bob's group consumer gets, or "refused" once ``expect_error`` comes."""
        consumer = Consumer({"bootstrap.servers": acl_broker.bootstrap, "group.id": group,
                             "auto.offset.reset": "earliest", **confluent("bob")})
        consumer.subscribe([topic_name])
        got: list[bytes] = []
        try:
            for _ in range(60):
                msg = consumer.poll(0.5)
                if msg is None:
                    if len(got) == 10:
                        break
                    continue
                if msg.error():
                    if expect_error is not None and msg.error().code() == expect_error:
                        return "refused"
                    continue
                got.append(msg.value())
            consumer.commit(asynchronous=False)
            return got
        finally:
            consumer.close()

    grant(acl_broker, allow("User:bob", ResourceType.TOPIC, topic_name, AclOperation.READ))
    assert consume(KafkaError.GROUP_AUTHORIZATION_FAILED) == "refused"
    grant(acl_broker, allow("User:bob", ResourceType.GROUP, topic_name, AclOperation.READ,
                            ResourcePatternType.PREFIXED))
    assert sorted(consume(None)) == sorted(b"r%d" % i for i in range(10))
    client = admin(acl_broker)
    offsets = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    committed = offsets[group].result(30).topic_partitions
    assert [tp.offset for tp in committed] == [10]
    # Removed through librdkafka's admin API: the very next join is refused again.
    deleted = client.delete_acls([AclBindingFilter(ResourceType.GROUP, topic_name, ResourcePatternType.PREFIXED,
                                                   "User:bob", None, AclOperation.ANY, AclPermissionType.ANY)])
    assert [(b.name, b.operation) for f in deleted.values() for b in f.result(30)] == [(topic_name,
                                                                                       AclOperation.READ)]
    assert consume(KafkaError.GROUP_AUTHORIZATION_FAILED) == "refused"


def test_transactions_need_write_on_the_transactional_id(acl_broker, topic_name):
    create_topic(acl_broker, topic_name)
    txn_id = f"{topic_name}-txn"
    settings = {"bootstrap.servers": acl_broker.bootstrap, "transactional.id": txn_id, **confluent("alice")}
    refused = Producer(settings)
    with pytest.raises(KafkaException) as info:
        refused.init_transactions(20)
    assert info.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    grant(acl_broker, allow("User:alice", ResourceType.TRANSACTIONAL_ID, txn_id, AclOperation.WRITE),
          allow("User:alice", ResourceType.TOPIC, topic_name, AclOperation.WRITE))
    producer = Producer(settings)
    producer.init_transactions(20)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic_name, b"t%d" % i)
    producer.commit_transaction(30)
    reader = Consumer({"bootstrap.servers": acl_broker.bootstrap, "group.id": f"{txn_id}-reader",
                       "isolation.level": "read_committed", "auto.offset.reset": "earliest", **confluent("admin")})
    reader.subscribe([topic_name])
    got = []
    for _ in range(40):
        msg = reader.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value())
        if len(got) == 5:
            break
    reader.close()
    assert got == [b"t%d" % i for i in range(5)]


def test_idempotence_needs_write_somewhere_and_aiokafka_is_refused_elsewhere(acl_broker, topic_name):
    create_topic(acl_broker, topic_name)

    async def main():
        refused = AIOKafkaProducer(bootstrap_servers=acl_broker.bootstrap, security_protocol="SASL_PLAINTEXT",
                                   sasl_mechanism="PLAIN", sasl_plain_username="bob",
                                   sasl_plain_password=USERS["bob"], request_timeout_ms=5000)
        await refused.start()
        try:
            with pytest.raises(AioTopicAuthorizationFailed):
                await refused.send_and_wait(topic_name, b"no")
        finally:
            await refused.stop()
        conn = await raw(acl_broker, "bob")
        try:   # InitProducerId without a transactional id: IdempotentWrite on the cluster or Write on a topic
            answer = await conn.request(22, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
            before = answer.error_code
        finally:
            await conn.close()
        grant(acl_broker, allow("User:bob", ResourceType.TOPIC, "bob-", AclOperation.WRITE,
                                ResourcePatternType.PREFIXED))
        conn = await raw(acl_broker, "bob")
        try:
            answer = await conn.request(22, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
        finally:
            await conn.close()
        return before, answer.error_code

    assert asyncio.run(main()) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, 0)


def test_metadata_hides_topics_the_principal_may_not_describe(acl_broker, topic_name):
    create_topic(acl_broker, f"{topic_name}-seen")
    create_topic(acl_broker, f"{topic_name}-hidden")
    grant(acl_broker, allow("User:alice", ResourceType.TOPIC, f"{topic_name}-seen", AclOperation.READ))
    listed = admin(acl_broker, "alice").list_topics(timeout=10).topics
    assert f"{topic_name}-seen" in listed and f"{topic_name}-hidden" not in listed
    asked = admin(acl_broker, "alice").list_topics(f"{topic_name}-hidden", timeout=10).topics
    assert asked[f"{topic_name}-hidden"].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert f"{topic_name}-hidden" in admin(acl_broker).list_topics(timeout=10).topics   # the super user sees all


def test_admin_and_acl_apis_need_their_cluster_and_topic_rights(acl_broker, topic_name):
    bob = admin(acl_broker, "bob")
    with pytest.raises(KafkaException) as info:
        bob.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as info:
        list(bob.create_acls([allow("User:bob", ResourceType.TOPIC, "*", AclOperation.ALL)]).values())[0].result(30)
    assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # (librdkafka drops DescribeAcls' top-level error and reports no ACLs: kafka-python raises it)
    with pytest.raises(ClusterAuthorizationFailedError):
        describe_everything(acl_broker.bootstrap, kafka_python("bob"))
    grant(acl_broker, allow("User:bob", ResourceType.TOPIC, topic_name, AclOperation.CREATE))
    bob.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    with pytest.raises(KafkaException) as info:
        bob.delete_topics([topic_name])[topic_name].result(30)
    assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # An invalid binding is refused alone, with Kafka's reason.
    super_user = admin(acl_broker)
    futures = super_user.create_acls([AclBinding(ResourceType.BROKER, "other", ResourcePatternType.LITERAL,
                                                        "User:bob", "*", AclOperation.ALTER,
                                                        AclPermissionType.ALLOW)])
    with pytest.raises(KafkaException, match="kafka-cluster"):
        list(futures.values())[0].result(30)


def test_controller_and_replica_apis_refuse_a_user_who_is_not_a_super_user(acl_broker, topic_name):
    create_topic(acl_broker, topic_name)

    async def main():
        conn = await raw(acl_broker, "alice")
        try:
            answers = {
                "LeaderAndIsr": await conn.request(LEADER_AND_ISR, 5, {"controller_id": 9, "controller_epoch": 99,
                                                                        "broker_epoch": -1, "type": 0,
                                                                        "topic_states": [], "live_leaders": []}),
                "StopReplica": await conn.request(STOP_REPLICA, 3, {"controller_id": 9, "controller_epoch": 99,
                                                                     "broker_epoch": -1, "delete_partitions": True,
                                                                     "topic_states": []}),
                "UpdateMetadata": await conn.request(UPDATE_METADATA, 7, {"controller_id": 9, "controller_epoch": 99,
                                                                          "broker_epoch": -1, "topic_states": [],
                                                                          "live_brokers": []}),
                "ControlledShutdown": await conn.request(CONTROLLED_SHUTDOWN, 3, {"broker_id": 0,
                                                                                  "broker_epoch": -1}),
                "AllocateProducerIds": await conn.request(ALLOCATE_PRODUCER_IDS, 0, {"broker_id": 0,
                                                                                     "broker_epoch": -1}),
            }
            markers = await conn.request(WRITE_TXN_MARKERS, 1, {"markers": [
                {"producer_id": 1, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
                 "topics": [{"name": topic_name, "partition_indexes": [0]}]}]})
            follower = await conn.request(FETCH, 12, {"replica_id": 5, "max_wait_ms": 0, "min_bytes": 1,
                                                      "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
                                                      "session_epoch": -1, "topics": [
                                                          {"topic": topic_name, "partitions": [
                                                              {"partition": 0, "fetch_offset": 0,
                                                               "partition_max_bytes": 1 << 20}]}],
                                                      "forgotten_topics_data": [], "rack_id": ""})
            still = await conn.request(METADATA, 9, {"topics": None, "allow_auto_topic_creation": False,
                                                     "include_topic_authorized_operations": False})
        finally:
            await conn.close()
        return answers, markers, follower, still

    answers, markers, follower, still = asyncio.run(main())
    assert {name: a.error_code for name, a in answers.items()} == dict.fromkeys(answers,
                                                                               ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    assert markers.markers[0].topics[0].partitions[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert follower.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert still.brokers   # the connection and the broker go on serving
    assert admin(acl_broker).list_topics(topic_name, timeout=10).topics[topic_name].error is None


def test_acls_survive_a_restart_and_a_kill_9_and_kbroker_acls_manages_them(tmp_path, topic_name):
    broker = BrokerProcess(str(tmp_path / "data"), acl_settings())
    broker.start()
    try:
        config = tmp_path / "admin.properties"
        config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                          f'sasl.jaas.config={PLAIN_MODULE} username="admin" password="admin-secret";\n')

        def kbroker(*args) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "kbroker.broker.cli", "acls", *args, "--bootstrap-server",
                                   broker.bootstrap, "--command-config", str(config)],
                                  cwd=ROOT, capture_output=True, text=True, timeout=60)

        added = kbroker("add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe",
                        "--topic", topic_name, "--resource-pattern-type", "prefixed")
        assert added.returncode == 0, added.stderr
        broker.stop()
        broker.start()
        listed = kbroker("list", "--topic", topic_name, "--resource-pattern-type", "prefixed")
        assert listed.returncode == 0, listed.stderr
        assert "User:alice" in listed.stdout and "READ" in listed.stdout and "DESCRIBE" in listed.stdout
        removed = kbroker("remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic_name,
                          "--resource-pattern-type", "prefixed")
        assert removed.returncode == 0, removed.stderr
        left = kbroker("list")
        assert "READ" not in left.stdout and "DESCRIBE" in left.stdout
        # (after a crash the changes since the clean stop come back from the journal, one resource's at a time)
        broker.kill()
        broker.start()
        after = kbroker("list")
        assert after.returncode == 0, after.stderr
        assert "READ" not in after.stdout and "DESCRIBE" in after.stdout and "User:alice" in after.stdout
    finally:
        assert broker.stop() == 0


def test_acl_apis_answer_security_disabled_without_an_authorizer(broker):
    with pytest.raises(SecurityDisabledError):
        describe_everything(broker.bootstrap, {})
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = client.create_acls([allow("User:bob", ResourceType.TOPIC, "t", AclOperation.READ)])
    with pytest.raises(KafkaException) as info:
        list(futures.values())[0].result(30)
    assert info.value.args[0].code() == KafkaError.SECURITY_DISABLED
