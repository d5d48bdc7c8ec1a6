"""ExpireDelegationToken: its owner or a renewer ends a token now (a negative period) or sets its expiry to
now plus the period (never past its maximum lifetime)."""

from kbroker.broker.handlers.token_requests import refusal, token_named
from kbroker.broker.security.delegation_tokens import TokenInfo
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.expire_delegation_token import (  # noqa: F401  (the registry reads API)
    EXPIRE_DELEGATION_TOKEN as API,
)


async def handle(ctx, request):
    info, refused = token_named(ctx, request.hmac)
    if refused is not None:
        return refused
    now = ctx.broker.replica_manager.now_ms()
    if not info.owner_or_renewer(ctx.connection.principal):
        return refusal(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
    if request.expiry_time_period_ms < 0:   # at once: the token is gone
        await ctx.broker.admin.set_token(info.token_id, None)
        return {"error_code": ErrorCode.NONE, "expiry_timestamp_ms": now, "throttle_time_ms": 0}
    if info.expired(now):
        return refusal(ErrorCode.DELEGATION_TOKEN_EXPIRED)
    expiry = min(info.max_ms, now + request.expiry_time_period_ms)
    await ctx.broker.admin.set_token(info.token_id, TokenInfo(**{**vars(info), "expiry_ms": expiry}))
    return {"error_code": ErrorCode.NONE, "expiry_timestamp_ms": expiry, "throttle_time_ms": 0}
