"""Client telemetry (KIP-714) on a real broker: a client metrics subscription made with IncrementalAlterConfigs
has librdkafka push its own metrics, which /metrics then serves labelled by client id and instance id; the
subscription's configs are checked as Kafka checks them, kept across a restart, and listed; and every bad
GetTelemetrySubscriptions or PushTelemetry gets Kafka's error and changes nothing else."""

from __future__ import annotations

import gzip
import importlib.metadata

import pytest
from confluent_kafka import Producer
from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb

from kbroker.client.connection import KafkaConnection
from kbroker.protocol.errors import ErrorCode as E
from tests.brokerproc import BrokerProcess
from tests.cluster import wait_until
from tests.integration.test_metrics import metrics_port, scrape, value

pytestmark = pytest.mark.timeout(120)
INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CONFIGS, API_VERSIONS, LIST_CONFIG_RESOURCES = 44, 32, 18, 74
GET_SUBSCRIPTIONS, PUSH = 71, 72
CLIENT_METRICS = 16
ZERO = bytes(16)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = BrokerProcess(str(tmp_path_factory.mktemp("telemetry") / "data"), {"metrics.port": "0",
                                                                               "telemetry.max.bytes": "4096"}).start()
    yield proc
    assert proc.stop() == 0, proc.tail_log()


@pytest.fixture
async def conn(broker):
    connection = await KafkaConnection.open("127.0.0.1", broker.port, client_id="telemetry-wire")
    yield connection
    await connection.close()


async def subscribe(conn, name: str, **configs) -> tuple[int, str | None]:
    answer = await conn.request(INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": CLIENT_METRICS, "resource_name": name, "configs": [
            {"name": k.replace("_", "."), "config_operation": 0 if v is not None else 1, "value": v}
            for k, v in configs.items()]}], "validate_only": False})
    return answer.responses[0].error_code, answer.responses[0].error_message


async def get(conn, instance_id: bytes = ZERO):
    return await conn.request(GET_SUBSCRIPTIONS, 0, {"client_instance_id": instance_id})


async def push(conn, instance_id, subscription_id, metrics: bytes = b"", compression=0, terminating=False) -> int:
    answer = await conn.request(PUSH, 0, {"client_instance_id": instance_id, "subscription_id": subscription_id,
                                          "terminating": terminating, "compression_type": compression,
                                          "metrics": metrics})
    return answer.error_code


def otlp(name: str, value: float) -> bytes:
    metric = pb.Metric(name=name, gauge=pb.Gauge(data_points=[pb.NumberDataPoint(as_double=value)]))
    return pb.MetricsData(resource_metrics=[pb.ResourceMetrics(scope_metrics=[pb.ScopeMetrics(
        metrics=[metric])])]).SerializeToString()


def test_librdkafka_pushes_its_metrics_which_metrics_serves_by_client(broker, topic_name):
    import asyncio

    async def setup():
        conn = await KafkaConnection.open("127.0.0.1", broker.port)
        try:
            assert await subscribe(conn, "producers", metrics="org.apache.kafka.producer.", interval_ms="200",
                                   match="client_id=telemetry-prod.*") == (0, None)
        finally:
            await conn.close()
    asyncio.run(setup())
    port = metrics_port(broker)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "telemetry-producer"})
    try:
        for _ in range(20):
            producer.produce(topic_name, b"x")
        producer.flush(10)

        def pushed():
            producer.poll(0.05)
            samples = scrape(port)
            return [(name, dict(labels)) for (name, labels), _ in samples.items()
                    if dict(labels).get("client_id") == "telemetry-producer"]
        found = wait_until(pushed, message="the producer's metrics on /metrics")
        names = {name for name, _ in found}
        assert "org_apache_kafka_producer_node_request_latency_avg" in names
        assert all(name.startswith("org_apache_kafka_producer_") for name in names)
        labels = found[0][1]
        assert labels["client_software_name"] == "confluent-kafka-python" and len(labels["client_instance_id"]) == 22
        assert value(scrape(port), "kafka_server_clientmetrics_pushes_total") >= 1
    finally:
        producer.flush(5)


