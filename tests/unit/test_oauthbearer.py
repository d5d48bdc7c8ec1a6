"""OAUTHBEARER's pieces without a broker: the initial response as Kafka parses it, Kafka's unsecured validator
at its edges, and how long a session lasts given a token's expiry and connections.max.reauth.ms."""

import base64
import json

import pytest

from kbroker.broker.security.oauthbearer import (GENERIC_FAILURE, InvalidToken, OAuthBearerExchange,
                                                  UnsecuredValidator, parse_initial_response)
from kbroker.broker.security.sasl import SaslFailure, lifetime_of_session

NOW_MS = 1_800_000_000_000


def unsigned(**claims) -> str:
    part = lambda v: base64.urlsafe_b64encode(json.dumps(v).encode()).rstrip(b"=").decode()   # noqa: E731
    return f"{part({'alg': 'none'})}.{part(claims)}."


def test_the_initial_response_yields_the_authorization_id_token_and_extensions():
    assert parse_initial_response(b"n,a=al=2Cice,\x01auth=Bearer t.o.k\x01k=v 1\x01\x01") == \
        ("al=2Cice", "t.o.k", {"k": "v 1"})
    assert parse_initial_response(b"n,,\x01auth=bearer abc==\x01\x01") == ("", "abc==", {})


@pytest.mark.parametrize("message", [b"n,,\x01auth=Basic x\x01\x01", b"n,,\x01\x01", b"y,,\x01auth=Bearer x\x01\x01",
                                     b"n,,\x01auth=Bearer x\x01", b"n,,\x01auth=Bearer a b\x01\x01", b"\xff"])
def test_a_malformed_initial_response_fails_with_kafkas_generic_words(message):
    with pytest.raises(SaslFailure, match=GENERIC_FAILURE):
        parse_initial_response(message)


@pytest.mark.parametrize("claims, status", [
    ({"sub": "a", "exp": NOW_MS / 1000 + 60}, None),
    ({"sub": "a", "exp": NOW_MS / 1000}, "invalid_token"),                        # expires now: expired
    ({"sub": "a", "exp": NOW_MS / 1000 + 60, "iat": NOW_MS / 1000 + 1}, "invalid_token"),   # issued later
    ({"sub": "a", "exp": NOW_MS / 1000 + 60, "iat": NOW_MS / 1000 + 60}, "invalid_token"),  # exp not after iat
    ({"sub": 7, "exp": NOW_MS / 1000 + 60}, "invalid_token"),
    ({"sub": "a", "exp": "soon"}, "invalid_token"),
    ({"sub": "a", "exp": float("inf")}, "invalid_token"),   # (json.dumps writes Infinity, which JSON has not)
    ({"sub": "a", "exp": float("nan")}, "invalid_token"),
    ({"sub": "a", "exp": NOW_MS / 1000 + 60, "x": [[[[[[[[[[]]]]]]]]]] * 1}, None),
])
def test_the_unsecured_validator_at_its_edges(claims, status):
    validator = UnsecuredValidator({})
    if status is None:
        assert validator.validate(unsigned(**claims), NOW_MS).principal == "a"
    else:
        with pytest.raises(InvalidToken) as refused:
            validator.validate(unsigned(**claims), NOW_MS)
        assert refused.value.status == status


def test_the_unsecured_validators_options_name_the_claims_the_scope_and_the_skew():
    validator = UnsecuredValidator({"unsecuredValidatorPrincipalClaimName": "user",
                                    "unsecuredValidatorRequiredScope": "a b",
                                    "unsecuredValidatorAllowableClockSkewMs": "5000"})
    token = validator.validate(unsigned(user="u", scope="b a c", exp=NOW_MS / 1000 - 4), NOW_MS)
    assert token.principal == "u" and token.scope == {"a", "b", "c"}
    with pytest.raises(InvalidToken) as refused:
        validator.validate(unsigned(user="u", scope=["a"], exp=NOW_MS / 1000 + 9), NOW_MS)
    assert refused.value.json() == '{"status":"insufficient_scope", "scope":"[a, b]"}'
    with pytest.raises(ValueError):
        UnsecuredValidator({"unsecuredValidatorAllowableClockSkewMs": "-1"})


def test_a_refused_token_is_a_challenge_and_the_clients_next_message_fails_with_it():
    exchange = OAuthBearerExchange(UnsecuredValidator({}), lambda: NOW_MS)
    challenge = exchange.step(f"n,,\x01auth=Bearer {unsigned(sub='a', exp=1)}\x01\x01".encode())
    assert challenge == b'{"status":"invalid_token"}' and exchange.principal is None
    with pytest.raises(SaslFailure, match='^{"status":"invalid_token"}$'):
        exchange.step(b"\x01")


def test_an_accepted_token_names_the_principal_and_its_expiry():
    exchange = OAuthBearerExchange(UnsecuredValidator({}), lambda: NOW_MS)
    assert exchange.step(f"n,a=a,\x01auth=Bearer {unsigned(sub='a', exp=NOW_MS / 1000 + 60)}\x01\x01".encode()) == b""
    assert (exchange.principal, exchange.expires_ms) == ("User:a", NOW_MS + 60_000)
    other = OAuthBearerExchange(UnsecuredValidator({}), lambda: NOW_MS)
    with pytest.raises(SaslFailure, match=r"authorization id \(b\) that is different from the token's principal"):
        other.step(f"n,a=b,\x01auth=Bearer {unsigned(sub='a', exp=NOW_MS / 1000 + 60)}\x01\x01".encode())


@pytest.mark.parametrize("expires, reauth, lifetime", [
    (None, 0, None),               # no credential expiry, no maximum: for ever
    (None, 5000, 5000),
    (NOW_MS + 60_000, 0, 60_000),  # a token's lifetime alone
    (NOW_MS + 60_000, 5000, 5000),
    (NOW_MS + 3000, 5000, 3000),
    (NOW_MS - 10, 5000, 0),        # already past: the session is over at once
])
def test_a_session_lasts_until_its_credential_expires_or_the_reauth_maximum(expires, reauth, lifetime):
    assert lifetime_of_session(expires, reauth, NOW_MS) == lifetime


def test_a_claims_set_nested_past_the_stack_is_refused_not_raised():
    part = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()   # noqa: E731
    deep = part(b'{"sub": "a", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    with pytest.raises(InvalidToken):
        UnsecuredValidator({}).validate(f"{part(json.dumps({'alg': 'none'}).encode())}.{deep}.", NOW_MS)
