"""SyncGroup: the leader hands in the assignment; every member parks until it is stored."""

from kbroker.broker.handlers.common import answer_when_called, coordinator_error, group_shard, when_replicated
from kbroker.coordinators.group.coordinator import sync_result
from kbroker.protocol.messages.sync_group import SYNC_GROUP as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    error = coordinator_error(ctx, request.group_id, refuse_empty_id=True)
    shape = lambda result: {"throttle_time_ms": 0, **result}  # noqa: E731
    if error:
        return shape(sync_result(error))
    coordinator = ctx.broker.group_coordinator
    assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
    return when_replicated(ctx, *group_shard(ctx, request.group_id), answer_when_called(lambda respond: coordinator.sync_group(
        group_id=request.group_id, generation_id=request.generation_id, member_id=request.member_id,
        group_instance_id=request.group_instance_id, protocol_type=request.protocol_type,
        protocol_name=request.protocol_name, assignments=assignments, respond=respond), shape))
