"""Delegation tokens (KIP-48) against Kafka and kbroker side by side: SASL listeners with PLAIN and
SCRAM-SHA-256 and ACLs on, the same ``delegation.token.secret.key`` on both; tokens created, described,
renewed and expired by their owner, a renewer and others, then presented in a SCRAM exchange
(``tokenauth=true``). Every answer must be Kafka's, its instants compared as differences (the lifetime a
token gets) and its ids and HMACs by presence. Without the key (the ``secured`` pair) both refuse."""

from __future__ import annotations

import asyncio
import base64

import pytest

from kbroker.client.connection import ConnectionClosed, KafkaConnection
from kbroker.client.sasl import SaslAuthenticationError, SaslCredentials, authenticate
from tests.reference.differential import same
from tests.waiting import settled
from tests.reference.secured import secured_pair
from tests.reference.test_authorization import call_as as as_user
from tests.reference.test_sasl_edges import metadata

pytestmark = pytest.mark.reference

CREATE, RENEW, EXPIRE, DESCRIBE = 38, 39, 40, 41
DAY, WEEK = 86_400_000, 604_800_000


@pytest.fixture(scope="module")
def tokens_pair(tmp_path_factory):
    yield from secured_pair(tmp_path_factory, {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "delegation.token.secret.key": "a-secret-both-brokers-share"})


async def known(target, *tokens):
    """Once every broker knows ``tokens``: Kafka's controller answers a creation before its metadata reaches the
    token caches (its own too), so a describe or renewal right after it may not find the token yet."""
    ids = {t.token_id for t in tokens}
    await settled(lambda: as_user("admin", target, DESCRIBE, 3, {"owners": None}),
                  lambda answer: ids <= {t.token_id for t in answer.tokens})


def create_body(renewers=(), max_lifetime_ms=-1, owner=None) -> dict:
    return {"owner_principal_type": owner and "User", "owner_principal_name": owner,
            "renewers": [{"principal_type": t, "principal_name": n} for t, n in renewers],
            "max_lifetime_ms": max_lifetime_ms}


def created(answer) -> dict:
    """A CreateDelegationToken answer with its instants as the lifetimes they give, ids and HMACs as presence."""
    return {"error": answer.error_code, "owner": (answer.principal_type, answer.principal_name),
            "requester": (answer.token_requester_principal_type, answer.token_requester_principal_name),
            "expires_after": answer.expiry_timestamp_ms - answer.issue_timestamp_ms,
            "lives_at_most": answer.max_timestamp_ms - answer.issue_timestamp_ms,
            "issued": answer.issue_timestamp_ms > 0, "id": bool(answer.token_id), "hmac_bytes": len(answer.hmac)}


def described(answer) -> dict:
    return {"error": answer.error_code, "tokens": sorted(
        ((t.principal_name, t.token_requester_principal_name, tuple(r.principal_name for r in t.renewers),
          t.expiry_timestamp - t.issue_timestamp, t.max_timestamp - t.issue_timestamp, len(t.hmac))
         for t in answer.tokens))}


async def token_authentication(target, token_id: str, hmac: bytes, mechanism="SCRAM-SHA-256"):
    """A SCRAM exchange presenting the token (kbroker's client, ``tokenauth=true``): its refusal in the broker's
    words, or that it set a session lifetime, then what the connection may do (Metadata, a token of its own)."""
    conn = await KafkaConnection.open("127.0.0.1", target.port, client_id="tokens-scram")
    try:
        try:
            lifetime_ms = await authenticate(conn, SaslCredentials(mechanism, token_id,
                                                                   base64.b64encode(hmac).decode(), token=True))
        except SaslAuthenticationError as refused:
            return ["refused", str(refused)]
        own = await conn.request_unchecked(CREATE, 3, create_body())
        return [lifetime_ms > 0, await metadata(conn), own.error_code]
    except (ConnectionClosed, ConnectionError, asyncio.IncompleteReadError):
        return "connection closed"
    finally:
        await conn.close()


async def test_a_token_is_created_described_and_lives_as_kafka_says(tokens_pair):
    async def scenario(target):
        mine = await as_user("admin", target, CREATE, 3, create_body([("User", "alice")]))
        short = await as_user("admin", target, CREATE, 3, create_body(max_lifetime_ms=60_000))
        for_alice = await as_user("admin", target, CREATE, 3, create_body(owner="alice"))
        await known(target, mine, short, for_alice)
        listed = await as_user("admin", target, DESCRIBE, 3, {"owners": None})
        by_alice = await as_user("alice", target, DESCRIBE, 3, {"owners": None})
        of_alice = await as_user("admin", target, DESCRIBE, 3, {"owners": [{"principal_type": "User",
                                                                            "principal_name": "alice"}]})
        nobody = await as_user("admin", target, DESCRIBE, 3, {"owners": []})
        for token in (mine, short, for_alice):   # (leave nothing for the next scenario to describe)
            await as_user("admin", target, EXPIRE, 2, {"hmac": token.hmac, "expiry_time_period_ms": -1})
        return {"created": [created(mine), created(short), created(for_alice)], "described": described(listed),
                "by_alice": described(by_alice), "of_alice": described(of_alice), "nobody": described(nobody)}
    found = await same(tokens_pair, scenario)
    assert found["created"][0]["expires_after"] == DAY and found["created"][0]["lives_at_most"] == WEEK