async def test_a_subscription_decides_what_a_matching_client_is_asked_for(conn, broker):
    assert await subscribe(conn, "wire", metrics="org.apache.kafka.consumer.,org.apache.kafka.producer.",
                           interval_ms="1000", match="client_id=telemetry-wire") == (0, None)
    first = await get(conn)
    assert first.error_code == 0 and first.client_instance_id != ZERO
    assert sorted(first.requested_metrics) == ["org.apache.kafka.consumer.", "org.apache.kafka.producer."]
    assert (first.push_interval_ms, first.telemetry_max_bytes, first.delta_temporality) == (1000, 4096, False)
    assert first.accepted_compression_types == [4, 3, 1, 2]
    # asked again before the interval: throttled, as Kafka does
    assert (await get(conn, first.client_instance_id)).error_code == E.THROTTLING_QUOTA_EXCEEDED
    # the subscription changes: the push under the old id is refused, the client asks and gets the new one
    assert await subscribe(conn, "wire", metrics="org.apache.kafka.consumer.") == (0, None)
    instance = first.client_instance_id
    assert await push(conn, instance, first.subscription_id, otlp("org.apache.kafka.consumer.x", 1)) == \
        E.UNKNOWN_SUBSCRIPTION_ID
    again = await get(conn, instance)
    assert again.error_code == 0 and again.subscription_id != first.subscription_id
    assert again.requested_metrics == ["org.apache.kafka.consumer."]
    # a client that matches no subscription is asked for nothing
    other = await KafkaConnection.open("127.0.0.1", broker.port, client_id="someone-else")
    try:
        assert (await get(other)).requested_metrics == []
    finally:
        await other.close()
    assert await subscribe(conn, "wire", metrics=None, interval_ms=None, match=None) == (0, None)


async def test_every_bad_push_gets_kafkas_error(conn, broker):
    assert await subscribe(conn, "bad-pushes", metrics="*", interval_ms="60000",
                           match="client_id=telemetry-wire") == (0, None)
    port = metrics_port(broker)
    sub = await get(conn)
    instance, sid = sub.client_instance_id, sub.subscription_id
    assert await push(conn, ZERO, sid) == E.INVALID_REQUEST
    assert await push(conn, instance, sid + 1) == E.UNKNOWN_SUBSCRIPTION_ID
    sub = await get(conn, instance)   # (asking again after an unknown subscription is allowed)
    assert await push(conn, instance, sid, compression=9) == E.UNSUPPORTED_COMPRESSION_TYPE
    sub = await get(conn, instance)
    assert await push(conn, instance, sid, b"x" * 5000) == E.TELEMETRY_TOO_LARGE
    sub = await get(conn, instance)
    assert sub.error_code == E.THROTTLING_QUOTA_EXCEEDED   # (too large is not a reason to ask again early)
    # the push in its interval was spent on the refused one; a new instance pushes garbage, then real metrics
    fresh = await get(conn)
    assert await push(conn, fresh.client_instance_id, fresh.subscription_id, b"\x0a\xff\xff") == E.INVALID_RECORD
    newest = await get(conn)
    gzipped = gzip.compress(otlp("wire.gauge", 42.0))
    assert await push(conn, newest.client_instance_id, newest.subscription_id, gzipped, compression=1) == 0
    assert await push(conn, newest.client_instance_id, newest.subscription_id, otlp("wire.gauge", 1)) == \
        E.THROTTLING_QUOTA_EXCEEDED   # a second push inside the interval
    assert value(scrape(port), "wire_gauge", client_id="telemetry-wire", client_instance_id=_id(newest),
                 client_software_name="", client_software_version="") == 42.0
    # the client's last push is accepted early; after it, nothing is
    assert await push(conn, newest.client_instance_id, newest.subscription_id, otlp("wire.gauge", 43.0),
                      terminating=True) == 0
    assert await push(conn, newest.client_instance_id, newest.subscription_id, otlp("wire.gauge", 44.0),
                      terminating=True) == E.INVALID_REQUEST
    assert await subscribe(conn, "bad-pushes", metrics=None, interval_ms=None, match=None) == (0, None)


