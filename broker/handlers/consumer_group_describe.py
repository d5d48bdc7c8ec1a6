"""ConsumerGroupDescribe (KIP-848): epochs, assignor and each member's current and target assignment."""

from kbroker.broker.handlers.common import coordinator_error, with_group_operations
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
    coordinator = ctx.broker.group_coordinator
    groups = []
    for group_id in request.group_ids:
        error = coordinator_error(ctx, group_id, DESCRIBE, refuse_empty_id=True)
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
    return {"throttle_time_ms": 0, "groups": with_group_operations(ctx, groups, request.include_authorized_operations)}