@pytest.mark.parametrize("case", ["a renewer that is a group", "another owner without CreateTokens",
                                  "an old version", "a version 2 answer"])
async def test_creations_kafka_refuses_or_answers_otherwise(tokens_pair, case):
    async def scenario(target):
        if case == "a renewer that is a group":
            return created(await as_user("admin", target, CREATE, 3, create_body([("Group", "g")])))
        if case == "another owner without CreateTokens":
            return created(await as_user("alice", target, CREATE, 3, create_body(owner="admin")))
        if case == "an old version":
            answer = await as_user("alice", target, CREATE, 1, create_body())
        else:
            answer = await as_user("alice", target, CREATE, 2, create_body())
        await as_user("alice", target, EXPIRE, 2, {"hmac": answer.hmac, "expiry_time_period_ms": -1})
        return created(answer)
    await same(tokens_pair, scenario)


async def test_renewals_and_expiries_by_owner_renewer_and_others(tokens_pair):
    async def scenario(target):
        token = await as_user("admin", target, CREATE, 3, create_body([("User", "alice")], max_lifetime_ms=3_600_000))
        await known(target, token)
        seen = {}
        for who, period in (("admin", 60_000), ("alice", -1), ("alice", 7_200_000)):
            answer = await as_user(who, target, RENEW, 2, {"hmac": token.hmac, "renew_period_ms": period})
            # (a renewal's expiry is now plus its period, capped by the token's maximum: told as that period)
            seen[f"renew by {who} for {period}"] = (answer.error_code, 0 if answer.error_code else
                                                    min(answer.expiry_timestamp_ms - token.issue_timestamp_ms,
                                                        3_600_000) // 60_000)
        unknown = await as_user("admin", target, RENEW, 2, {"hmac": b"\0" * 64, "renew_period_ms": 1000})
        seen["renew unknown"] = (unknown.error_code, unknown.expiry_timestamp_ms)
        later = await as_user("alice", target, EXPIRE, 2, {"hmac": token.hmac, "expiry_time_period_ms": 120_000})
        seen["expire later"] = (later.error_code, later.expiry_timestamp_ms > token.issue_timestamp_ms)
        ended = await as_user("admin", target, EXPIRE, 2, {"hmac": token.hmac, "expiry_time_period_ms": -1})
        seen["expire now"] = (ended.error_code, ended.expiry_timestamp_ms > 0)
        gone = await as_user("admin", target, RENEW, 2, {"hmac": token.hmac, "renew_period_ms": 1000})
        seen["renew gone"] = (gone.error_code, gone.expiry_timestamp_ms)
        again = await as_user("admin", target, EXPIRE, 2, {"hmac": token.hmac, "expiry_time_period_ms": -1})
        seen["expire gone"] = (again.error_code, again.expiry_timestamp_ms)
        return seen
    await same(tokens_pair, scenario)


async def test_a_renewal_by_someone_else_is_refused(tokens_pair):
    async def scenario(target):
        token = await as_user("admin", target, CREATE, 3, create_body())
        await known(target, token)
        renew = await as_user("alice", target, RENEW, 2, {"hmac": token.hmac, "renew_period_ms": 1000})
        expire = await as_user("alice", target, EXPIRE, 2, {"hmac": token.hmac, "expiry_time_period_ms": -1})
        await as_user("admin", target, EXPIRE, 2, {"hmac": token.hmac, "expiry_time_period_ms": -1})
        return [(renew.error_code, renew.expiry_timestamp_ms), (expire.error_code, expire.expiry_timestamp_ms)]
    await same(tokens_pair, scenario)


async def test_a_token_authenticates_as_its_owner_who_may_not_ask_for_tokens_with_it(tokens_pair):
    async def scenario(target):
        token = await as_user("admin", target, CREATE, 3, create_body(owner="alice"))
        await known(target, token)
        good = await token_authentication(target, token.token_id, bytes(token.hmac))
        wrong = await token_authentication(target, token.token_id, b"\1" * 64)
        unknown = await token_authentication(target, "no-such-token", bytes(token.hmac))
        not_theirs = await as_user("admin", target, EXPIRE, 2, {"hmac": token.hmac, "expiry_time_period_ms": -1})
        await as_user("alice", target, EXPIRE, 2, {"hmac": token.hmac, "expiry_time_period_ms": -1})
        await settled(lambda: as_user("admin", target, DESCRIBE, 3, {"owners": None}),
                      lambda answer: token.token_id not in {t.token_id for t in answer.tokens})
        gone = await token_authentication(target, token.token_id, bytes(token.hmac))
        return {"good": good, "wrong": wrong, "unknown": unknown, "expired by a super user": not_theirs.error_code,
                "gone": gone}
    await same(tokens_pair, scenario)


async def test_without_the_secret_key_tokens_are_off(secured):
    async def scenario(target):
        create = await as_user("admin", target, CREATE, 3, create_body())
        describe = await as_user("admin", target, DESCRIBE, 3, {"owners": None})
        renew = await as_user("admin", target, RENEW, 2, {"hmac": b"x", "renew_period_ms": 1})
        expire = await as_user("admin", target, EXPIRE, 2, {"hmac": b"x", "expiry_time_period_ms": 1})
        return [created(create), described(describe), (renew.error_code, renew.expiry_timestamp_ms),
                (expire.error_code, expire.expiry_timestamp_ms)]
    await same(secured, scenario)
