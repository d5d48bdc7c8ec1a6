"""SASL/OAUTHBEARER as raw frames against Kafka and kbroker side by side, on two listeners of each: UNSECURED,
with Kafka's default validator of unsigned tokens (a required scope set in its JAAS entry), and SIGNED, with
Kafka's OAuthBearerValidatorCallbackHandler and a JSON Web Key Set in a file. Tokens good and bad, malformed
messages, an authorization id, extensions, re-authentication: every answer and what the connection does next
must be Kafka's, the error challenge's JSON included."""

from __future__ import annotations

import base64
import json
import time

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from kbroker.client.connection import KafkaConnection
from tests.brokerproc import BrokerProcess
from tests.reference.apache_kafka import SINGLE_NODE, KafkaNode, free_port
from tests.reference.differential import Target, documented, same
from tests.reference.test_sasl_edges import CLOSED, ask, handshake, metadata

pytestmark = pytest.mark.reference

SASL_AUTHENTICATE = 36
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int(n: int) -> str:
    return b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))


def jwks() -> dict:
    rsa_public, ec_public = KEY.public_key().public_numbers(), EC_KEY.public_key().public_numbers()
    return {"keys": [{"kty": "RSA", "kid": "rsa", "use": "sig", "n": _int(rsa_public.n), "e": _int(rsa_public.e)},
                     {"kty": "EC", "kid": "ec", "crv": "P-256", "x": b64(ec_public.x.to_bytes(32, "big")),
                      "y": b64(ec_public.y.to_bytes(32, "big"))}]}


def token(claims: dict | None = None, alg: str = "RS256", kid: str | None = "rsa", key=None, **drop) -> str:
    """A JWT: ``claims`` over a default subject, issue and expiry (``drop`` names claims to leave out); signed
    with ``alg`` by ``key`` (KEY, or EC_KEY for ES256), unsigned for ``none``."""
    now = int(time.time())
    body = {"sub": "alice", "iat": now, "exp": now + 3600, **(claims or {})}
    body = {k: v for k, v in body.items() if k not in drop}
    header = {"alg": alg, "typ": "JWT", **({"kid": kid} if kid else {})}
    signed = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(body).encode())}"
    if alg == "none":
        return signed + "."
    if alg == "ES256":
        r, s = decode_dss_signature((key or EC_KEY).sign(signed.encode(), ec.ECDSA(hashes.SHA256())))
        return f"{signed}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"
    if alg == "HS256":
        return f"{signed}.{b64(b'x' * 32)}"
    return f"{signed}.{b64((key or KEY).sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256()))}"


def unsecured(**claims) -> str:
    return token({"scope": "kafka", **claims}, alg="none", kid=None)


