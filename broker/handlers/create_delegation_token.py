"""CreateDelegationToken: a token for the requester (or, with CreateTokens on the user, for another owner),
its renewers Users only; it expires after ``delegation.token.expiry.time.ms`` unless renewed, and lives no
longer than the request's maximum or ``delegation.token.max.lifetime.ms``. Kafka's checks, in its order."""

import base64
import uuid

from kbroker.broker.handlers.token_requests import parts, principal, token_requests_allowed
from kbroker.broker.security.delegation_tokens import TokenInfo
from kbroker.protocol.acls import CREATE_TOKENS, USER
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.create_delegation_token import (  # noqa: F401  (the registry reads API)
    CREATE_DELEGATION_TOKEN as API,
)

FAILED_AT = -1   # (the instants of a refusal before the token manager, as Kafka answers them)


async def handle(ctx, request):
    requester = ctx.connection.principal
    owner = principal(request.owner_principal_type, request.owner_principal_name) \
        if request.get("owner_principal_name") else requester
    owner_type, owner_name = parts(owner)
    requester_type, requester_name = parts(requester)
    answer = {"principal_type": owner_type, "principal_name": owner_name,
              "token_requester_principal_type": requester_type, "token_requester_principal_name": requester_name,
              "issue_timestamp_ms": FAILED_AT, "expiry_timestamp_ms": FAILED_AT, "max_timestamp_ms": FAILED_AT,
              "token_id": "", "hmac": b"", "throttle_time_ms": 0}
    if not token_requests_allowed(ctx):
        return {**answer, "error_code": ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED}
    if owner != requester and not ctx.authorized(CREATE_TOKENS, USER, owner):
        return {**answer, "error_code": ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED}
    if any(r.principal_type != "User" for r in request.renewers):
        return {**answer, "error_code": ErrorCode.INVALID_PRINCIPAL_TYPE}
    tokens, config = ctx.broker.tokens, ctx.broker.config
    # (past these checks Kafka's controller answers, with instants of 0 where it refuses)
    answer.update(issue_timestamp_ms=0, expiry_timestamp_ms=0, max_timestamp_ms=0)
    if not tokens.enabled:
        return {**answer, "error_code": ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED}
    now = ctx.broker.replica_manager.now_ms()
    lifetime = config["delegation.token.max.lifetime.ms"]
    if request.max_lifetime_ms > 0:
        lifetime = min(lifetime, request.max_lifetime_ms)
    max_ms = now + lifetime
    expiry_ms = min(max_ms, now + config["delegation.token.expiry.time.ms"])
    token_id = str_uuid()
    info = TokenInfo(token_id, owner, requester, [principal(r.principal_type, r.principal_name)
                                                  for r in request.renewers], now, max_ms, expiry_ms)
    await ctx.broker.admin.set_token(token_id, info)
    ctx.log.info("delegation_token_created", token_id=token_id, owner=owner)
    return {**answer, "error_code": ErrorCode.NONE, "issue_timestamp_ms": now, "expiry_timestamp_ms": expiry_ms,
            "max_timestamp_ms": max_ms, "token_id": token_id, "hmac": tokens.hmac(token_id)}


def str_uuid() -> str:
    """A token id as Kafka makes one (``Uuid.randomUuid().toString()``: 16 random bytes, base64url unpadded,
    never starting with "-")."""
    while (text := base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()).startswith("-"):
        pass
    return text
