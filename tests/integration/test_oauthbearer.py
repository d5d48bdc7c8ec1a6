"""SASL/OAUTHBEARER through real clients: kafka-python, aiokafka and confluent-kafka with signed tokens checked
against a JSON Web Key Set (Kafka's OAuthBearerValidatorCallbackHandler), librdkafka's own unsecured tokens on
Kafka's default validator, a refused token told as Kafka tells it, and a session that ends with its token: the
client re-authenticates with a new one, or the connection closes. (tests/reference/test_oauthbearer.py compares
the exchange with Kafka's, answer by answer.)"""

from __future__ import annotations

import asyncio
import base64
import json
import time

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.abc import AbstractTokenProvider as AioTokenProvider
from confluent_kafka import KafkaError, Producer
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from kafka import KafkaConsumer, KafkaProducer
from kafka.net.sasl.oauth import AbstractTokenProvider

from kbroker.client.connection import ConnectionClosed, KafkaConnection
from tests.brokerproc import BrokerProcess
from tests.integration.test_sasl import listener_port

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwk(kid: str, key) -> dict:
    public = key.public_key().public_numbers()
    as_b64 = lambda n: b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))   # noqa: E731
    return {"kty": "RSA", "kid": kid, "n": as_b64(public.n), "e": as_b64(public.e)}


def signed_token(subject: str = "alice", lifetime_s: float = 3600, audience: str = "kbroker", kid: str = "k1",
                 key=KEY) -> str:
    now = time.time()
    header = b64(json.dumps({"alg": "RS256", "kid": kid, "typ": "JWT"}).encode())
    claims = b64(json.dumps({"sub": subject, "iat": int(now), "exp": int(now + lifetime_s), "aud": audience,
                             "iss": "https://idp.example"}).encode())
    signature = key.sign(f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{header}.{claims}.{b64(signature)}"


class Tokens(AbstractTokenProvider):
    def token(self):
        return signed_token()


class AioTokens(AioTokenProvider):
    async def token(self):
        return signed_token()


@pytest.fixture(scope="module")
def oauth_broker(tmp_path_factory):
    """One broker with two OAUTHBEARER listeners: SIGNED (a key set in a file, audience kbroker, an issuer) and
    UNSECURED (Kafka's default validator of unsigned tokens, requiring the scope kafka)."""
    root = tmp_path_factory.mktemp("oauth")
    keys = root / "jwks.json"
    keys.write_text(json.dumps({"keys": [jwk("k1", KEY)]}))
    broker = BrokerProcess(str(root / "data"), {
        "listeners": "PLAINTEXT://127.0.0.1:0,SIGNED://127.0.0.1:0,UNSECURED://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SIGNED:SASL_PLAINTEXT,UNSECURED:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.signed.oauthbearer.sasl.jaas.config": f"{MODULE} ;",
        "listener.name.signed.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "listener.name.signed.sasl.oauthbearer.jwks.endpoint.url": keys.as_uri(),
        "sasl.oauthbearer.expected.audience": "kbroker",
        "sasl.oauthbearer.expected.issuer": "https://idp.example",
        "listener.name.unsecured.oauthbearer.sasl.jaas.config":
            f'{MODULE} unsecuredValidatorRequiredScope="kafka";'}).start()
    broker.ports = {name: listener_port(broker, name) for name in ("SIGNED", "UNSECURED")}
    broker.key_set = keys
    yield broker
    assert broker.stop() == 0
    assert "Traceback" not in open(broker.log_path, encoding="utf-8").read()


def exchanges(broker: BrokerProcess, principal: str) -> list[str]:
    """The peer of each completed OAUTHBEARER exchange the broker has logged for ``principal``, in order."""
    with open(broker.log_path, encoding="utf-8") as log:
        return [line.split("peer=")[1].split()[0] for line in log if "sasl_authenticated" in line
                and "mechanism=OAUTHBEARER" in line and f"principal=User:{principal}" in line]


def authenticated(broker: BrokerProcess, principal: str) -> int:
    return len(exchanges(broker, principal))


async def hung_up(conn, deadline: float) -> float | None:
    """When the broker closed ``conn`` (monotonic time), asked Metadata every 0.1 s until it did or until
    ``deadline``; None if it never did."""
    body = {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    while time.monotonic() < deadline:
        try:
            await conn.request_unchecked(METADATA, 12, body, timeout=5)
        except (ConnectionClosed, ConnectionError, asyncio.IncompleteReadError):
            return time.monotonic()
        await asyncio.sleep(0.1)
    return None


def oauth_cb(subject: str, lifetime_s: float):
    return lambda _config: (signed_token(subject, lifetime_s), time.time() + lifetime_s)


def test_every_client_produces_and_consumes_with_a_signed_token(oauth_broker, topic_name):
    bootstrap = f"127.0.0.1:{oauth_broker.ports['SIGNED']}"
    security = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
                "sasl_oauth_token_provider": Tokens()}
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **security)
    for i in range(5):
        producer.send(topic_name, b"kp-%d" % i, partition=0)
    producer.flush(30)
    producer.close()

    async def aio():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=AioTokens())
        await p.start()
        try:
            for i in range(5):
                await p.send_and_wait(topic_name, b"aio-%d" % i, partition=0)
        finally:
            await p.stop()
    asyncio.run(aio())

    confluent = Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                          "sasl.mechanism": "OAUTHBEARER", "oauth_cb": oauth_cb("alice", 3600)})
    for i in range(5):
        confluent.produce(topic_name, b"ck-%d" % i, partition=0)
    assert confluent.flush(30) == 0

    consumer = KafkaConsumer(topic_name, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000, **security)
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == 15:
            break
    consumer.close()
    assert sorted(values) == sorted([b"kp-%d" % i for i in range(5)] + [b"aio-%d" % i for i in range(5)]
                                    + [b"ck-%d" % i for i in range(5)])
    assert authenticated(oauth_broker, "alice") >= 4


