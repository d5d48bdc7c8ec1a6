"""DescribeDelegationToken: the tokens of the owners asked (null: all), each shown to its owner and renewers,
to whoever may Describe it (DELEGATION_TOKEN resource) or DescribeTokens its owner (USER resource)."""

from kbroker.broker.handlers.token_requests import parts, principal, token_requests_allowed
from kbroker.protocol.acls import DELEGATION_TOKEN, DESCRIBE, DESCRIBE_TOKENS, USER
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.describe_delegation_token import (  # noqa: F401  (the registry reads API)
    DESCRIBE_DELEGATION_TOKEN as API,
)


def handle(ctx, request):
    answer = {"tokens": [], "throttle_time_ms": 0}
    if not token_requests_allowed(ctx):
        return {**answer, "error_code": ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED}
    tokens = ctx.broker.tokens
    if not tokens.enabled:
        return {**answer, "error_code": ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED}
    if request.owners is not None and not request.owners:   # (an empty list asks for nothing)
        return {**answer, "error_code": ErrorCode.NONE}
    owners = None if request.owners is None else [principal(o.principal_type, o.principal_name)
                                                  for o in request.owners]
    me = ctx.connection.principal
    described = []
    for info in tokens.tokens.values():
        if owners is not None and not any(info.owner_or_renewer(o) for o in owners):
            continue
        if not (info.owner_or_renewer(me) or ctx.authorized(DESCRIBE, DELEGATION_TOKEN, info.token_id, False)
                or ctx.authorized(DESCRIBE_TOKENS, USER, info.owner, False)):
            continue
        owner_type, owner_name = parts(info.owner)
        requester_type, requester_name = parts(info.requester)
        described.append({
            "principal_type": owner_type, "principal_name": owner_name,
            "token_requester_principal_type": requester_type, "token_requester_principal_name": requester_name,
            "issue_timestamp": info.issue_ms, "expiry_timestamp": info.expiry_ms, "max_timestamp": info.max_ms,
            "token_id": info.token_id, "hmac": tokens.hmac(info.token_id),
            "renewers": [dict(zip(("principal_type", "principal_name"), parts(r))) for r in info.renewers]})
    return {**answer, "error_code": ErrorCode.NONE, "tokens": described}
