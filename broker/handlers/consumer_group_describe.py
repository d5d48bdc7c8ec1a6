"""ConsumerGroupDescribe (KIP-848): epochs, assignor and each member's current and target assignment."""

from kbroker.broker.handlers.common import coordinator_order, split_by_right, with_group_operations
from kbroker.coordinators.group.consumer.describe import consumer_group_description
from kbroker.coordinators.group.consumer.model import ConsumerGroup
from kbroker.protocol.acls import DESCRIBE
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.consumer_group_describe import CONSUMER_GROUP_DESCRIBE as API  # noqa: F401


def _refused(group_id: str, error: ErrorCode, message: str | None = None) -> dict:
    return {"error_code": error, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": -2147483648}


def handle(ctx, request):
    """Kafka's order: the groups this principal may not describe, as asked; then empty ids; then the others as
    its group coordinator answers a batch (common.coordinator_order)."""
    coordinator = ctx.broker.group_coordinator
    allowed, denied = split_by_right(ctx, DESCRIBE, request.group_ids)
    refused = [_refused(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in denied]
    refused += [_refused("", ErrorCode.INVALID_GROUP_ID) for g in allowed if not g]
    allowed = [g for g in allowed if g]
    groups = []
    for group_id in allowed:
        error = ctx.broker.coordination.group_coordinator_error(group_id)
        group = coordinator.groups.get(group_id) if not error else None
        if error:
            groups.append(_refused(group_id, error))
        elif group is None:
            groups.append(_refused(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."))
        elif not isinstance(group, ConsumerGroup):
            groups.append(_refused(group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                                   f"Group {group_id} is not a consumer group."))
        else:
            groups.append(consumer_group_description(group, coordinator.topic_names_by_id(),
                                                     coordinator.config.consumer_assignors[0]))
    groups = refused + [groups[place] for place in coordinator_order(ctx, allowed)]
    return {"throttle_time_ms": 0, "groups": with_group_operations(ctx, groups, request.include_authorized_operations)}
