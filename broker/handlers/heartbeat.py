"""Heartbeat: keeps a member's session alive and tells it when to rejoin."""

from kbroker.broker.handlers.common import coordinator_error
from kbroker.protocol.messages.heartbeat import HEARTBEAT as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    error = coordinator_error(ctx, request.group_id, refuse_empty_id=True) or \
        ctx.broker.group_coordinator.heartbeat(group_id=request.group_id, generation_id=request.generation_id,
                                               member_id=request.member_id, group_instance_id=request.group_instance_id)
    return {"throttle_time_ms": 0, "error_code": error}
