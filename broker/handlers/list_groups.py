"""ListGroups: every group this broker coordinates (v4: filtered by state; v5: by type, KIP-848: classic or
consumer). State and type names match whatever their case, as in Kafka."""

from kbroker.protocol.acls import DESCRIBE, GROUP
from kbroker.protocol.messages.list_groups import LIST_GROUPS as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    states = set(request.states_filter) if ctx.api_version >= 4 and request.states_filter else None
    types = set(request.types_filter) if ctx.api_version >= 5 and request.types_filter else None
    groups = ctx.broker.group_coordinator.list_groups(states, types)
    if not ctx.cluster_authorized(DESCRIBE, log_denied=False):   # else only the groups it may describe
        groups = [g for g in groups if ctx.authorized(DESCRIBE, GROUP, g["group_id"], log_denied=False)]
    return {"throttle_time_ms": 0, "error_code": 0, "groups": groups}
