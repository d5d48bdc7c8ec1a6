"""SASL listeners driven by kafka-python, confluent-kafka and aiokafka: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512
over SASL_PLAINTEXT and SASL_SSL; SCRAM credentials managed through the admin APIs and ``kbroker users``;
refusals of everything that does not belong (wrong passwords, unknown users and mechanisms, requests before
authentication, garbage in the exchange) while good clients are served; re-authentication (KIP-368); and a
cluster whose brokers authenticate to each other with SCRAM over SASL_SSL."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import subprocess
import sys
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kbroker.client.connection import ConnectionClosed, KafkaConnection
from kbroker.client.sasl import SaslAuthenticationError, SaslCredentials
from tests.brokerproc import ROOT, BrokerProcess
from tests.cluster import Cluster, batches, wait_until
from tests.tls import Pki

pytestmark = pytest.mark.timeout(240)

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule required"
ADMIN = ("admin", "admin-secret")
ALICE = ("alice", "alice-secret")   # a SCRAM user, made through the admin API
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3


def sasl_settings(**extra) -> dict[str, str]:
    jaas = f'{PLAIN_MODULE} username="admin" password="admin-secret" user_admin="admin-secret" user_bob="bob-secret";'
    return {"sasl.enabled.mechanisms": ",".join(MECHANISMS), "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas, **extra}


def listener_port(broker: BrokerProcess, name: str) -> int:
    """The port of listener ``name`` at the broker's latest start."""
    ports = [int(line.split(f"'{name}', '127.0.0.1', ")[1].split(")")[0])
             for line in open(broker.log_path, encoding="utf-8")
             if "broker_started" in line and f"'{name}', '127.0.0.1', " in line]
    assert ports, f"no {name} listener in the log"
    return ports[-1]


def start_sasl_broker(broker: BrokerProcess) -> BrokerProcess:
    broker.start()
    broker.ports = {"SASL_PLAINTEXT": broker.port, "SASL_SSL": listener_port(broker, "SASL_SSL")}
    return broker


def user_for(mechanism: str) -> tuple[str, str]:
    return ADMIN if mechanism == "PLAIN" else ALICE


def confluent_security(protocol: str, mechanism: str, pki: Pki, user=None) -> dict:
    name, password = user or user_for(mechanism)
    settings = {"security.protocol": protocol, "sasl.mechanism": mechanism, "sasl.username": name,
                "sasl.password": password}
    if protocol == "SASL_SSL":
        settings["ssl.ca.location"] = pki.ca
    return settings


def kafka_python_security(protocol: str, mechanism: str, pki: Pki, user=None) -> dict:
    name, password = user or user_for(mechanism)
    settings = {"security_protocol": protocol, "sasl_mechanism": mechanism, "sasl_plain_username": name,
                "sasl_plain_password": password}
    if protocol == "SASL_SSL":
        settings["ssl_cafile"] = pki.ca
    return settings


def aiokafka_security(protocol: str, mechanism: str, pki: Pki) -> dict:
    settings = kafka_python_security(protocol, mechanism, pki)   # the same names, but TLS from a context
    if settings.pop("ssl_cafile", None):
        settings["ssl_context"] = ssl.create_default_context(cafile=pki.ca)
    return settings