def test_librdkafkas_own_unsecured_token_on_kafkas_default_validator(oauth_broker, topic_name):
    settings = {"bootstrap.servers": f"127.0.0.1:{oauth_broker.ports['UNSECURED']}",
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                "enable.sasl.oauthbearer.unsecure.jwt": True}
    producer = Producer({**settings, "sasl.oauthbearer.config": "principal=carol scope=kafka"})
    producer.produce(topic_name, b"unsigned", partition=0)
    assert producer.flush(30) == 0
    errors = []
    refused = Producer({**settings, "sasl.oauthbearer.config": "principal=dave scope=other",
                        "error_cb": errors.append})
    refused.produce(topic_name, b"never", partition=0)
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        refused.poll(0.1)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    # Kafka's words reach the client: the JSON of the challenge, the scope it lacks as Kafka lists it
    assert '{"status":"insufficient_scope", "scope":"[kafka]"}' in errors[0].str()
    assert refused.flush(0) == 1   # (the record was never delivered)
    assert authenticated(oauth_broker, "carol") >= 1 and authenticated(oauth_broker, "dave") == 0


def test_a_client_reauthenticates_before_its_token_expires(oauth_broker, topic_name):
    """Tokens of 4 s: the session lasts as long as the token (no connections.max.reauth.ms is set), so
    librdkafka re-authenticates on the open connection with a fresh one (KIP-368) and keeps producing."""
    bootstrap = f"127.0.0.1:{oauth_broker.ports['SIGNED']}"
    delivered, failed = [], []

    def most_on_one_connection() -> int:
        peers = exchanges(oauth_broker, "erin")
        return max((peers.count(p) for p in peers), default=0)
    producer = Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "OAUTHBEARER", "oauth_cb": oauth_cb("erin", 4), "acks": "all",
                         "linger.ms": 0})
    deadline, i = time.monotonic() + 60, 0
    while most_on_one_connection() < 3 and time.monotonic() < deadline:
        producer.produce(topic_name, b"%d" % i, partition=0,
                         on_delivery=lambda err, msg: (failed if err else delivered).append(err or msg))
        producer.poll(0.05)
        i += 1
    assert producer.flush(30) == 0
    assert most_on_one_connection() >= 3, f"no connection re-authenticated twice: {exchanges(oauth_broker, 'erin')}"
    assert not failed and len(delivered) == i


async def test_a_connection_that_does_not_reauthenticate_is_closed_when_its_token_expires(oauth_broker):
    conn = await KafkaConnection.open("127.0.0.1", oauth_broker.ports["SIGNED"], client_id="no-reauth")
    try:
        assert (await conn.request_unchecked(SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"})).error_code == 0
        message = f"n,,\x01auth=Bearer {signed_token('frank', 3)}\x01\x01".encode()
        answer = await conn.request_unchecked(SASL_AUTHENTICATE, 2, {"auth_bytes": message})
        authenticated_at = time.monotonic()
        assert answer.error_code == 0 and 1000 < answer.session_lifetime_ms <= 3000
        closed_at = await hung_up(conn, authenticated_at + 10)
        assert closed_at is not None, "the connection outlived its token"
        assert closed_at - authenticated_at >= answer.session_lifetime_ms / 1000 - 0.2
    finally:
        await conn.close()


async def test_a_key_the_provider_adds_is_found_once_a_token_names_it(oauth_broker):
    """The provider rotates in a new signing key: the first token signed with it is refused (the broker has not
    read the key set since) and makes the broker read the set again; a token a moment later is accepted."""
    rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    oauth_broker.key_set.write_text(json.dumps({"keys": [jwk("k1", KEY), jwk("k2", rotated)]}))

    async def attempt() -> int:
        conn = await KafkaConnection.open("127.0.0.1", oauth_broker.ports["SIGNED"], client_id="rotation")
        try:
            await conn.request_unchecked(SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"})
            token = signed_token("grace", kid="k2", key=rotated)
            answer = await conn.request_unchecked(SASL_AUTHENTICATE, 2, {
                "auth_bytes": f"n,,\x01auth=Bearer {token}\x01\x01".encode()})
            return 0 if not answer.auth_bytes and answer.error_code == 0 else 1
        finally:
            await conn.close()
    outcomes = [await attempt()]
    deadline = time.monotonic() + 30   # (the set is read again at most every 10 s)
    while outcomes[-1] and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        outcomes.append(await attempt())
    assert outcomes[0] == 1 and outcomes[-1] == 0, outcomes
