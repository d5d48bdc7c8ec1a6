"""SASL/OAUTHBEARER on the server (RFC 7628, KIP-255): the client's initial response read as Kafka reads it, its
bearer token checked by a validator, and the exchange's error step.

- The initial response is ``n,[a=<authzid>],^A auth=Bearer <token> ^A [key=value ^A]* ^A``. One that does not
  parse fails the exchange with Kafka's generic words (its SaslException, whose text the client never sees).
- A token the validator refuses is answered as a challenge, Kafka's JSON ``{"status":"invalid_token"}`` (or
  ``insufficient_scope`` with the scope it lacks); the client's next message (``^A``) then fails the exchange
  with that JSON as the error message. An accepted token authenticates ``User:<principal>``; an authorization id
  other than the principal is refused. Extensions are accepted, as both of Kafka's validators accept them.
- The token's expiry is the credential's lifetime: the session (broker/security/sasl.py) ends with it, or
  sooner with ``connections.max.reauth.ms``, as Kafka's authenticator decides (KIP-368).

``UnsecuredValidator`` is Kafka's default server callback (OAuthBearerUnsecuredValidatorCallbackHandler, for
non-production use): an unsigned JWS (``alg`` none, no signature) whose options come from the listener's JAAS
entry. ``broker/security/jwks.py`` holds the production validator, signed JWTs checked against a JWKS.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass

from kbroker.broker.security.sasl import SaslFailure

SEPARATOR = "\x01"
_SASLNAME = "(?:[\\x01-\\x2b\\x2d-\\x3c\\x3e-\\x7f]|=2C|=3D)+"   # (a byte 1-127 but "=" and ",", or an escape)
_KEY, _VALUE = "[A-Za-z]+", "[\\x21-\\x7e \t\r\n]+"
_INITIAL = re.compile(f"n,(?:a=(?P<authzid>{_SASLNAME}))?,{SEPARATOR}(?P<pairs>(?:{_KEY}={_VALUE}{SEPARATOR})*)"
                      f"{SEPARATOR}", re.DOTALL)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
GENERIC_FAILURE = "Authentication failed during authentication due to invalid credentials with SASL mechanism " \
    "OAUTHBEARER"


@dataclass(frozen=True)
class Token:
    principal: str
    expires_ms: int            # the credential's lifetime ends (ms since the epoch)
    scope: frozenset[str]


class InvalidToken(Exception):
    """A token a validator refuses: ``status`` (invalid_token, insufficient_scope) and the scope it lacks."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.scope = scope

    def json(self) -> str:
        """Kafka's error challenge, key order and spacing included."""
        text = f'{{"status":"{self.status}"'
        if self.scope is not None:
            text += f', "scope":"{self.scope}"'
        return text + "}"


def parse_initial_response(message: bytes) -> tuple[str, str, dict[str, str]]:
    """(authorization id or "", the bearer token, the extensions). Raises SaslFailure with Kafka's generic words."""
    try:
        text = bytes(message).decode()
    except UnicodeDecodeError:
        raise SaslFailure(GENERIC_FAILURE) from None
    match = _INITIAL.fullmatch(text)
    if match is None:
        raise SaslFailure(GENERIC_FAILURE)
    pairs = dict(pair.split("=", 1) for pair in match.group("pairs").split(SEPARATOR) if pair)
    auth = _AUTH.fullmatch(pairs.pop("auth", ""))
    if auth is None or auth.group("scheme").lower() != "bearer":
        raise SaslFailure(GENERIC_FAILURE)
    return match.group("authzid") or "", auth.group("token"), pairs   # (the id as sent, escapes kept, as Kafka)


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")   # (NaN and Infinity, which Python's parser would take as numbers)


