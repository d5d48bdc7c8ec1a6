"""AlterPartition: a leader proposes an ISR change; only the active controller accepts it."""

from kbroker.protocol.acls import CLUSTER_ACTION
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.alter_partition import ALTER_PARTITION as API  # noqa: F401  (the registry reads API)


async def handle(ctx, request):
    member = ctx.broker.cluster
    if not ctx.cluster_authorized(CLUSTER_ACTION):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "topics": []}
    if member is None or member.controller is None or not member.controller.active:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}
    return await member.controller.enqueue("alter_partition", request, ctx.api_version)
