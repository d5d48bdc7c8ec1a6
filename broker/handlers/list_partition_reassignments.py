"""ListPartitionReassignments (KIP-455): the reassignments in progress, from the active controller. Needs
Describe on the cluster."""

from kbroker.protocol.acls import DESCRIBE
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.list_partition_reassignments import LIST_PARTITION_REASSIGNMENTS as API  # noqa: F401  (the registry reads API)


async def handle(ctx, request):
    if not ctx.cluster_authorized(DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": ctx.needs(DESCRIBE), "topics": []}
    member = ctx.broker.cluster
    if member is None:   # one broker: nothing ever moves
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": []}
    controller = member.controller
    if controller is None or not controller.active:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                "error_message": "This broker is not the controller", "topics": []}
    return await controller.enqueue("list_reassignments", request)