def b64url(text: str) -> bytes:
    """JOSE's base64url without padding, decoded (binascii.Error, a ValueError, if it is not)."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url_json(part: str, what: str) -> dict:
    """A JOSE header or claims set: base64url (unpadded) JSON object. Raises InvalidToken."""
    try:
        value = json.loads(b64url(part), parse_constant=_no_constant)
    except (binascii.Error, ValueError, RecursionError):   # (RecursionError: arrays nested past the stack)
        raise InvalidToken(f"malformed {what}") from None
    if not isinstance(value, dict):
        raise InvalidToken(f"malformed {what}")
    return value


def scope_of(claims: dict, name: str) -> frozenset[str]:
    value = claims.get(name)
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return frozenset(value)
    return frozenset()


def number_claim(claims: dict, name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidToken(f"the {name} claim is missing or not a number")
    return value


class UnsecuredValidator:
    """Kafka's unsecured-JWS validator. JAAS options: ``unsecuredValidatorPrincipalClaimName`` (sub),
    ``unsecuredValidatorScopeClaimName`` (scope), ``unsecuredValidatorRequiredScope`` (space-separated, none),
    ``unsecuredValidatorAllowableClockSkewMs`` (0)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.principal_claim = (options.get("unsecuredValidatorPrincipalClaimName") or "").strip() or "sub"
        self.scope_claim = (options.get("unsecuredValidatorScopeClaimName") or "").strip() or "scope"
        self.required_scope = (options.get("unsecuredValidatorRequiredScope") or "").split()
        skew = (options.get("unsecuredValidatorAllowableClockSkewMs") or "").strip() or "0"
        if not skew.lstrip("-").isdigit() or int(skew) < 0:
            raise ValueError(f"unsecuredValidatorAllowableClockSkewMs must be a non-negative integer: {skew}")
        self.skew_ms = int(skew)

    def validate(self, value: str, now_ms: int) -> Token:
        parts = value.split(".")
        if value.endswith("."):
            parts = parts[:-1] + [""]
        if len(parts) != 3:
            raise InvalidToken("an unsecured JWS has 3 dot-separated parts")
        header, claims = b64url_json(parts[0], "header"), b64url_json(parts[1], "claims")
        if header.get("alg") != "none" or parts[2]:
            raise InvalidToken("an unsecured JWS has algorithm none and no signature")
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise InvalidToken(f"no {self.principal_claim} claim of type String")
        issued = number_claim(claims, "iat", required=False)
        expires = number_claim(claims, "exp", required=True)
        if issued is not None and issued * 1000 - self.skew_ms > now_ms:
            raise InvalidToken("issued in the future")
        if now_ms >= expires * 1000 + self.skew_ms:
            raise InvalidToken("expired")
        if issued is not None and expires <= issued:
            raise InvalidToken("expires no later than it was issued")
        scope = scope_of(claims, self.scope_claim)
        if any(s not in scope for s in self.required_scope):
            # (the scope is told as Kafka's Java list prints: "[a, b]")
            raise InvalidToken("insufficient scope", "insufficient_scope", f"[{', '.join(self.required_scope)}]")
        return Token(principal, int(expires * 1000), scope)


class OAuthBearerExchange:
    """One OAUTHBEARER exchange: the initial response, and the ``^A`` after an error challenge."""

    def __init__(self, validator, wall_ms) -> None:
        """``validator.validate(token, now_ms)`` -> Token or InvalidToken; ``wall_ms()``: now, ms since the epoch."""
        self.validator = validator
        self.wall_ms = wall_ms
        self.principal: str | None = None
        self.user: str | None = None
        self.expires_ms: int | None = None   # the credential's lifetime (SaslSession reads it)
        self._error: str | None = None

    def step(self, message: bytes) -> bytes:
        if bytes(message) == SEPARATOR.encode() and self._error is not None:
            raise SaslFailure(self._error)
        self._error = None
        authzid, value, _extensions = parse_initial_response(message)
        try:
            token = self.validator.validate(value, self.wall_ms())
        except InvalidToken as refused:
            self.user = f"(a token refused: {refused})"
            self._error = refused.json()
            return self._error.encode()
        self.user = token.principal
        if authzid and authzid != token.principal:
            raise SaslFailure(f"Authentication failed: Client requested an authorization id ({authzid}) that is "
                              f"different from the token's principal name ({token.principal})")
        self.principal, self.expires_ms = "User:" + token.principal, token.expires_ms
        return b""
