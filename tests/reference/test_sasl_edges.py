"""The SASL exchange out of turn, as raw frames on a SASL_PLAINTEXT listener of Kafka and of kbroker side by
side: a mechanism not enabled, a wrong password, an unknown user, a malformed or impersonating PLAIN token,
a request before authenticating, the exchange twice, and what each leaves of the connection."""

from __future__ import annotations

import asyncio

import pytest

from kbroker.client.connection import ConnectionClosed, KafkaConnection
from tests.reference.differential import same

pytestmark = pytest.mark.reference

API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36
CLOSED = "connection closed"


async def ask(conn, api_key, version, body, pick):
    """What the broker answers (``pick`` of it), or that it closed the connection instead."""
    try:
        return pick(await conn.request_unchecked(api_key, version, body, timeout=10))
    except (ConnectionClosed, ConnectionError, asyncio.IncompleteReadError):
        return CLOSED


def handshake(conn, mechanism="PLAIN", version=1):
    return ask(conn, SASL_HANDSHAKE, version, {"mechanism": mechanism},
               lambda a: (a.error_code, list(a.mechanisms)))


def _authenticate(conn, token: bytes, version=2):
    return ask(conn, SASL_AUTHENTICATE, version, {"auth_bytes": token},
               lambda a: (a.error_code, a.error_message, bytes(a.auth_bytes), a.get("session_lifetime_ms")))


def metadata(conn):
    return ask(conn, METADATA, 12, {"topics": [], "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False}, lambda a: len(a.brokers))


CASES = {
    "a mechanism not enabled": lambda conn: _steps(handshake(conn, "SCRAM-SHA-512")),
    "an unknown mechanism": lambda conn: _steps(handshake(conn, "NOPE")),
    "a wrong password": lambda conn: _steps(handshake(conn), lambda: _authenticate(conn, b"\0alice\0wrong")),
    "an unknown user": lambda conn: _steps(handshake(conn), lambda: _authenticate(conn, b"\0mallory\0x")),
    "an authorization id of another user": lambda conn: _steps(
        handshake(conn), lambda: _authenticate(conn, b"admin\0alice\0alice-secret")),
    "an authorization id of the same user": lambda conn: _steps(
        handshake(conn), lambda: _authenticate(conn, b"alice\0alice\0alice-secret"), lambda: metadata(conn)),
    "a token without separators": lambda conn: _steps(handshake(conn), lambda: _authenticate(conn, b"alice")),
    "an empty password": lambda conn: _steps(handshake(conn), lambda: _authenticate(conn, b"\0alice\0")),
    "metadata before the handshake": lambda conn: _steps(metadata(conn)),
    "authenticate before the handshake": lambda conn: _steps(_authenticate(conn, b"\0alice\0alice-secret")),
    "api versions, then the exchange": lambda conn: _steps(
        ask(conn, API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"},
            lambda a: a.error_code),
        lambda: handshake(conn), lambda: _authenticate(conn, b"\0alice\0alice-secret"), lambda: metadata(conn)),
    "the handshake twice": lambda conn: _steps(handshake(conn), lambda: handshake(conn)),
    "a second exchange once authenticated": lambda conn: _steps(
        handshake(conn), lambda: _authenticate(conn, b"\0alice\0alice-secret"), lambda: handshake(conn)),
    "SaslAuthenticate v0": lambda conn: _steps(
        handshake(conn), lambda: _authenticate(conn, b"\0alice\0alice-secret", version=0), lambda: metadata(conn)),
}


async def _steps(first, *then):
    """Each step's answer in turn, stopping at the first that finds the connection closed."""
    seen = [await first]
    for step in then:
        if seen[-1] == CLOSED:
            break
        seen.append(await step())
    return seen


@pytest.mark.parametrize("case", list(CASES))
async def test_the_sasl_exchange_out_of_turn(secured, case):
    async def scenario(target):
        conn = await KafkaConnection.open("127.0.0.1", target.port, client_id="differential-sasl")
        try:
            return await CASES[case](conn)
        finally:
            await conn.close()
    await same(secured, scenario)
