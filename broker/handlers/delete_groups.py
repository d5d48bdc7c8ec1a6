"""DeleteGroups: remove empty groups and their offsets (NON_EMPTY_GROUP while members remain)."""

from kbroker.broker.handlers.common import coordinator_error, when_replicated
from kbroker.protocol.acls import DELETE
from kbroker.protocol.messages.delete_groups import DELETE_GROUPS as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    results = {}
    local = []
    for group_id in request.groups_names:
        error = coordinator_error(ctx, group_id, DELETE)
        if error:
            results[group_id] = error
        else:
            local.append(group_id)
    results.update(ctx.broker.group_coordinator.delete_groups(local))
    response = {"throttle_time_ms": 0, "results": [{"group_id": g, "error_code": results[g]}
                                                   for g in request.groups_names]}
    partitions = [ctx.broker.group_coordinator.partition_for(g) for g in local if not results[g]]
    return when_replicated(ctx, "__consumer_offsets", partitions, response)