async def test_kbrokers_own_client_names_itself_and_its_release(broker):
    """The inter-broker client's ApiVersions v3 names kbroker and the installed release, as Kafka's clients name
    theirs, so a subscription can match it; and the versions it learns decide what it sends."""
    release = importlib.metadata.version("kbroker")
    own = await KafkaConnection.open("127.0.0.1", broker.port, client_id="kbroker-peer", negotiate=True)
    try:
        assert own.usable(API_VERSIONS, 99) == own.peer_versions[API_VERSIONS][1] >= 4
        assert own.usable(PUSH, 0) == 0
        with pytest.raises(ConnectionError):
            own.usable(9999, 3)   # (an API the broker does not serve)
        assert await subscribe(own, "own", metrics="*", interval_ms="60000",
                               match=f"client_software_name=kbroker,client_software_version={release}") == (0, None)
        subscription = await get(own)
        assert subscription.requested_metrics == ["*"]
        assert await push(own, subscription.client_instance_id, subscription.subscription_id,
                          otlp("own.gauge", 7.0)) == 0
        assert value(scrape(metrics_port(broker)), "own_gauge", client_id="kbroker-peer",
                     client_instance_id=_id(subscription), client_software_name="kbroker",
                     client_software_version=release) == 7.0
        assert await subscribe(own, "own", metrics=None, interval_ms=None, match=None) == (0, None)
    finally:
        await own.close()


def _id(answer) -> str:
    from kbroker.protocol.types import uuid_to_str
    return uuid_to_str(bytes(answer.client_instance_id))


@pytest.mark.parametrize("configs, error", [
    ({"interval_ms": "99"}, E.INVALID_REQUEST),
    ({"interval_ms": "3600001"}, E.INVALID_REQUEST),
    ({"match": "client_id"}, E.INVALID_CONFIG),
    ({"match": "client_colour=red"}, E.INVALID_CONFIG),
    ({"match": "client_id=("}, E.INVALID_CONFIG),
    ({"metrics_whatever": "1"}, E.INVALID_REQUEST),
])
async def test_subscription_configs_are_checked_as_kafka_checks_them(conn, configs, error):
    assert (await subscribe(conn, "checked", **configs))[0] == error
    listed = await conn.request(LIST_CONFIG_RESOURCES, 0, {})
    assert "checked" not in {r.resource_name for r in listed.config_resources}


async def test_subscriptions_are_listed_described_and_kept_across_a_restart(tmp_path):
    broker = BrokerProcess(str(tmp_path / "data"), {"metrics.port": "0"}).start()
    try:
        conn = await KafkaConnection.open("127.0.0.1", broker.port)
        assert await subscribe(conn, "kept", metrics="org.apache.kafka.", interval_ms="30000") == (0, None)
        await conn.close()
        broker.stop()
        broker.start()
        conn = await KafkaConnection.open("127.0.0.1", broker.port)
        listed = await conn.request(LIST_CONFIG_RESOURCES, 1, {"resource_types": [CLIENT_METRICS]})
        assert [(r.resource_name, r.resource_type) for r in listed.config_resources] == [("kept", CLIENT_METRICS)]
        described = await conn.request(DESCRIBE_CONFIGS, 4, {"resources": [{
            "resource_type": CLIENT_METRICS, "resource_name": "kept", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
        assert {c.name: (c.value, c.config_source) for c in described.results[0].configs} == {
            "metrics": ("org.apache.kafka.", 7), "interval.ms": ("30000", 7), "match": ("", 5)}
        assert await subscribe(conn, "kept", metrics=None, interval_ms=None) == (0, None)
        assert (await conn.request(LIST_CONFIG_RESOURCES, 0, {})).config_resources == []
        await conn.close()
    finally:
        broker.stop()


async def test_without_a_metrics_endpoint_the_telemetry_apis_are_answered_but_not_advertised(tmp_path):
    """As Kafka without a metrics receiver: ApiVersions does not list them, so no client sends them, but one
    that does is answered, and what it pushes, unread, goes nowhere (bytes that are no OTLP are not refused)."""
    broker = BrokerProcess(str(tmp_path / "data")).start()
    try:
        conn = await KafkaConnection.open("127.0.0.1", broker.port)
        versions = await conn.request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert not {GET_SUBSCRIPTIONS, PUSH} & {k.api_key for k in versions.api_keys}
        subscription = await get(conn)
        assert subscription.error_code == 0 and subscription.requested_metrics == []
        assert await push(conn, subscription.client_instance_id, subscription.subscription_id,
                          b"not an OTLP message") == 0
        await conn.close()
    finally:
        broker.stop()
