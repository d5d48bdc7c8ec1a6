"""AlterUserScramCredentials: add, replace or delete users' SCRAM credentials.

The client sends the salted password (never the password); the broker keeps
the keys derived from it. Each user's alterations apply together or not at
all, and the answer has one result per user, as Kafka's.
"""

from collections import Counter

from kbroker.protocol.acls import ALTER
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.alter_user_scram_credentials import (  # noqa: F401  (the registry reads API)
    ALTER_USER_SCRAM_CREDENTIALS as API,
)
from kbroker.protocol.scram import MAX_ITERATIONS, MECHANISM_BY_TYPE, MIN_ITERATIONS, ScramCredential


def _problem(ctx, alteration, is_upsertion: bool, duplicates: Counter):
    """The error of one alteration, or None."""
    mechanism = MECHANISM_BY_TYPE.get(alteration.mechanism)
    if not alteration.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if duplicates[(alteration.name, alteration.mechanism)] > 1:
        return ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if is_upsertion:
        if alteration.iterations < MIN_ITERATIONS:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too few iterations (minimum {MIN_ITERATIONS})"
        if alteration.iterations > MAX_ITERATIONS:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too many iterations (maximum {MAX_ITERATIONS})"
        if not alteration.salt or not alteration.salted_password:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    elif ctx.broker.credentials.lookup(alteration.name, mechanism) is None:
        return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
    return None


async def handle(ctx, request):
    duplicates = Counter((a.name, a.mechanism) for a in [*request.deletions, *request.upsertions])
    users = list(dict.fromkeys(a.name for a in [*request.deletions, *request.upsertions]))
    if not ctx.cluster_authorized(ALTER):
        return {"throttle_time_ms": 0, "results": [{"user": u, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                    "error_message": ctx.needs(ALTER)} for u in sorted(users)]}
    failed: dict[str, tuple] = {}
    for alteration, is_upsertion in [*((d, False) for d in request.deletions), *((u, True) for u in request.upsertions)]:
        problem = _problem(ctx, alteration, is_upsertion, duplicates)
        if problem and alteration.name not in failed:
            failed[alteration.name] = problem
    results = []
    for user in users:
        if user in failed:
            error, message = failed[user]
            ctx.log.info("scram_credentials_refused", user=user, error=error.name, reason=message)
            results.append({"user": user, "error_code": error, "error_message": message})
            continue
        texts = ctx.broker.credentials.texts(user)
        for d in request.deletions:
            if d.name == user:
                texts.pop(MECHANISM_BY_TYPE[d.mechanism], None)
        for u in request.upsertions:
            if u.name == user:
                mechanism = MECHANISM_BY_TYPE[u.mechanism]
                texts[mechanism] = ScramCredential.from_salted_password(
                    mechanism, bytes(u.salt), bytes(u.salted_password), u.iterations).to_text()
        await ctx.broker.admin.set_scram_credentials(user, texts)
        ctx.log.info("scram_credentials_altered", user=user, mechanisms=sorted(texts))
        results.append({"user": user, "error_code": ErrorCode.NONE, "error_message": None})
    return {"throttle_time_ms": 0, "results": results}
