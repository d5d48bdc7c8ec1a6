"""SSL listeners with Kafka's PEM settings, driven by kafka-python, confluent-kafka and aiokafka: encryption
alone, mutual TLS with the certificate's holder as the principal, refusals of everything that does not belong
(no certificate, a stranger's, an expired one, plaintext on the TLS port, TLS on the plaintext port), and a
cluster whose brokers replicate to each other over TLS."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import struct
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kbroker.broker.cluster.zk_client import KafkaZkClient
from tests.brokerproc import BrokerProcess
from tests.cluster import Cluster, batches, wait_until
from tests.tls import Pki

pytestmark = pytest.mark.timeout(240)


def tls_broker(tmp_path, pki: Pki, **settings) -> BrokerProcess:
    return BrokerProcess(str(tmp_path / "data"), {
        "listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.broker,
        **settings}).start()


def kafka_python_ssl(pki: Pki, certfile: str | None = None, keyfile: str | None = None) -> dict:
    return {"security_protocol": "SSL", "ssl_cafile": pki.ca, "ssl_certfile": certfile, "ssl_keyfile": keyfile,
            "ssl_check_hostname": True}


def confluent_ssl(pki: Pki, cert: str | None = None, key: str | None = None) -> dict:
    settings = {"security.protocol": "SSL", "ssl.ca.location": pki.ca}
    if cert:
        settings.update({"ssl.certificate.location": cert, "ssl.key.location": key})
    return settings


def round_trip_kafka_python(bootstrap: str, topic: str, **ssl_settings) -> list[bytes]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **ssl_settings)
    for i in range(10):
        producer.send(topic, b"kp-%d" % i, partition=0)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000, **ssl_settings)
    consumer.assign([TopicPartition(topic, 0)])
    values = [r.value for r in consumer]
    consumer.close()
    return values


def produce_confluent(bootstrap: str, topic: str, settings: dict, values: list[bytes]) -> None:
    failed = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **settings})
    for v in values:
        producer.produce(topic, v, on_delivery=lambda err, _m: err and failed.append(err))
    assert producer.flush(60) == 0 and not failed, failed


def consume_confluent(bootstrap: str, topic: str, settings: dict, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         **settings})
    consumer.subscribe([topic])
    values, deadline = [], time.monotonic() + 30
    while len(values) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            values.append(msg.value())
    consumer.close()
    return values


def round_trip_confluent(bootstrap: str, topic: str, settings: dict) -> list[bytes]:
    produce_confluent(bootstrap, topic, settings, [b"ck-%d" % i for i in range(10)])
    return consume_confluent(bootstrap, topic, settings, 10)


async def round_trip_aiokafka(broker: BrokerProcess, topic: str, context: ssl.SSLContext) -> list[bytes]:
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, security_protocol="SSL", ssl_context=context)
    await producer.start()
    try:
        for i in range(10):
            await producer.send_and_wait(topic, b"ak-%d" % i, partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, security_protocol="SSL",
                                ssl_context=context, auto_offset_reset="earliest", group_id=f"g-{topic}")
    await consumer.start()
    values = []
    try:
        while len(values) < 10:
            batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
            values += [r.value for records in batch.values() for r in records]
    finally:
        await consumer.stop()
    return values


def aiokafka_context(pki: Pki, cert: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=pki.ca)
    if cert:
        context.load_cert_chain(cert)
    return context


def test_an_ssl_listener_serves_every_client_encrypted(tmp_path, pki, topic_name):
    broker = tls_broker(tmp_path, pki)
    try:
        assert round_trip_kafka_python(broker.bootstrap, f"{topic_name}-kp", **kafka_python_ssl(pki)) == \
            [b"kp-%d" % i for i in range(10)]
        assert round_trip_confluent(broker.bootstrap, f"{topic_name}-ck", confluent_ssl(pki)) == \
            [b"ck-%d" % i for i in range(10)]
        assert asyncio.run(round_trip_aiokafka(broker, f"{topic_name}-ak", aiokafka_context(pki))) == \
            [b"ak-%d" % i for i in range(10)]
    finally:
        assert broker.stop() == 0


def test_mutual_tls_lets_in_only_trusted_current_certificates_and_names_their_holder(tmp_path, pki, topic_name,
                                                                                     monkeypatch):
    monkeypatch.setenv("KBROKER_TEST_LOG_LEVEL", "DEBUG")   # the principal is logged with each connection's requests
    broker = tls_broker(tmp_path, pki, **{"ssl.client.auth": "required", "ssl.truststore.location": pki.ca,
                                          "ssl.truststore.type": "PEM"})
    try:
        good = confluent_ssl(pki, pki.client_cert, pki.client_key)
        assert round_trip_confluent(broker.bootstrap, topic_name, good) == [b"ck-%d" % i for i in range(10)]
        for cert in (None, pki.stranger, pki.expired):
            context = aiokafka_context(pki, cert)
            with pytest.raises(Exception):
                asyncio.run(round_trip_aiokafka(broker, f"{topic_name}-refused", context))
        # The good client is served as before, and kafka-python with a certificate file pair too.
        assert asyncio.run(round_trip_aiokafka(broker, f"{topic_name}-ak", aiokafka_context(pki, pki.client))) == \
            [b"ak-%d" % i for i in range(10)]
        assert round_trip_kafka_python(broker.bootstrap, f"{topic_name}-kp", **kafka_python_ssl(
            pki, pki.client_cert, pki.client_key)) == [b"kp-%d" % i for i in range(10)]
    finally:
        assert broker.stop() == 0
    log = open(broker.log_path, encoding="utf-8").read()
    assert "principal='User:CN=alice,OU=eng,O=acme,C=US'" in log
    assert "Traceback" not in log


def test_principal_mapping_rules_rewrite_the_certificate_name(tmp_path, pki, topic_name, monkeypatch):
    monkeypatch.setenv("KBROKER_TEST_LOG_LEVEL", "DEBUG")
    broker = tls_broker(tmp_path, pki, **{"ssl.client.auth": "required", "ssl.truststore.location": pki.ca,
                                          "ssl.principal.mapping.rules": "RULE:^CN=([a-z]+),OU=eng,.*$/$1@ENG/L,"
                                                                         "DEFAULT"})
    try:
        assert round_trip_confluent(broker.bootstrap, topic_name, confluent_ssl(pki, pki.client_cert, pki.client_key)) == \
            [b"ck-%d" % i for i in range(10)]
    finally:
        assert broker.stop() == 0
    assert "principal=User:alice@eng" in open(broker.log_path, encoding="utf-8").read()


def _api_versions_frame() -> bytes:
    body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    return struct.pack(">i", len(body)) + body


def _closed_without_answer(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        data = sock.recv(4096)
    except (ConnectionResetError, ssl.SSLError):
        return True
    return data == b"" or not data.startswith(b"\x00\x00")   # a TLS alert is not a Kafka response


def test_plaintext_on_the_tls_port_and_tls_on_the_plaintext_port_are_refused(tmp_path, pki, topic_name):
    broker = BrokerProcess(str(tmp_path / "data"), {
        "listeners": "SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0", "ssl.keystore.location": pki.broker}).start()
    try:
        plain_port = None
        for line in open(broker.log_path, encoding="utf-8"):
            if "broker_started" in line and "PLAINTEXT" in line:
                plain_port = int(line.split("'PLAINTEXT', '127.0.0.1', ")[1].split(")")[0])
        assert plain_port
        with socket.create_connection(("127.0.0.1", broker.port)) as sock:   # plaintext Kafka on the TLS port
            sock.sendall(_api_versions_frame())
            assert _closed_without_answer(sock)
        context = ssl.create_default_context(cafile=pki.ca)
        with socket.create_connection(("127.0.0.1", plain_port)) as raw:     # TLS on the plaintext port
            with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
                context.wrap_socket(raw, server_hostname="127.0.0.1").sendall(_api_versions_frame())
        # Both listeners still serve well-behaved clients.
        assert round_trip_confluent(broker.bootstrap, topic_name, confluent_ssl(pki)) == [b"ck-%d" % i for i in range(10)]
        assert round_trip_kafka_python(f"127.0.0.1:{plain_port}", topic_name)[:10] == \
            [b"ck-%d" % i for i in range(10)]
    finally:
        assert broker.stop() == 0


def test_brokers_replicate_to_each_other_over_mutual_tls(tmp_path, pki, topic_name):
    cluster = Cluster(str(tmp_path / "cluster"), overrides={
        "listeners": "SSL://127.0.0.1:0", "inter.broker.listener.name": "SSL",
        "ssl.keystore.location": pki.broker, "ssl.truststore.location": pki.ca, "ssl.client.auth": "required"})
    cluster.start()
    try:
        settings = confluent_ssl(pki, pki.client_cert, pki.client_key)
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **settings})
        admin.create_topics([NewTopic(topic_name, 1, 3, config={"min.insync.replicas": "2"})])[topic_name].result(30)
        values = [b"v-%d" % i for i in range(200)]
        produce_confluent(cluster.bootstrap, topic_name, settings, values)
        wait_until(lambda: len({tuple(batches(b.data_dir, topic_name, 0)) for b in cluster.brokers.values()}) == 1
                   and batches(cluster.brokers[1].data_dir, topic_name, 0), 30, 0.2, "replicas identical")
        assert consume_confluent(cluster.bootstrap, topic_name, settings, 200) == values
        isr = admin.list_topics(topic_name, timeout=10).topics[topic_name].partitions[0].isrs
        assert sorted(isr) == [1, 2, 3]
        # Each broker's registration names its listener's protocol, as Kafka's tools read it with zkCli.sh.
        zk = KafkaZkClient(cluster.zookeeper.connect + "/kbroker", 6000)
        zk.start()
        try:
            registrations = [json.loads(zk.zk.get(zk.path(f"/brokers/ids/{b}"))[0]) for b in cluster.brokers]
        finally:
            zk.stop()
        assert [r["listener_security_protocol_map"] for r in registrations] == [{"SSL": "SSL"}] * 3
    finally:
        assert all(code == 0 for code in cluster.stop().values())

