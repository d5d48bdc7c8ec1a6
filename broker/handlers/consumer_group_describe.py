"""ConsumerGroupDescribe (KIP-848): epochs, assignor and each member's current and target assignment."""

from kbroker.broker.handlers.common import describe_groups_of_a_type
from kbroker.coordinators.group.consumer.describe import consumer_group_description
from kbroker.coordinators.group.consumer.model import ConsumerGroup
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.consumer_group_describe import CONSUMER_GROUP_DESCRIBE as API  # noqa: F401


def _refused(group_id: str, error: ErrorCode, message: str | None) -> dict:
    return {"error_code": error, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": -2147483648}


def handle(ctx, request):
    coordinator = ctx.broker.group_coordinator
    return describe_groups_of_a_type(ctx, request, _refused, ConsumerGroup, lambda group: consumer_group_description(
        group, coordinator.topic_names_by_id(), coordinator.config.consumer_assignors[0]))
