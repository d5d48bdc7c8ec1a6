"""DescribeGroups: state, protocol and members of each group (member metadata only when Stable). A group
that does not exist is Dead; from v6 (KIP-1043) it is also GROUP_ID_NOT_FOUND, as Kafka 4 answers."""

from kbroker.broker.handlers.common import coordinator_order, split_by_right, with_group_operations
from kbroker.coordinators.group.state import GroupState
from kbroker.protocol.acls import DESCRIBE
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.describe_groups import DESCRIBE_GROUPS as API  # noqa: F401  (the registry reads API)

DEAD = GroupState.DEAD.value


def _refused(group_id: str, error: ErrorCode) -> dict:
    return {"error_code": error, "group_id": group_id, "group_state": "", "protocol_type": "", "protocol_data": "",
            "members": []}


def handle(ctx, request):
    """Kafka's order: the groups this principal may not describe, as asked; then the others as its group
    coordinator answers a batch (common.coordinator_order)."""
    allowed, refused = split_by_right(ctx, DESCRIBE, request.groups)
    groups = []
    for group_id in allowed:
        error = ctx.broker.coordination.group_coordinator_error(group_id)
        if error:
            groups.append(_refused(group_id, error))
        else:
            described = ctx.broker.group_coordinator.describe_group(group_id)
            if ctx.api_version >= 6 and described["group_state"] == DEAD:
                described.update(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} not found.")
            groups.append(described)
    groups = [_refused(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in refused] + \
        [groups[place] for place in coordinator_order(ctx, allowed)]
    asked = ctx.api_version >= 3 and request.include_authorized_operations
    return {"throttle_time_ms": 0, "groups": with_group_operations(ctx, groups, asked)}
