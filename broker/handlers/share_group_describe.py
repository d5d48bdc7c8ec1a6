"""ShareGroupDescribe (KIP-932): a share group's epoch and each member's assignment."""

from kbroker.broker.handlers.common import coordinator_order, split_by_right, with_group_operations
from kbroker.protocol.acls import DESCRIBE
from kbroker.protocol.error_messages import kafka_message
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.share_group_describe import SHARE_GROUP_DESCRIBE as API  # noqa: F401


def _refused(group_id: str, error: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": error, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": -2147483648}


def handle(ctx, request):
    """Kafka's order: the groups this principal may not describe, as asked; then empty ids; then the others as
    its group coordinator answers a batch (common.coordinator_order), a coordinator's refusal in its words."""
    coordinator = ctx.broker.group_coordinator
    allowed, denied = split_by_right(ctx, DESCRIBE, request.group_ids)
    refused = [_refused(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in denied]
    refused += [_refused("", ErrorCode.INVALID_GROUP_ID) for g in allowed if not g]
    allowed = [g for g in allowed if g]
    groups = []
    for group_id in allowed:
        error = ctx.broker.coordination.group_coordinator_error(group_id)
        groups.append(_refused(group_id, error, kafka_message(error)) if error
                      else coordinator.describe_share_group(group_id))
    groups = refused + [groups[place] for place in coordinator_order(ctx, allowed)]
    return {"throttle_time_ms": 0, "groups": with_group_operations(ctx, groups, request.include_authorized_operations)}
