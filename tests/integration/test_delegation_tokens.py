"""Delegation tokens (KIP-48) on real brokers: a token made on one broker of a cluster authenticates on every
other (ZooKeeper carries it) and, once expired, on none; tokens survive a restart; a session on a token ends
with the token; expired tokens are swept. (tests/reference/test_delegation_tokens.py compares the APIs with
Kafka's answer by answer; make test-java drives them with Kafka's Admin and a producer logging in with one.)"""

from __future__ import annotations

import asyncio
import base64
import time

import pytest

from kbroker.client.connection import KafkaConnection
from kbroker.client.sasl import SaslAuthenticationError, SaslCredentials
from tests.brokerproc import BrokerProcess
from tests.cluster import Cluster, wait_until
from tests.integration.test_oauthbearer import hung_up
from tests.integration.test_sasl import listener_port

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule required"
SECRET = "the-brokers-shared-secret"
CREATE, EXPIRE, DESCRIBE = 38, 40, 41


def settings(**more) -> dict[str, str]:
    return {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                f'{PLAIN_MODULE} user_alice="alice-secret" user_bob="bob-secret";',
            "delegation.token.secret.key": SECRET, **more}


async def as_alice(port: int, api_key: int, version: int, body: dict):
    conn = await KafkaConnection.open("127.0.0.1", port, sasl=SaslCredentials("PLAIN", "alice", "alice-secret"))
    try:
        return await conn.request(api_key, version, body)
    finally:
        await conn.close()


async def new_token(port: int, max_lifetime_ms: int = -1):
    return await as_alice(port, CREATE, 3, {"owner_principal_type": None, "owner_principal_name": None,
                                            "renewers": [], "max_lifetime_ms": max_lifetime_ms})


def with_token(token, mechanism: str = "SCRAM-SHA-256") -> SaslCredentials:
    return SaslCredentials(mechanism, token.token_id, base64.b64encode(bytes(token.hmac)).decode(), token=True)


async def authenticates(port: int, credentials: SaslCredentials) -> bool:
    try:
        conn = await KafkaConnection.open("127.0.0.1", port, sasl=credentials)
    except SaslAuthenticationError:
        return False
    await conn.close()
    return True


def test_a_token_made_on_one_broker_authenticates_on_every_broker_until_it_is_expired(tmp_path):
    cluster = Cluster(str(tmp_path / "cluster"), overrides=settings(**{"inter.broker.listener.name": "PLAINTEXT"}))
    cluster.start()
    try:
        ports = {i: listener_port(b, "SASL_PLAINTEXT") for i, b in cluster.brokers.items()}
        token = asyncio.run(new_token(ports[1]))
        assert token.error_code == 0
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):   # (the notification reaches the others soon)
            wait_until(lambda: all(asyncio.run(authenticates(p, with_token(token, mechanism)))
                                   for p in ports.values()), 30, 0.1, f"the token on every broker ({mechanism})")
        expired = asyncio.run(as_alice(ports[3], EXPIRE, 2, {"hmac": token.hmac, "expiry_time_period_ms": -1}))
        assert expired.error_code == 0
        wait_until(lambda: not any(asyncio.run(authenticates(p, with_token(token))) for p in ports.values()),
                   30, 0.1, "the token refused on every broker")
    finally:
        codes = cluster.stop()
    assert all(code == 0 for code in codes.values()), codes


def test_tokens_outlive_a_restart_and_a_wrong_secret_makes_them_useless(tmp_path):
    broker = BrokerProcess(str(tmp_path / "data"), settings()).start()
    try:
        port = listener_port(broker, "SASL_PLAINTEXT")
        token = asyncio.run(new_token(port))
        assert asyncio.run(authenticates(port, with_token(token)))
        assert broker.stop() == 0
        broker.start()
        port = listener_port(broker, "SASL_PLAINTEXT")
        assert asyncio.run(authenticates(port, with_token(token)))
        assert broker.stop() == 0
        # (an HMAC is the secret's: under another key the stored token has another one)
        broker.overrides["delegation.token.secret.key"] = "another-secret"
        broker.start()
        assert not asyncio.run(authenticates(listener_port(broker, "SASL_PLAINTEXT"), with_token(token)))
    finally:
        broker.stop()


@pytest.fixture
def sweeping_broker(tmp_path):
    broker = BrokerProcess(str(tmp_path / "data"), settings(**{
        "delegation.token.expiry.check.interval.ms": "200"})).start()
    broker.sasl_port = listener_port(broker, "SASL_PLAINTEXT")
    yield broker
    assert broker.stop() == 0


async def test_a_session_on_a_token_ends_with_the_token_and_the_sweep_removes_it(sweeping_broker):
    port = sweeping_broker.sasl_port
    token = await new_token(port, max_lifetime_ms=3000)
    conn = await KafkaConnection.open("127.0.0.1", port, sasl=with_token(token))
    started = time.monotonic()
    try:
        closed_at = await hung_up(conn, started + 10)
    finally:
        await conn.close()
    assert closed_at is not None and 1.5 < closed_at - started < 5, closed_at and closed_at - started

    async def listed() -> list:
        return list((await as_alice(port, DESCRIBE, 3, {"owners": None})).tokens)
    deadline = time.monotonic() + 10
    while await listed() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert await listed() == []
    assert not await authenticates(port, with_token(token))


async def test_a_client_on_a_plaintext_listener_or_on_a_token_gets_no_token(sweeping_broker):
    plain = await KafkaConnection.open("127.0.0.1", sweeping_broker.port)
    try:
        answer = await plain.request(CREATE, 3, {"owner_principal_type": None, "owner_principal_name": None,
                                                 "renewers": [], "max_lifetime_ms": -1})
    finally:
        await plain.close()
    assert answer.error_code == 64   # DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    token = await new_token(sweeping_broker.sasl_port)
    on_token = await KafkaConnection.open("127.0.0.1", sweeping_broker.sasl_port, sasl=with_token(token))
    try:
        again = await on_token.request(CREATE, 3, {"owner_principal_type": None, "owner_principal_name": None,
                                                   "renewers": [], "max_lifetime_ms": -1})
    finally:
        await on_token.close()
    assert again.error_code == 64 and (again.principal_type, again.principal_name) == ("User", "alice")
