"""DescribeUserScramCredentials: which SCRAM mechanisms (and iteration counts) each user has, never the keys."""

from collections import Counter

from kbroker.protocol.acls import DESCRIBE
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.describe_user_scram_credentials import (  # noqa: F401  (the registry reads API)
    DESCRIBE_USER_SCRAM_CREDENTIALS as API,
)
from kbroker.protocol.scram import MECHANISMS


def handle(ctx, request):
    credentials = ctx.broker.credentials
    if not ctx.cluster_authorized(DESCRIBE):
        # (Kafka's error answer: no message, and one result per user asked, each unnamed)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": None, "results": [
                    {"user": "", "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None,
                     "credential_infos": []} for _ in request.users or []]}
    asked = [u.name for u in request.users] if request.users else sorted(credentials.users)
    counts = Counter(asked)
    results = []
    for user in dict.fromkeys(asked):
        held = credentials.users.get(user)
        if counts[user] > 1:
            error, message = ErrorCode.DUPLICATE_RESOURCE, \
                "Cannot describe SCRAM credentials for the same user twice in a single request"
        elif not held:
            error, message = ErrorCode.RESOURCE_NOT_FOUND, \
                f"Attempt to describe a user credential that does not exist: {user}"
        else:
            error, message = ErrorCode.NONE, None
        infos = [{"mechanism": MECHANISMS[m][1], "iterations": c.iterations} for m, c in sorted((held or {}).items())]
        results.append({"user": user, "error_code": error, "error_message": message,
                        "credential_infos": infos if not error else []})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "results": results}