def add_scram_user(bootstrap: str, admin_settings: dict, user: str, password: str,
                   mechanisms=(ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512), iterations=4096) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **admin_settings})
    alterations = [UserScramCredentialUpsertion(user, ScramCredentialInfo(m, iterations), password.encode())
                   for m in mechanisms]
    for future in admin.alter_user_scram_credentials(alterations).values():
        future.result(30)


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory, pki):
    """One broker with a SASL_PLAINTEXT and a SASL_SSL listener offering all three mechanisms; alice has SCRAM
    credentials for both SCRAM mechanisms."""
    root = tmp_path_factory.mktemp("sasl")
    broker = start_sasl_broker(BrokerProcess(str(root / "data"), {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0", "ssl.keystore.location": pki.broker,
        **sasl_settings()}))
    add_scram_user(broker.bootstrap, confluent_security("SASL_PLAINTEXT", "PLAIN", pki), *ALICE)
    yield broker
    assert broker.stop() == 0
    assert "Traceback" not in open(broker.log_path, encoding="utf-8").read()


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_every_client_authenticates_with_every_mechanism(sasl_broker, pki, topic_name, protocol, mechanism):
    bootstrap = f"127.0.0.1:{sasl_broker.ports[protocol]}"
    topic = f"{topic_name}-{protocol}-{mechanism}".lower()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **kafka_python_security(protocol, mechanism, pki))
    for i in range(5):
        producer.send(topic, b"kp-%d" % i, partition=0)
    producer.flush(30)
    producer.close()

    confluent = Producer({"bootstrap.servers": bootstrap, "acks": "all", **confluent_security(protocol, mechanism, pki)})
    for i in range(5):
        confluent.produce(topic, b"ck-%d" % i, partition=0)
    assert confluent.flush(30) == 0

    async def aiokafka_round_trip() -> list[bytes]:
        security = aiokafka_security(protocol, mechanism, pki)
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, **security)
        await p.start()
        try:
            for i in range(5):
                await p.send_and_wait(topic, b"ak-%d" % i, partition=0)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **security)
        await c.start()
        try:
            c.assign([AioTopicPartition(topic, 0)])
            values: list[bytes] = []
            while len(values) < 15:
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 30)
                values += [r.value for records in batch.values() for r in records]
            return values
        finally:
            await c.stop()

    expected = [b"%s-%d" % (p, i) for p in (b"kp", b"ck", b"ak") for i in range(5)]
    assert asyncio.run(aiokafka_round_trip()) == expected
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             **kafka_python_security(protocol, mechanism, pki))
    consumer.assign([TopicPartition(topic, 0)])
    values, deadline = [], time.monotonic() + 30
    while len(values) < 15 and time.monotonic() < deadline:
        values += [r.value for records in consumer.poll(500).values() for r in records]
    consumer.close()
    assert values == expected


