"""ListGroups: every group this broker coordinates (v4: filtered by state; v5: by type, KIP-848). Every
group here is of the classic type; type names match whatever their case, as in Kafka."""

from kbroker.protocol.acls import DESCRIBE, GROUP
from kbroker.protocol.messages.list_groups import LIST_GROUPS as API  # noqa: F401  (the registry reads API)

CLASSIC = "classic"


def handle(ctx, request):
    states = set(request.states_filter) if ctx.api_version >= 4 and request.states_filter else None
    types = {t.lower() for t in request.types_filter} if ctx.api_version >= 5 else set()
    groups = ctx.broker.group_coordinator.list_groups(states) if not types or CLASSIC in types else []
    for g in groups:
        g["group_type"] = CLASSIC
    if not ctx.cluster_authorized(DESCRIBE, log_denied=False):   # else only the groups it may describe
        groups = [g for g in groups if ctx.authorized(DESCRIBE, GROUP, g["group_id"], log_denied=False)]
    return {"throttle_time_ms": 0, "error_code": 0, "groups": groups}
