"""DeleteGroups: remove empty groups and their offsets (NON_EMPTY_GROUP while members remain); an empty share
group's share partitions lose their state at the share coordinator first, as Kafka deletes it. A group named
twice is answered once, and an empty id is a group that is not there (GROUP_ID_NOT_FOUND), as in Kafka."""

import asyncio

from kbroker.broker.handlers.common import coordinator_error, coordinator_order, when_replicated
from kbroker.coordinators.group.share.model import ShareGroup
from kbroker.protocol.acls import DELETE
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.delete_groups import DELETE_GROUPS as API  # noqa: F401  (the registry reads API)


async def handle(ctx, request):
    results = {}
    local = []
    coordinator = ctx.broker.group_coordinator
    names = list(dict.fromkeys(request.groups_names))   # (a group named twice is deleted and answered once)
    for group_id in names:
        error = coordinator_error(ctx, group_id, DELETE)
        group = coordinator.groups.get(group_id)
        if not error and isinstance(group, ShareGroup) and group.is_empty:
            error = await ctx.broker.shares.delete_group_state(group_id, group.state_partitions())
        if error:
            results[group_id] = error
        else:
            local.append(group_id)
    results.update(ctx.broker.group_coordinator.delete_groups(local))
    # (Kafka's order: the groups this principal may delete as its group coordinator answers a batch, then the rest)
    allowed = [g for g in names if results.get(g) != ErrorCode.GROUP_AUTHORIZATION_FAILED]
    ordered = [allowed[place] for place in coordinator_order(ctx, allowed)]
    ordered += [g for g in names if results.get(g) == ErrorCode.GROUP_AUTHORIZATION_FAILED]
    response = {"throttle_time_ms": 0, "results": [{"group_id": g, "error_code": results[g]} for g in ordered]}
    partitions = [ctx.broker.group_coordinator.partition_for(g) for g in local if not results[g]]
    answer = when_replicated(ctx, "__consumer_offsets", partitions, response)
    return await answer if isinstance(answer, asyncio.Future) else answer
