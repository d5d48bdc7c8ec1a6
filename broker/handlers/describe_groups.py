"""DescribeGroups: state, protocol and members of each group (member metadata only when Stable)."""

from kbroker.broker.handlers.common import coordinator_error
from kbroker.protocol.acls import DESCRIBE
from kbroker.protocol.messages.describe_groups import DESCRIBE_GROUPS as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    groups = []
    for group_id in request.groups:
        error = coordinator_error(ctx, group_id, DESCRIBE)
        if error:
            groups.append({"error_code": error, "group_id": group_id, "group_state": "", "protocol_type": "",
                           "protocol_data": "", "members": []})
        else:
            groups.append(ctx.broker.group_coordinator.describe_group(group_id))
    return {"throttle_time_ms": 0, "groups": groups}
