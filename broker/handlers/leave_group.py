"""LeaveGroup: one member (v0-2) or a batch of members, dynamic or static (v3+)."""

from kbroker.broker.handlers.common import coordinator_error, group_shard, when_replicated
from kbroker.protocol.messages.leave_group import LEAVE_GROUP as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    if ctx.api_version >= 3:
        # (no member, or a null list of them: answered with none, as Kafka answers)
        leaving = [(m.member_id, m.group_instance_id) for m in request.members or ()]
    else:
        leaving = [(request.member_id, None)]
    error = coordinator_error(ctx, request.group_id, refuse_empty_id=True)
    if error:
        errors = [error] * len(leaving)
    else:
        error, errors = ctx.broker.group_coordinator.leave_group(request.group_id, leaving)
    if ctx.api_version < 3:
        return when_replicated(ctx, *group_shard(ctx, request.group_id),
                               {"throttle_time_ms": 0, "error_code": error or errors[0]})
    members = [] if error else [{"member_id": member_id, "group_instance_id": instance_id, "error_code": e}
                                for (member_id, instance_id), e in zip(leaving, errors)]
    response = {"throttle_time_ms": 0, "error_code": error, "members": members}
    return response if error else when_replicated(ctx, *group_shard(ctx, request.group_id), response)
