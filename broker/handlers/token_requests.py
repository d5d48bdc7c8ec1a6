"""What the four delegation token APIs share: who may ask at all, and principals as Kafka writes them.

As Kafka, a token request is refused DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on a PLAINTEXT listener, from a
client that authenticated with a token, and from an SSL client without a certificate: a token is handed only
to someone the broker has authenticated by other means.
"""

from kbroker.broker.security.principal import ANONYMOUS
from kbroker.protocol.errors import ErrorCode


def token_requests_allowed(ctx) -> bool:
    conn = ctx.connection
    security = ctx.broker.listener_security.get(ctx.listener)
    protocol = security.protocol if security is not None else "PLAINTEXT"
    token_authenticated = conn.sasl is not None and conn.sasl.token_authenticated
    return not (token_authenticated or protocol == "PLAINTEXT" or (protocol == "SSL" and conn.principal == ANONYMOUS))


def principal(kind: str, name: str) -> str:
    return f"{kind}:{name}"


def parts(text: str) -> tuple[str, str]:
    """``User:alice`` -> ("User", "alice")."""
    kind, _, name = text.partition(":")
    return kind, name


def refusal(error, expiry_ms: int = 0) -> dict:
    """A Renew or Expire answer refusing the request (-1 for a request not allowed at all, 0 past that check,
    as Kafka's broker and controller answer)."""
    return {"error_code": error, "expiry_timestamp_ms": expiry_ms, "throttle_time_ms": 0}


def token_named(ctx, hmac: bytes):
    """(the token an HMAC names, None) or (None, the answer refusing a Renew or an Expire before its own
    checks): not allowed to ask, tokens off, no such token."""
    if not token_requests_allowed(ctx):
        return None, refusal(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1)
    tokens = ctx.broker.tokens
    if not tokens.enabled:
        return None, refusal(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
    info = tokens.for_hmac(hmac)
    return (info, None) if info is not None else (None, refusal(ErrorCode.DELEGATION_TOKEN_NOT_FOUND))