def test_a_scram_user_consumes_in_a_group_and_writes_a_transaction(sasl_broker, pki, topic_name):
    bootstrap = f"127.0.0.1:{sasl_broker.ports['SASL_SSL']}"
    security = confluent_security("SASL_SSL", "SCRAM-SHA-512", pki)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic_name}", **security})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic_name, b"tx-%d" % i)
    producer.commit_transaction(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic_name}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed", **security})
    consumer.subscribe([topic_name])
    values, deadline = [], time.monotonic() + 30
    while len(values) < 10 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            values.append(msg.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert values == [b"tx-%d" % i for i in range(10)]


async def _open(port: int) -> KafkaConnection:
    return await KafkaConnection.open("127.0.0.1", port)


async def _refused(port: int, steps) -> tuple[list, bool]:
    """Run ``steps(conn)`` (requests that should fail authentication); return the responses it collected and
    whether the broker then closed the connection."""
    conn = await _open(port)
    responses: list = []
    try:
        await steps(conn, responses)
    except ConnectionClosed:
        responses.append("closed")
    closed = await conn.wait_closed(10)
    await conn.close()
    return responses, closed


def test_bad_authentication_is_refused_with_kafkas_errors_and_good_clients_are_served(sasl_broker, pki, topic_name):
    port = sasl_broker.ports["SASL_PLAINTEXT"]

    async def handshake(conn, mechanism, version=1):
        return await conn.request_unchecked(SASL_HANDSHAKE, version, {"mechanism": mechanism})

    async def authenticate(conn, token: bytes):
        return await conn.request_unchecked(SASL_AUTHENTICATE, 2, {"auth_bytes": token})

    async def unknown_mechanism(conn, out):
        out.append(await handshake(conn, "GSSAPI"))

    async def wrong_password(conn, out):
        out.append((await handshake(conn, "PLAIN")).error_code)
        out.append(await authenticate(conn, b"\0admin\0not-the-password"))

    async def unknown_scram_user(conn, out):
        out.append((await handshake(conn, "SCRAM-SHA-256")).error_code)
        out.append(await authenticate(conn, b"n,,n=mallory,r=abcdefgh"))

    async def garbage_scram(conn, out):
        out.append((await handshake(conn, "SCRAM-SHA-512")).error_code)
        out.append(await authenticate(conn, b"\xff\xfe garbage, no attributes"))

    async def authenticate_first(conn, out):
        out.append(await authenticate(conn, b"\0admin\0admin-secret"))

    async def metadata_first(conn, out):
        out.append(await conn.request_unchecked(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False}))

    async def oversized_before_authentication(conn, out):
        await conn.send_raw(struct.pack(">i", 600_000) + b"\0" * 600_000)
        out.append(await conn.request_unchecked(18, 0, {}))

    async def run_all():
        return {name: await _refused(port, steps) for name, steps in [
            ("unknown_mechanism", unknown_mechanism), ("wrong_password", wrong_password),
            ("unknown_scram_user", unknown_scram_user), ("garbage_scram", garbage_scram),
            ("authenticate_first", authenticate_first), ("metadata_first", metadata_first),
            ("oversized", oversized_before_authentication)]}

    results = asyncio.run(run_all())
    assert all(closed for _, closed in results.values()), results
    unknown = results["unknown_mechanism"][0][0]
    assert unknown.error_code == 33 and unknown.mechanisms == list(MECHANISMS)   # UNSUPPORTED_SASL_MECHANISM
    (ok, wrong), _ = results["wrong_password"]
    assert ok == 0 and wrong.error_code == 58 and wrong.error_message == \
        "Authentication failed: Invalid username or password"                      # SASL_AUTHENTICATION_FAILED
    assert results["unknown_scram_user"][0][1].error_code == 58
    assert results["garbage_scram"][0][1].error_code == 58
    for name in ("authenticate_first", "metadata_first", "oversized"):   # closed without an answer
        assert results[name][0] == ["closed"], name
    # A good client is served as before, and our own client's exchange too.
    producer = KafkaProducer(bootstrap_servers=sasl_broker.bootstrap,
                             **kafka_python_security("SASL_PLAINTEXT", "SCRAM-SHA-256", pki))
    producer.send(topic_name, b"still-served").get(30)
    producer.close()

    async def own_client():
        conn = await KafkaConnection.open("127.0.0.1", port, sasl=SaslCredentials("SCRAM-SHA-512", *ALICE))
        md = await conn.request(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
        await conn.close()
        with pytest.raises(SaslAuthenticationError):
            await KafkaConnection.open("127.0.0.1", port, sasl=SaslCredentials("SCRAM-SHA-512", "alice", "wrong"))
        return md
    assert topic_name in {t.name for t in asyncio.run(own_client()).topics}
    log = open(sasl_broker.log_path, encoding="utf-8").read()
    assert "authentication_failed" in log and "user=mallory" in log and "peer=127.0.0.1:" in log
    assert "unexpected_request_before_authentication" in log


def _frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    payload = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test" + body
    return struct.pack(">i", len(payload)) + payload


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data
    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def test_a_v0_handshake_exchanges_bare_tokens_as_old_clients_do(sasl_broker):
    mechanism = struct.pack(">h", 5) + b"PLAIN"
    with socket.create_connection(("127.0.0.1", sasl_broker.port), timeout=10) as sock:
        sock.sendall(_frame(SASL_HANDSHAKE, 0, 1, mechanism))
        assert struct.unpack_from(">ih", _read_frame(sock)) == (1, 0)
        token = b"\0admin\0admin-secret"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert _read_frame(sock) == b""                           # PLAIN's empty answer, bare
        sock.sendall(_frame(18, 0, 2, b""))                        # authenticated: ApiVersions is served
        assert struct.unpack_from(">ih", _read_frame(sock)) == (2, 0)
    with socket.create_connection(("127.0.0.1", sasl_broker.port), timeout=10) as sock:
        sock.sendall(_frame(SASL_HANDSHAKE, 0, 1, mechanism))
        _read_frame(sock)
        token = b"\0admin\0wrong"
        sock.sendall(struct.pack(">i", len(token)) + token)
        with pytest.raises(ConnectionError):                       # no error to report in v0: closed
            _read_frame(sock)


def test_scram_credentials_are_managed_through_the_admin_api_and_kbroker_users(sasl_broker, pki, topic_name,
                                                                               tmp_path):
    admin_settings = confluent_security("SASL_PLAINTEXT", "PLAIN", pki)
    admin = AdminClient({"bootstrap.servers": sasl_broker.bootstrap, **admin_settings})
    described = admin.describe_user_scram_credentials(["alice"])["alice"].result(30)
    assert sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos) == \
        [(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 4096)]
    too_few = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw")
    with pytest.raises(KafkaException, match="iterations"):
        admin.alter_user_scram_credentials([too_few])["carol"].result(30)
    missing = UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_256)
    with pytest.raises(KafkaException, match="does not exist"):
        admin.alter_user_scram_credentials([missing])["nobody"].result(30)

    properties = tmp_path / "admin.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                          f"sasl.jaas.config={PLAIN_MODULE} \\\n    username=\"admin\" password=\"admin-secret\";\n")

    def kbroker(*args: str) -> str:
        result = subprocess.run([sys.executable, "-m", "kbroker.broker.cli", "users", *args, "--bootstrap-server",
                                 sasl_broker.bootstrap, "--command-config", str(properties)],
                                cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr + result.stdout
        return result.stdout

    assert "credentials set" in kbroker("add", "--user", "dave", "--password", "dave-secret",
                                        "--mechanism", "SCRAM-SHA-512", "--iterations", "8192")
    assert "dave: SCRAM-SHA-512 (iterations=8192)" in kbroker("list")

    def authenticates(mechanism: str, user: tuple[str, str]) -> bool:
        async def attempt() -> bool:
            try:
                conn = await KafkaConnection.open("127.0.0.1", sasl_broker.port, sasl=SaslCredentials(mechanism, *user))
            except SaslAuthenticationError:
                return False
            await conn.close()
            return True
        return asyncio.run(attempt())

    assert authenticates("SCRAM-SHA-512", ("dave", "dave-secret"))
    assert not authenticates("SCRAM-SHA-256", ("dave", "dave-secret"))   # only the mechanism it was given
    # Credentials survive a restart (kept in the local store, never the password).
    assert sasl_broker.stop() == 0
    start_sasl_broker(sasl_broker)
    assert authenticates("SCRAM-SHA-512", ("dave", "dave-secret"))
    stored = open(sasl_broker.data_dir + "/kbroker-metadata.json", encoding="utf-8").read()
    assert "SCRAM-SHA-512" in stored and "dave-secret" not in stored
    assert "credentials deleted" in kbroker("delete", "--user", "dave")
    assert not authenticates("SCRAM-SHA-512", ("dave", "dave-secret"))


def test_sessions_expire_and_clients_re_authenticate(tmp_path, pki, topic_name):
    broker = BrokerProcess(str(tmp_path / "data"), {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                                    **sasl_settings(**{"connections.max.reauth.ms": "1500"})}).start()
    try:
        add_scram_user(broker.bootstrap, confluent_security("SASL_PLAINTEXT", "PLAIN", pki), *ALICE)
        # librdkafka and kafka-python re-authenticate on their open connections and never notice the expiry.
        producer = Producer({"bootstrap.servers": broker.bootstrap, **confluent_security(
            "SASL_PLAINTEXT", "SCRAM-SHA-256", pki)})
        kp = KafkaProducer(bootstrap_servers=broker.bootstrap, **kafka_python_security(
            "SASL_PLAINTEXT", "SCRAM-SHA-512", pki))
        errors = []
        for i in range(16):
            producer.produce(topic_name, b"r-%d" % i, on_delivery=lambda err, _m: err and errors.append(err))
            kp.send(topic_name, b"k-%d" % i).get(30)
            producer.poll(0)
            time.sleep(0.3)
        assert producer.flush(30) == 0 and not errors
        kp.close()

        async def own_client_and_a_lapsed_one():
            own = await KafkaConnection.open("127.0.0.1", broker.port, sasl=SaslCredentials("PLAIN", *ADMIN))
            lapsed = await KafkaConnection.open("127.0.0.1", broker.port)
            await lapsed.request_unchecked(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
            answer = await lapsed.request_unchecked(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0admin\0admin-secret"})
            await asyncio.sleep(2)
            body = {"topics": None, "allow_auto_topic_creation": False}
            own_md = await own.request(METADATA, 12, body)       # re-authenticates first
            with pytest.raises(ConnectionClosed):
                await lapsed.request(METADATA, 12, body)          # expired and never re-authenticated: closed
            # Re-authenticating as someone else is refused.
            other = await KafkaConnection.open("127.0.0.1", broker.port, sasl=SaslCredentials("PLAIN", *ADMIN))
            await other.request_unchecked(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
            switched = await other.request_unchecked(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0bob\0bob-secret"})
            other_closed = await other.wait_closed(10)
            for c in (own, lapsed, other):
                await c.close()
            return answer.session_lifetime_ms, own_md, switched, other_closed

        lifetime, own_md, switched, other_closed = asyncio.run(own_client_and_a_lapsed_one())
        assert lifetime == 1500
        assert topic_name in {t.name for t in own_md.topics}
        assert switched.error_code == 58 and "Cannot change principals" in switched.error_message and other_closed
    finally:
        assert broker.stop() == 0
    log = open(broker.log_path, encoding="utf-8").read()
    assert "sasl_session_expired" in log and "Traceback" not in log
    # Each producer's connection authenticated more than once: it was re-authenticated, not reopened.
    peers = [line.split("peer=")[1].split()[0] for line in log.splitlines() if "sasl_authenticated" in line]
    assert max(peers.count(p) for p in set(peers)) >= 3


def test_brokers_replicate_to_each_other_over_sasl_ssl_with_scram(tmp_path, pki, topic_name):
    scram_module = "org.apache.kafka.common.security.scram.ScramLoginModule required"
    cluster = Cluster(str(tmp_path / "cluster"), overrides={
        "listeners": "SASL_SSL://127.0.0.1:0", "inter.broker.listener.name": "SASL_SSL",
        "ssl.keystore.location": pki.broker, "ssl.truststore.location": pki.ca,
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            f'{scram_module} username="broker" password="broker-secret";',
        # ACLs on: the brokers (ClusterAction on each other) and alice are super users, carol is not
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:broker;User:alice"})

    def users_in_zookeeper(connect: str) -> None:   # as kafka-configs --zookeeper does, before any broker runs
        for user, password in (("broker", "broker-secret"), ALICE):
            subprocess.run([sys.executable, "-m", "kbroker.broker.cli", "users", "add", "--user", user, "--password",
                            password, "--mechanism", "SCRAM-SHA-512", "--zookeeper", connect],
                           cwd=ROOT, check=True, capture_output=True, timeout=60)

    cluster.start(before_brokers=users_in_zookeeper)
    try:
        security = confluent_security("SASL_SSL", "SCRAM-SHA-512", pki)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **security})
        admin.create_topics([NewTopic(topic_name, 1, 3, config={"min.insync.replicas": "2"})])[topic_name].result(30)
        values = [b"v-%d" % i for i in range(200)]
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", **security})
        for v in values:
            producer.produce(topic_name, v)
        assert producer.flush(60) == 0
        wait_until(lambda: len({tuple(batches(b.data_dir, topic_name, 0)) for b in cluster.brokers.values()}) == 1
                   and batches(cluster.brokers[1].data_dir, topic_name, 0), 30, 0.2, "replicas identical")
        assert sorted(admin.list_topics(topic_name, timeout=10).topics[topic_name].partitions[0].isrs) == [1, 2, 3]
        # A user added through broker 1 authenticates at broker 3: the credentials go through ZooKeeper.
        one = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap, **security})
        upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                              b"carol-secret")
        one.alter_user_scram_credentials([upsert])["carol"].result(30)
        context = ssl.create_default_context(cafile=pki.ca)

        async def carol_at(port: int) -> bool:
            try:
                conn = await KafkaConnection.open("127.0.0.1", port, ssl=context,
                                                  sasl=SaslCredentials("SCRAM-SHA-512", "carol", "carol-secret"))
            except SaslAuthenticationError:
                return False
            await conn.close()
            return True
        wait_until(lambda: asyncio.run(carol_at(cluster.brokers[3].port)), 15, 0.2, "carol known at broker 3")

        async def carol_sees_topic(port: int) -> bool:
            conn = await KafkaConnection.open("127.0.0.1", port, ssl=context,
                                              sasl=SaslCredentials("SCRAM-SHA-512", "carol", "carol-secret"))
            try:
                found = await conn.request(METADATA, 9, {"topics": [{"name": topic_name}],
                                                         "allow_auto_topic_creation": False,
                                                         "include_topic_authorized_operations": False})
            finally:
                await conn.close()
            return found.topics[0].error_code == 0
        # An ACL made through broker 1 applies at broker 3: ACLs live in ZooKeeper, with change notifications.
        assert not asyncio.run(carol_sees_topic(cluster.brokers[3].port))
        read = AclBinding(ResourceType.TOPIC, topic_name, ResourcePatternType.LITERAL, "User:carol", "*",
                          AclOperation.READ, AclPermissionType.ALLOW)
        for future in one.create_acls([read]).values():
            future.result(30)
        wait_until(lambda: asyncio.run(carol_sees_topic(cluster.brokers[3].port)), 15, 0.2, "carol's ACL at broker 3")

        async def as_alice(port: int, api_key: int, body: dict):
            conn = await KafkaConnection.open("127.0.0.1", port, ssl=context,
                                              sasl=SaslCredentials("SCRAM-SHA-512", *ALICE))
            try:
                return await conn.request(api_key, 1, body)
            finally:
                await conn.close()
        # A quota set through broker 1 shares carol's /config/users znode with her credentials and reaches broker 3.
        quota = {"entries": [{"entity": [{"entity_type": "user", "entity_name": "carol"}],
                              "ops": [{"key": "producer_byte_rate", "value": 2048.0, "remove": False}]}],
                 "validate_only": False}
        assert asyncio.run(as_alice(cluster.brokers[1].port, 49, quota)).entries[0].error_code == 0
        carol_quota = {"components": [{"entity_type": "user", "match_type": 0, "match": "carol"}], "strict": True}
        wait_until(lambda: [v.value for e in asyncio.run(as_alice(cluster.brokers[3].port, 48, carol_quota)).entries
                            for v in e["values"]] == [2048.0], 15, 0.2, "carol's quota at broker 3")
        assert asyncio.run(carol_at(cluster.brokers[3].port))   # her credentials are still there
    finally:
        assert all(code == 0 for code in cluster.stop().values())
    for b in cluster.brokers.values():
        assert "Traceback" not in open(b.log_path, encoding="utf-8").read()
