"""RenewDelegationToken: its owner or a renewer moves a live token's expiry to now plus the renewal period
(at most ``delegation.token.expiry.time.ms``), never past its maximum lifetime."""

from kbroker.broker.handlers.token_requests import refusal, token_named
from kbroker.broker.security.delegation_tokens import TokenInfo
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.renew_delegation_token import (  # noqa: F401  (the registry reads API)
    RENEW_DELEGATION_TOKEN as API,
)


async def handle(ctx, request):
    info, refused = token_named(ctx, request.hmac)
    if refused is not None:
        return refused
    now = ctx.broker.replica_manager.now_ms()
    if info.expired(now):
        return refusal(ErrorCode.DELEGATION_TOKEN_EXPIRED)
    if not info.owner_or_renewer(ctx.connection.principal):
        return refusal(ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH)
    period = ctx.broker.config["delegation.token.expiry.time.ms"]
    if request.renew_period_ms > 0:
        period = min(period, request.renew_period_ms)
    expiry = min(info.max_ms, now + period)
    await ctx.broker.admin.set_token(info.token_id, TokenInfo(**{**vars(info), "expiry_ms": expiry}))
    return {"error_code": ErrorCode.NONE, "expiry_timestamp_ms": expiry, "throttle_time_ms": 0}
