"""ShareGroupDescribe (KIP-932): a share group's epoch and each member's assignment."""

from kbroker.broker.handlers.common import coordinator_error, with_group_operations
from kbroker.protocol.acls import DESCRIBE
from kbroker.protocol.messages.share_group_describe import SHARE_GROUP_DESCRIBE as API  # noqa: F401


def handle(ctx, request):
    coordinator = ctx.broker.group_coordinator
    groups = []
    for group_id in request.group_ids:
        error = coordinator_error(ctx, group_id, DESCRIBE, refuse_empty_id=True)
        if error:
            groups.append({"error_code": error, "error_message": None, "group_id": group_id, "group_state": "",
                           "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
                           "authorized_operations": -2147483648})
        else:
            groups.append(coordinator.describe_share_group(group_id))
    return {"throttle_time_ms": 0, "groups": with_group_operations(ctx, groups, request.include_authorized_operations)}
