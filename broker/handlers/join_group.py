"""JoinGroup: parks until the group's join phase completes (or answers at once with an error)."""

from kbroker.broker.handlers.common import answer_when_called, client_host, coordinator_error, group_shard, when_replicated
from kbroker.coordinators.group.coordinator import join_result
from kbroker.protocol.messages.join_group import JOIN_GROUP as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    error = coordinator_error(ctx, request.group_id)
    shape = lambda result: {"throttle_time_ms": 0, **result}  # noqa: E731
    if error:
        return shape(join_result(error, request.member_id))
    coordinator = ctx.broker.group_coordinator
    return when_replicated(ctx, *group_shard(ctx, request.group_id), answer_when_called(lambda respond: coordinator.join_group(
        group_id=request.group_id, member_id=request.member_id, group_instance_id=request.group_instance_id,
        client_id=ctx.client_id or "", client_host=client_host(ctx),
        session_timeout_ms=request.session_timeout_ms, rebalance_timeout_ms=request.rebalance_timeout_ms,
        protocol_type=request.protocol_type, protocols=[(p.name, p.metadata) for p in request.protocols],
        require_known_member_id=ctx.api_version >= 4, respond=respond,
        skip_assignment_supported=ctx.api_version >= 9), shape))
