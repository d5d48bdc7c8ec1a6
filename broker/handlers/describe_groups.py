"""DescribeGroups: state, protocol and members of each group (member metadata only when Stable). A group
that does not exist is Dead; from v6 (KIP-1043) it is also GROUP_ID_NOT_FOUND, as Kafka 4 answers."""

from kbroker.broker.handlers.common import coordinator_error, with_group_operations
from kbroker.coordinators.group.state import GroupState
from kbroker.protocol.acls import DESCRIBE
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.describe_groups import DESCRIBE_GROUPS as API  # noqa: F401  (the registry reads API)

DEAD = GroupState.DEAD.value


def handle(ctx, request):
    groups = []
    for group_id in request.groups:
        error = coordinator_error(ctx, group_id, DESCRIBE)
        if error:
            groups.append({"error_code": error, "group_id": group_id, "group_state": "", "protocol_type": "",
                           "protocol_data": "", "members": []})
        else:
            described = ctx.broker.group_coordinator.describe_group(group_id)
            if ctx.api_version >= 6 and described["group_state"] == DEAD:
                described.update(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} not found.")
            groups.append(described)
    asked = ctx.api_version >= 3 and request.include_authorized_operations
    return {"throttle_time_ms": 0, "groups": with_group_operations(ctx, groups, asked)}