def initial(value: str, authzid: str = "", extensions: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {value}\x01{extensions}\x01".encode()


@pytest.fixture(scope="module")
def listeners(tmp_path_factory):
    """{"UNSECURED": [Kafka's, kbroker's], "SIGNED": [...]}: the two OAUTHBEARER listeners of each broker."""
    keys = tmp_path_factory.mktemp("jwks") / "jwks.json"
    keys.write_text(json.dumps(jwks()))
    url = keys.as_uri()

    def settings(unsecured_port: int, signed_port: int) -> dict[str, str]:
        return {"sasl.enabled.mechanisms": "OAUTHBEARER",
                "listener.name.unsecured.oauthbearer.sasl.jaas.config":
                    f'{MODULE} unsecuredLoginStringClaim_sub="admin" unsecuredValidatorRequiredScope="kafka";',
                "listener.name.signed.oauthbearer.sasl.jaas.config": f"{MODULE} ;",
                "listener.name.signed.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
                "listener.name.signed.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": url,
                "listener.name.signed.oauthbearer.sasl.oauthbearer.expected.issuer": "issuer",
                "unsecured.port": str(unsecured_port), "signed.port": str(signed_port)}

    node = KafkaNode(str(tmp_path_factory.mktemp("oauth-kafka")),
                     system_properties={"org.apache.kafka.sasl.oauthbearer.allowed.urls": url})
    kafka_ports = free_port(), free_port()
    extra = settings(*kafka_ports)
    ports = {name: extra.pop(f"{name}.port") for name in ("unsecured", "signed")}
    node.overrides = {**SINGLE_NODE, **extra,
                      "listeners": f"PLAINTEXT://127.0.0.1:{node.port},UNSECURED://127.0.0.1:{ports['unsecured']},"
                                   f"SIGNED://127.0.0.1:{ports['signed']},"
                                   f"CONTROLLER://127.0.0.1:{node.controller_port}",
                      "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},UNSECURED://127.0.0.1:"
                                              f"{ports['unsecured']},SIGNED://127.0.0.1:{ports['signed']}",
                      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,UNSECURED:SASL_PLAINTEXT,"
                                                        "SIGNED:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"}
    node.start()
    ours = free_port(), free_port()
    extra = settings(*ours)
    for name in ("unsecured", "signed"):
        extra.pop(f"{name}.port")
    broker = BrokerProcess(str(tmp_path_factory.mktemp("oauth-kbroker") / "data"), {
        **SINGLE_NODE, **extra,
        "listeners": f"PLAINTEXT://127.0.0.1:0,UNSECURED://127.0.0.1:{ours[0]},SIGNED://127.0.0.1:{ours[1]}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,UNSECURED:SASL_PLAINTEXT,SIGNED:SASL_PLAINTEXT"},
        test_overrides=False).start()
    yield {"UNSECURED": [Target("kafka", int(ports["unsecured"])), Target("kbroker", ours[0])],
           "SIGNED": [Target("kafka", int(ports["signed"])), Target("kbroker", ours[1])]}
    node.stop()
    broker.stop()


def _authenticate(conn, message: bytes):
    # (the session's lifetime is the token's, so it is compared by range: set, and at most the hour it has)
    return ask(conn, SASL_AUTHENTICATE, 2, {"auth_bytes": message},
               lambda a: (a.error_code, a.error_message, bytes(a.auth_bytes),
                          0 < a.session_lifetime_ms <= 3_600_000))


def exchange(*messages):
    """A handshake, then each message (and after an error challenge, the client's ^A), then Metadata."""
    async def run(conn):
        seen = [await handshake(conn, "OAUTHBEARER")]
        for message in messages:
            seen.append(await _authenticate(conn, message))
            if seen[-1] == CLOSED:
                return seen
        seen.append(await metadata(conn))
        return seen
    return run


CHALLENGE_ANSWER = b"\x01"
UNSECURED_CASES = {
    "a good token": exchange(initial(unsecured())),
    "an expired token": exchange(initial(unsecured(exp=int(time.time()) - 60)), CHALLENGE_ANSWER),
    "a token issued in the future": exchange(initial(unsecured(iat=int(time.time()) + 600)), CHALLENGE_ANSWER),
    "a token without exp": exchange(initial(token({"scope": "kafka"}, alg="none", kid=None, exp=None)),
                                    CHALLENGE_ANSWER),
    "a token without sub": exchange(initial(token({"scope": "kafka"}, alg="none", kid=None, sub=None)),
                                    CHALLENGE_ANSWER),
    "a token without the required scope": exchange(initial(unsecured(scope="other")), CHALLENGE_ANSWER),
    "a signed token on the unsecured listener": exchange(initial(token({"scope": "kafka"})), CHALLENGE_ANSWER),
    "an authorization id of another": exchange(initial(unsecured(), authzid="bob")),
    "an authorization id of the subject": exchange(initial(unsecured(), authzid="alice")),
    "extensions": exchange(initial(unsecured(), extensions="traceId=abc\x01tenant=t1\x01")),
    "another scheme": exchange(b"n,,\x01auth=Basic abc\x01\x01"),
    "no auth": exchange(b"n,,\x01\x01"),
    "not a gs2 header": exchange(b"p=tls-unique,,\x01auth=Bearer x\x01\x01"),
    "a second try after the challenge": exchange(initial(unsecured(scope="other")), initial(unsecured())),
    "re-authentication": lambda conn: _reauthenticate(conn, unsecured(), unsecured()),
    "re-authentication as another": lambda conn: _reauthenticate(conn, unsecured(), unsecured(sub="bob")),
}
SIGNED_CASES = {
    "a good token": exchange(initial(token({"iss": "issuer"}))),
    "an EC-signed token": exchange(initial(token({"iss": "issuer"}, alg="ES256", kid="ec"))),
    "no kid": exchange(initial(token({"iss": "issuer"}, kid=None))),
    "an unknown kid": exchange(initial(token({"iss": "issuer"}, kid="gone")), CHALLENGE_ANSWER),
    "signed by another key": exchange(initial(token({"iss": "issuer"}, key=OTHER_KEY)), CHALLENGE_ANSWER),
    "unsigned": exchange(initial(token({"iss": "issuer"}, alg="none", kid=None)), CHALLENGE_ANSWER),
    "HS256": exchange(initial(token({"iss": "issuer"}, alg="HS256")), CHALLENGE_ANSWER),
    "expired past the skew": exchange(initial(token({"iss": "issuer", "exp": int(time.time()) - 120})),
                                      CHALLENGE_ANSWER),
    "expired within the skew": exchange(initial(token({"iss": "issuer", "exp": int(time.time()) - 5,
                                                       "iat": int(time.time()) - 600})), CHALLENGE_ANSWER),
    "expired within the skew, issued after": exchange(initial(token({"iss": "issuer", "exp": int(time.time()) - 5})),
                                                      CHALLENGE_ANSWER),
    "not before a minute from now": exchange(initial(token({"iss": "issuer", "nbf": int(time.time()) + 60})),
                                             CHALLENGE_ANSWER),
    "without iat": exchange(initial(token({"iss": "issuer"}, iat=None)), CHALLENGE_ANSWER),
    "another issuer": exchange(initial(token({"iss": "elsewhere"})), CHALLENGE_ANSWER),
    "an audience none was expected of": exchange(initial(token({"iss": "issuer", "aud": "kafka"})),
                                                 CHALLENGE_ANSWER),
    "a blank subject": exchange(initial(token({"iss": "issuer", "sub": " "})), CHALLENGE_ANSWER),
    "a list of scopes": exchange(initial(token({"iss": "issuer", "scope": ["a", "b"]}))),
    "a malformed token": exchange(initial("abc.def.ghi"), CHALLENGE_ANSWER),
}


async def _reauthenticate(conn, first: str, second: str):
    """Authenticated with ``first``, then the exchange again with ``second`` (KIP-368), then Metadata."""
    seen = [await handshake(conn, "OAUTHBEARER"), await _authenticate(conn, initial(first))]
    seen += [await handshake(conn, "OAUTHBEARER"), await _authenticate(conn, initial(second))]
    seen.append(await metadata(conn))
    return seen


async def _compare(targets, case):
    async def scenario(target):
        conn = await KafkaConnection.open("127.0.0.1", target.port, client_id="differential-oauth")
        try:
            return await case(conn)
        finally:
            await conn.close()
    await same(targets, scenario)


KEPT = {"another scheme": documented("OAUTHBEARER with a scheme other than Bearer is refused with Kafka's generic "
                                     "words, where Kafka closes the connection without an answer")}


@pytest.mark.parametrize("case", [pytest.param(case, marks=KEPT.get(case, ())) for case in UNSECURED_CASES])
async def test_unsigned_tokens_on_kafkas_default_validator(listeners, case):
    await _compare(listeners["UNSECURED"], UNSECURED_CASES[case])


@pytest.mark.parametrize("case", list(SIGNED_CASES))
async def test_signed_tokens_checked_against_a_key_set(listeners, case):
    await _compare(listeners["SIGNED"], SIGNED_CASES[case])
