"""ControlledShutdown: a stopping broker asks the active controller to move its leaderships first."""

from kbroker.protocol.acls import CLUSTER_ACTION
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.controlled_shutdown import CONTROLLED_SHUTDOWN as API  # noqa: F401  (the registry reads API)


async def handle(ctx, request):
    member = ctx.broker.cluster
    if not ctx.cluster_authorized(CLUSTER_ACTION):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "remaining_partitions": []}
    if member is None or member.controller is None or not member.controller.active:
        return {"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []}
    error, remaining = await member.controller.enqueue("controlled_shutdown", request.broker_id,
                                                    request.broker_epoch)
    return {"error_code": error, "remaining_partitions": [{"topic_name": t, "partition_index": p}
                                                           for t, p in remaining]}
